package metrics

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"sqm/internal/config"
	"sqm/internal/json"
	"sqm/internal/kernel"
	"sqm/internal/plan"
	"sqm/internal/service"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden")

// fakeKernel serves canned device status; a device it lacks is gone.
type fakeKernel map[string]kernel.DeviceStatus

func (f fakeKernel) Status(devs ...string) ([]kernel.DeviceStatus, error) {
	var out []kernel.DeviceStatus
	for _, d := range devs {
		ds, ok := f[d]
		if !ok {
			return nil, fmt.Errorf("status: %w", kernel.ErrNoLink)
		}
		out = append(out, ds)
	}
	return out, nil
}

var applied = time.Date(2026, 11, 29, 23, 40, 1, 500_000_000, time.UTC)

func state(iface, section, script, qdisc, ifb string, down, up uint64) *service.State {
	return &service.State{Interface: iface, Section: section, AppliedAt: applied,
		Queue: config.Queue{Interface: iface, Script: script, Qdisc: qdisc, Download: down, Upload: up},
		Owned: kernel.Owned{Interface: iface, IFB: ifb}}
}

func tin(i uint64) kernel.CakeTin {
	return kernel.CakeTin{ThresholdRate: 1250000 * (i + 1), TargetUS: 5000, IntervalUS: 100000,
		PeakDelayUS: uint32(1200 * (i + 1)), AvgDelayUS: uint32(300 * (i + 1)), BaseDelayUS: 12,
		SentPackets: uint32(1000 * (i + 1)), SentBytes: 1400000 * (i + 1), DroppedPackets: uint32(i * 3), DroppedBytes: 4500 * i,
		ECNMarkedPackets: uint32(i), ECNMarkedBytes: 1500 * i, ACKDropPackets: uint32(2 * i), ACKDropBytes: 132 * i,
		BacklogBytes: 1514, BacklogPackets: 1, SparseFlows: 1, BulkFlows: uint32(i), UnresponsiveFlows: uint32(i / 3)}
}

// fixture: eth1 layer_cake (cake diffserv4 egress, cake diffserv3 on its
// IFB), eth2 simple (htb with fq_codel leaves both ways), eth3
// simplest_tbf egress only with an odd section name, ppp0 shaped but
// gone, and the last test's result.
func fixture() (fakeKernel, []*service.State, *TestResult) {
	k := fakeKernel{
		"eth1": {Device: "eth1", Ifindex: 2, Qdiscs: []kernel.QdiscStatus{
			{Kind: "cake", Handle: plan.MakeHandle(0x8001, 0), Parent: plan.HandleRoot,
				Counters: kernel.Counters{Bytes: 14000000, Packets: 10000, Drops: 12, Overlimits: 300, Requeues: 1, BacklogBytes: 6056, BacklogPackets: 4, ECNMarks: 6},
				Cake:     &kernel.CakeStats{CapacityEstimate: 1250000, MemoryLimit: 4 << 20, MemoryUsed: 60000, Tins: []kernel.CakeTin{tin(0), tin(1), tin(2), tin(3)}}},
			{Kind: "ingress", Handle: plan.MakeHandle(0xffff, 0), Parent: plan.HandleIngress, Counters: kernel.Counters{Bytes: 123456789, Packets: 90000}},
		}},
		"ifb4eth1": {Device: "ifb4eth1", Ifindex: 7, Qdiscs: []kernel.QdiscStatus{
			{Kind: "cake", Handle: plan.MakeHandle(0x8002, 0), Parent: plan.HandleRoot,
				Counters: kernel.Counters{Bytes: 123000000, Packets: 89000, Drops: 41, Overlimits: 7000, ECNMarks: 3},
				Cake:     &kernel.CakeStats{CapacityEstimate: 10000000, MemoryLimit: 4 << 20, Tins: []kernel.CakeTin{tin(0), tin(1), tin(2)}}},
		}},
		"eth2": {Device: "eth2", Ifindex: 3, Qdiscs: []kernel.QdiscStatus{
			{Kind: "htb", Handle: plan.MakeHandle(1, 0), Parent: plan.HandleRoot, Counters: kernel.Counters{Bytes: 5000000, Packets: 4000, Drops: 7, Overlimits: 900, BacklogBytes: 3000, BacklogPackets: 2}},
			{Kind: "fq_codel", Handle: plan.MakeHandle(0x110, 0), Parent: plan.MakeHandle(1, 0x11), Counters: kernel.Counters{Bytes: 5000000, Packets: 4000, Drops: 7},
				FqCodel: &kernel.FqCodelStats{ECNMark: 2}},
		}},
		"ifb4eth2": {Device: "ifb4eth2", Ifindex: 8, Qdiscs: []kernel.QdiscStatus{
			{Kind: "htb", Handle: plan.MakeHandle(1, 0), Parent: plan.HandleRoot, Counters: kernel.Counters{Bytes: 9000000, Packets: 7000, Drops: 1, Overlimits: 1200}},
		}},
		"eth3": {Device: "eth3", Ifindex: 4, Qdiscs: []kernel.QdiscStatus{
			{Kind: "fq_codel", Handle: plan.MakeHandle(0x1, 0), Parent: plan.HandleRoot, Counters: kernel.Counters{Bytes: 100, Packets: 1},
				FqCodel: &kernel.FqCodelStats{ECNMark: 0}},
		}},
	}
	states := []*service.State{
		state("eth1", "wan", "layer_cake.qos", "cake", "ifb4eth1", 80000, 10000),
		state("eth2", "lan", "simple.qos", "fq_codel", "ifb4eth2", 50000, 20000),
		state("eth3", `odd "name"\x`, "simplest_tbf", "fq_codel", "", 0, 1000),
		state("ppp0", "dsl", "piece_of_cake.qos", "cake", "ifb4ppp0", 16000, 1000),
	}
	res := &TestResult{Mode: "rrul", Server: "192.0.2.1:12866", Start: time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC),
		DownloadBytesPerSecond: 71.5e6 / 8, UploadBytesPerSecond: 9.25e6 / 8,
		Idle:    Latency{Median: 12500 * time.Microsecond, P90: 14 * time.Millisecond},
		Loaded:  Latency{Median: 17250 * time.Microsecond, P90: 30500 * time.Microsecond, LossRatio: 0.015},
		Induced: 4750 * time.Microsecond, Grade: "A+", RPM: 3478.26, RPMBand: "Good"}
	return k, states, res
}

// fixtureAutorate is eth1's autorate: both directions, one one-way
// reflector, one round-trip one, one that never answered.
func fixtureAutorate() *service.AutorateStatus {
	return &service.AutorateStatus{Interface: "eth1", Section: "wan", Running: true, RateChanges: 41,
		Download: &service.AutorateDir{RateKbit: 72000, BaseKbit: 80000, MinKbit: 20000, MaxKbit: 160000, Load: 0.95, DelayMs: 3.5, TargetMs: 15,
			Reason: "hold", LastChange: "delay", Decisions: map[string]uint64{"hold": 200, "delay": 3, "increase": 17}},
		Upload: &service.AutorateDir{RateKbit: 10000, BaseKbit: 10000, MinKbit: 2500, MaxKbit: 20000, Load: 0.1, DelayMs: -1, TargetMs: 15,
			Reason: "drift", LastChange: "start", Decisions: map[string]uint64{"drift": 220}},
		Reflectors: []service.AutorateReflector{
			{Target: "udp-sqm 192.0.2.1:12866", OneWay: true, Replied: true, BaselineMs: [2]float64{5.25, 4.5}, RiseMs: [2]float64{3.5, 0.25}},
			{Target: "icmp-echo 192.0.2.2", Replied: true, BaselineMs: [2]float64{11}, RiseMs: [2]float64{2}, Lost: 1},
			{Target: "icmp-timestamp 192.0.2.3", Lost: 9},
		}}
}

// TestAddAutorate: the daemon's status file of a queue with autorate on
// becomes its Autorate; queues with autorate off get none.
func TestAddAutorate(t *testing.T) {
	k, states, _ := fixture()
	states[0].Queue.Autorate.Enabled = true // eth1
	store := &service.Store{Dir: t.TempDir()}
	js, _ := json.Marshal(fixtureAutorate())
	for _, i := range []string{"eth1", "eth2"} {
		if err := os.WriteFile(filepath.Join(store.Dir, i+".autorate.json"), js, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	snap, err := FromStates(k, states)
	if err != nil {
		t.Fatal(err)
	}
	if err := AddAutorate(snap, store, states); err != nil {
		t.Fatal(err)
	}
	for _, q := range snap.Queues {
		if want := q.Interface == "eth1"; (q.Autorate != nil) != want || (want && q.Autorate.Download.RateKbit != 72000) {
			t.Errorf("%s: autorate %+v", q.Interface, q.Autorate)
		}
	}
}

func render(t *testing.T, c *Collector, k StatusReader, states []*service.State, res *TestResult) []byte {
	t.Helper()
	snap, err := FromStates(k, states)
	if err != nil {
		t.Fatal(err)
	}
	snap.LastTest = res
	snap.Build = BuildInfo{Version: "v1.2.3", GoVersion: "go1.26.8"}
	for i := range snap.Queues {
		if snap.Queues[i].Interface == "eth1" {
			snap.Queues[i].Autorate = fixtureAutorate()
		}
	}
	var buf bytes.Buffer
	if err := c.Write(&buf, snap, nil); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestGolden(t *testing.T) {
	k, states, res := fixture()
	got := render(t, NewCollector(), k, states, res)
	golden := filepath.Join("testdata", "snapshot.prom.golden")
	if *update {
		if err := os.WriteFile(golden, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("output differs from %s (go test -run TestGolden -update rewrites it):\n%s", golden, got)
	}
	// Every declared family appears in the fixture, so the golden file
	// (and promtool below) covers every name.
	for _, f := range families {
		if !bytes.Contains(got, []byte("# TYPE "+f.name+" ")) {
			t.Errorf("family %s missing from the fixture's output", f.name)
		}
	}
}

// TestPromtool runs Debian's promtool over the golden output: it parses
// the exposition and lints names, units and HELP.
func TestPromtool(t *testing.T) {
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Skip("promtool not installed (Debian package prometheus; scripts/setup.sh installs it)")
	}
	k, states, res := fixture()
	out := render(t, NewCollector(), k, states, res)
	cmd := exec.Command(promtool, "check", "metrics")
	cmd.Stdin = bytes.NewReader(out)
	if msg, err := cmd.CombinedOutput(); err != nil || len(bytes.TrimSpace(msg)) > 0 {
		t.Fatalf("promtool check metrics: %v\n%s", err, msg)
	}
	// promtool must be able to fail: a counter without _total is linted.
	bad := "# HELP sqm_x_bytes x\n# TYPE sqm_x_bytes counter\nsqm_x_bytes 1\n"
	cmd = exec.Command(promtool, "check", "metrics")
	cmd.Stdin = strings.NewReader(bad)
	if err := cmd.Run(); err == nil {
		t.Fatal("promtool accepted a counter without _total: the check above proves nothing")
	}
}

func TestScrapeErrorAndNil(t *testing.T) {
	var buf bytes.Buffer
	if err := NewCollector().Write(&buf, nil, errors.New("boom")); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), "\nsqm_scrape_error 1\n") {
		t.Errorf("scrape error not shown:\n%s", &buf)
	}
}

func TestLabelEscaping(t *testing.T) {
	for in, want := range map[string]string{
		`plain`:       `plain`,
		`a"b`:         `a\"b`,
		`back\slash`:  `back\\slash`,
		"new\nline":   `new\nline`,
		"bad\xffutf8": "bad\uFFFDutf8",
	} {
		if got := escapeLabel(in); got != want {
			t.Errorf("escapeLabel(%q) = %q, want %q", in, got, want)
		}
	}
	// HELP text escapes backslash and LF but not the double quote.
	for in, want := range map[string]string{
		`plain`:           `plain`,
		`a"b`:             `a"b`,
		`back\slash`:      `back\\slash`,
		"new\nline \\ \n": `new\nline \\ \n`,
	} {
		if got := escapeHelp(in); got != want {
			t.Errorf("escapeHelp(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestTinName(t *testing.T) {
	for _, c := range []struct {
		n, i int
		want string
	}{{1, 0, "Tin 0"}, {3, 2, "Voice"}, {4, 2, "Video"}, {4, 3, "Voice"}, {8, 7, "Tin 7"}} {
		if got := TinName(c.n, c.i); got != c.want {
			t.Errorf("TinName(%d, %d) = %q, want %q", c.n, c.i, got, c.want)
		}
	}
}
