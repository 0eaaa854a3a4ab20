package cli

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"sqm/internal/config"
	"sqm/internal/kernel"
	"sqm/internal/plan"
	"sqm/internal/service"
)

// Another test file of this package may define -update too; share it.
func init() {
	if flag.Lookup("update") == nil {
		flag.Bool("update", false, "rewrite testdata/*.golden")
	}
}

func updateGolden() bool {
	f := flag.Lookup("update")
	return f != nil && f.Value.String() == "true"
}

// fakeStatus returns canned kernel status: a cake egress root with
// diffserv4 tins on eth1, an htb tree on its IFB.
type fakeStatus map[string]kernel.DeviceStatus

func (f fakeStatus) LinkMTU(iface string) (int, error) { return 1500, nil }

// Matches says eth1's tree differs, so the golden file shows drift.
func (f fakeStatus) Matches(p *plan.Plan) (bool, string, error) {
	if p.Interface == "eth1" {
		return false, "egress root: want cake 8001:,\n have fq_codel", nil
	}
	return true, "", nil
}

func (f fakeStatus) Status(devs ...string) ([]kernel.DeviceStatus, error) {
	var out []kernel.DeviceStatus
	for _, d := range devs {
		ds, ok := f[d]
		if !ok {
			return nil, fmt.Errorf("status %s: %w", d, kernel.ErrNoLink)
		}
		out = append(out, ds)
	}
	return out, nil
}

func TestStatusGolden(t *testing.T) {
	applied := time.Date(2026, 11, 29, 23, 40, 1, 0, time.UTC)
	now := applied.Add(5*time.Minute + 3*time.Second)
	tin := func(i uint64) kernel.CakeTin {
		return kernel.CakeTin{ThresholdRate: 1250000 * (i + 1), TargetUS: 5000, IntervalUS: 100000,
			PeakDelayUS: uint32(1200 * (i + 1)), AvgDelayUS: uint32(300 * (i + 1)), BaseDelayUS: 12,
			SentPackets: uint32(1000 * (i + 1)), SentBytes: 1400000 * (i + 1), DroppedPackets: uint32(i * 3),
			ECNMarkedPackets: uint32(i), BacklogBytes: 1514, SparseFlows: 1, BulkFlows: uint32(i), MaxSkbLen: 1514}
	}
	k := fakeStatus{
		"eth1": {Device: "eth1", Ifindex: 2, Filters: 1, Qdiscs: []kernel.QdiscStatus{
			{Kind: "cake", Handle: plan.MakeHandle(0x8001, 0), Parent: plan.HandleRoot,
				Counters: kernel.Counters{Bytes: 5600000, Packets: 4000, Drops: 12, Overlimits: 300, BacklogBytes: 1514, BacklogPackets: 1, ECNMarks: 6},
				Cake:     &kernel.CakeStats{Tins: []kernel.CakeTin{tin(0), tin(1), tin(2), tin(3)}}},
			{Kind: "ingress", Handle: plan.MakeHandle(0xffff, 0), Parent: plan.HandleIngress, Counters: kernel.Counters{Bytes: 123456789, Packets: 90000}},
		}},
		"ifb4eth1": {Device: "ifb4eth1", Ifindex: 5, Qdiscs: []kernel.QdiscStatus{
			{Kind: "htb", Handle: plan.MakeHandle(1, 0), Parent: plan.HandleRoot, Counters: kernel.Counters{Bytes: 123000000, Packets: 89000, Drops: 41, Overlimits: 7000}},
			{Kind: "fq_codel", Handle: plan.MakeHandle(0x110, 0), Parent: plan.MakeHandle(1, 0x10), Counters: kernel.Counters{Bytes: 123000000, Packets: 89000, Drops: 41}},
		}, Classes: []kernel.ClassStatus{
			{Kind: "htb", ClassID: plan.MakeHandle(1, 1), Parent: plan.HandleRoot, Counters: kernel.Counters{Bytes: 123000000, Packets: 89000}},
			{Kind: "htb", ClassID: plan.MakeHandle(1, 0x10), Parent: plan.MakeHandle(1, 1), Counters: kernel.Counters{Bytes: 123000000, Packets: 89000, Overlimits: 7000}},
		}},
		"eth2": {Device: "eth2", Ifindex: 3, Qdiscs: []kernel.QdiscStatus{{Kind: "noqueue", Parent: plan.HandleRoot}}},
	}
	wan := config.Defaults()
	wan.Name, wan.Interface, wan.Enabled, wan.Download, wan.Upload = "wan", "eth1", true, 85000, 10000
	wan.LinkLayer, wan.Overhead = "ethernet", 34
	cli := config.Defaults()
	cli.Name, cli.Interface, cli.Enabled, cli.Download, cli.Upload, cli.Script, cli.Qdisc = "cli", "ppp0", true, 0, 2000, "simplest", "fq_codel"
	states := []*service.State{
		{Interface: "eth1", Source: "/etc/config/sqm", Section: "wan", SectionPos: "/etc/config/sqm:3", AppliedAt: applied,
			Queue: wan, Owned: kernel.Owned{Interface: "eth1", IFB: "ifb4eth1"}},
		{Interface: "ppp0", Source: service.SourceCLI, Section: "cli", AppliedAt: applied, Queue: cli},
	}
	tests := []struct {
		name   string
		ifaces []string
		golden string
		err    bool
	}{
		{"all shaped", nil, "status_all.golden", false},
		{"named, unshaped and missing", []string{"eth2", "nosuch0"}, "status_named.golden", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rep := statusReport(k, states, tt.ifaces, now)
			var b bytes.Buffer
			printStatus(&b, rep, "/run/sqm", now)
			if err := rep.err(); (err != nil) != tt.err {
				t.Errorf("err() = %v; want error %v", err, tt.err)
			}
			path := filepath.Join("testdata", tt.golden)
			if updateGolden() {
				if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run with -update to create it)", err)
			}
			if !bytes.Equal(want, b.Bytes()) {
				t.Errorf("status output differs from %s (-update rewrites it):\n got:\n%s\nwant:\n%s", path, b.Bytes(), want)
			}
		})
	}
	var b bytes.Buffer
	printStatus(&b, statusReport(k, nil, nil, now), "/run/sqm", now)
	if got := b.String(); got != "sqm is not shaping any interface (no state in /run/sqm)\n" {
		t.Errorf("no state: %q", got)
	}
	if !errors.Is(fmt.Errorf("x: %w", kernel.ErrNoLink), kernel.ErrNoLink) {
		t.Fatal("errors.Is broken")
	}
}

func TestHumanBytes(t *testing.T) {
	tests := []struct {
		in   uint64
		want string
	}{{0, "0"}, {999, "999"}, {1000, "1.0k"}, {1514, "1.5k"}, {5600000, "5.6M"}, {123456789012, "123.5G"}}
	for _, tt := range tests {
		if got := humanBytes(tt.in); got != tt.want {
			t.Errorf("humanBytes(%d) = %q; want %q", tt.in, got, tt.want)
		}
	}
}
