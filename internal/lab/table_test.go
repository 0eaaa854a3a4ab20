package lab

import (
	"bytes"
	"flag"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"sqm/internal/plan"
	"sqm/internal/stats"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden from the current output")

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name+".golden")
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run 'go test ./internal/lab -run %s -update' to create it)", err, t.Name())
	}
	if !bytes.Equal(got, want) {
		t.Errorf("output differs from %s:\n--- got ---\n%s\n--- want ---\n%s", path, got, want)
	}
}

func TestWriteTable(t *testing.T) {
	// Numbers of the README §3 testbed, to check layout and the derived rows.
	before := Side{DownMbps: 19.1, UpMbps: 4.77,
		Idle:   stats.Summary{MedianMs: 21.0, Count: 10},
		Loaded: stats.Summary{MinMs: 21.1, P10Ms: 120, MedianMs: 322, MeanMs: 330, P90Ms: 649, MaxMs: 837, Count: 100, Sent: 102, LossPct: 1.96},
		Grade:  stats.Grade(301), RPM: stats.RPM(322)}
	after := Side{DownMbps: 15.8, UpMbps: 4.22,
		Idle:   stats.Summary{MedianMs: 21.2, Count: 10},
		Loaded: stats.Summary{MinMs: 21.4, P10Ms: 22, MedianMs: 26.3, MeanMs: 27, P90Ms: 31.8, MaxMs: 53.3, Count: 100, Sent: 100},
		Grade:  stats.Grade(5.1), RPM: stats.RPM(26.3)}
	link, err := DefaultLink().Resolve()
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := WriteTable(&b, link, "piece_of_cake/cake 18mbit down, 4500kbit up", before, after); err != nil {
		t.Fatal(err)
	}
	golden(t, "table", b.Bytes())
	if got := before.InducedMs(90); got != 628 {
		t.Errorf("induced p90 = %v, want 628", got)
	}
	if d, _ := GivenUp(Side{}, after); !math.IsNaN(d) {
		t.Errorf("given up with nothing before = %v, want NaN (shown as n/a)", d)
	}
	d, u := GivenUp(before, after)
	if d < 17.2 || d > 17.3 || u < 11.5 || u > 11.6 {
		t.Errorf("given up = %v / %v, want 17.3 / 11.5", d, u)
	}
}

func TestModemNetem(t *testing.T) {
	tests := []struct {
		name                        string
		link                        Link
		rate                        uint32
		pktOverhead, cell, cellOver int32
		wire1500                    int
		wantDelayNs                 int64
	}{
		{"ethernet default", DefaultLink(), 2_500_000, 0, 0, 0, 1514, 10_000_000},
		{"atm 44", Link{DownBits: 1_000_000, UpBits: 1_000_000, RTT: 40 * time.Millisecond, Buffer: 100, LinkLayer: "atm", Overhead: 44},
			125_000, 30, 48, 5, 1749, 20_000_000},
		{"ptm default", Link{DownBits: 50_000_000, UpBits: 10_000_000, RTT: 0, Buffer: 10, LinkLayer: "ptm", Overhead: -1},
			6_250_000, 16, 64, 1, 1560, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, err := tt.link.Resolve()
			if err != nil {
				t.Fatal(err)
			}
			down, _ := l.Modems()
			n, err := down.netem()
			if err != nil {
				t.Fatal(err)
			}
			r := n.Rate
			if r.Rate != tt.rate || r.PacketOverhead != tt.pktOverhead || r.CellSize != tt.cell || r.CellOverhead != tt.cellOver {
				t.Errorf("rate = %+v, want rate %d overhead %d cell %d/%d", *r, tt.rate, tt.pktOverhead, tt.cell, tt.cellOver)
			}
			if *n.Latency64 != tt.wantDelayNs || n.Qopt.Limit != l.Buffer {
				t.Errorf("latency %d limit %d, want %d %d", *n.Latency64, n.Qopt.Limit, tt.wantDelayNs, l.Buffer)
			}
			if got := down.wireBytes(1500); got != tt.wire1500 {
				t.Errorf("wire bytes of a 1500-byte packet = %d, want %d", got, tt.wire1500)
			}
		})
	}
}

func TestLinkResolveErrors(t *testing.T) {
	bad := []Link{
		{DownBits: 1000, UpBits: 1e6, Buffer: 10},
		{DownBits: 1e6, UpBits: 1e6, Buffer: 0},
		{DownBits: 1e6, UpBits: 1e6, Buffer: 10, LinkLayer: "docsis"},
		{DownBits: 1e6, UpBits: 1e6, Buffer: 10, RTT: -time.Second},
	}
	for _, l := range bad {
		if _, err := l.Resolve(); err == nil {
			t.Errorf("Resolve(%+v) = nil error, want one", l)
		}
	}
}

func TestFormatRate(t *testing.T) {
	if s := FormatRate(4_500_000); s != "4500Kbit" {
		t.Errorf("FormatRate(4.5e6) = %q", s)
	}
}

// TestShapingTextIngressPath checks the "after" line names the ingress path
// the applied plan has: the policers have no IFB.
func TestShapingTextIngressPath(t *testing.T) {
	for _, tc := range []struct {
		p    *plan.Plan
		want string
	}{
		{&plan.Plan{Ingress: &plan.Ingress{IFB: "ifb4wan0"}}, "(ingress via IFB)"},
		{&plan.Plan{Ingress: &plan.Ingress{RateKbit: 18000}}, "(ingress policed, no IFB)"},
		{&plan.Plan{}, "(ingress not shaped)"},
	} {
		got := ShapingReport{Script: "x", Qdisc: "y", Interface: "wan0", Plan: tc.p}.Text()
		if !strings.Contains(got, tc.want) {
			t.Errorf("%q lacks %q", got, tc.want)
		}
	}
}
