package lab

import (
	"context"
	"encoding/xml"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"sqm/internal/bloat"
	"sqm/internal/trace"
)

// TestTraceCompute checks the report's arithmetic on a made-up run: a
// 4 s trace (10 Mbit/s for 2 s, a 1 s stall, 10 again), a tester
// that saw 9 Mbit/s whenever there was capacity, and probes with a known
// delay.
func TestTraceCompute(t *testing.T) {
	tr, err := trace.Parse("t.steps", strings.NewReader("0 10mbit\n2 0\n3 10mbit\n4 end\n"))
	if err != nil {
		t.Fatal(err)
	}
	dirs := [2]traceDir{{tr: tr}, {}}
	o := Options{Link: DefaultLink(), Duration: 4 * time.Second}
	// tester: load phase starts at 2 s on its clock, samples every 200 ms
	res := &bloat.Result{StepS: 0.2, IdleS: 2, Phases: []bloat.Phase{{Name: "idle-before", EndS: 2}, {Name: "load", StartS: 2, EndS: 6}}}
	for i := 1; i <= 30; i++ {
		ts := float64(i) * 0.2
		res.Series.TS = append(res.Series.TS, ts)
		down := 0.0
		if tt := ts - 0.1 - 2; tt >= 0 && tt < 4 && !(tt >= 2 && tt < 3) {
			down = 9
		}
		res.Series.DownloadMbps = append(res.Series.DownloadMbps, down)
		res.Series.UploadMbps = append(res.Series.UploadMbps, 4)
	}
	// probes: trace start at 3 s on the prober's clock; idle ones 10 ms,
	// loaded down ones 10 ms + 5 ms per second into the trace, one lost
	off := 3 * time.Second
	var down, up []owdRec
	for i := 0; i < 700; i++ {
		sent := time.Duration(i) * owdEvery
		d := 10 * time.Millisecond
		if sent >= off {
			d += time.Duration(int((sent-off)/time.Second)) * 5 * time.Millisecond
		}
		r := owdRec{sent: sent, got: sent + d}
		if i == 650 {
			r.got = 0
		}
		down = append(down, r)
		up = append(up, owdRec{sent: sent, got: sent + 12*time.Millisecond})
	}
	smp := &rateSampler{down: []float64{9, 9, 9}, up: []float64{4, 4, 4, 4}}
	rep := &TraceReport{}
	if err := rep.compute(&dirs, o, res, off, down, up, smp); err != nil {
		t.Fatal(err)
	}
	s := rep.Series
	if want := []float64{10, 10, 0, 10}; !eq(s.CapacityDownMbps, want) {
		t.Errorf("capacity down %v, want %v", s.CapacityDownMbps, want)
	}
	if want := []float64{5, 5, 5, 5}; !eq(s.CapacityUpMbps, want) {
		t.Errorf("capacity up %v, want %v (the fixed link)", s.CapacityUpMbps, want)
	}
	if want := []float64{9, 9, 0, 9}; !eq(s.GoodputDownMbps, want) {
		t.Errorf("goodput down %v, want %v", s.GoodputDownMbps, want)
	}
	c := rep.Controller
	if math.Abs(c.Utilisation.Down-0.9) > 1e-9 || math.Abs(c.Utilisation.Up-0.8) > 1e-9 {
		t.Errorf("utilisation %v / %v, want 0.9 / 0.8", c.Utilisation.Down, c.Utilisation.Up)
	}
	if c.BaseOWDMs.Down != 10 || c.BaseOWDMs.Up != 12 {
		t.Errorf("base %v / %v, want 10 / 12 ms", c.BaseOWDMs.Down, c.BaseOWDMs.Up)
	}
	// 400 probes in the load: 100 each at 0, 5, 10, 15 ms, one lost
	if p := c.InducedOWDMs.Down; math.Abs(p.P50-5) > 1e-6 || math.Abs(p.P99-15) > 1e-6 || math.Abs(p.Max-15) > 1e-6 {
		t.Errorf("induced down %+v, want p50 5, p99 15, max 15", p)
	}
	if c.ProbeLossPct.Down != 0.25 || c.ProbeLossPct.Up != 0 {
		t.Errorf("loss %v / %v, want 0.25 / 0", c.ProbeLossPct.Down, c.ProbeLossPct.Up)
	}
	if want := []float64{0, 5, 10, 15}; !eq(s.InducedDownMs, want) {
		t.Errorf("induced down per second %v, want %v", s.InducedDownMs, want)
	}
	if fmt.Sprint(s.ProbesDown) != "[100 100 100 99]" {
		t.Errorf("probes down per second %v, want [100 100 100 99] (one lost in the last)", s.ProbesDown)
	}
	if want := []float64{9, 9, 9, -1}; !eq(s.RateDownMbps, want) {
		t.Errorf("rate down %v, want %v (-1: not read)", s.RateDownMbps, want)
	}
	// the plot of it: a well-formed picture with every panel and line
	path := filepath.Join(t.TempDir(), "p-trace.svg")
	rep.Trace.Down = TraceInfo{File: "t.steps", Format: "steps", Seconds: 4, MeanMbps: 7.5}
	if err := rep.WritePlot(path); err != nil {
		t.Fatal(err)
	}
	svg, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := xml.Unmarshal(svg, new(struct{})); err != nil {
		t.Errorf("plot is not well-formed XML: %v", err)
	}
	for _, want := range []string{"Download (Mbit/s)", "Upload induced OWD (ms)", "capacity", "shaping rate", "goodput", "t.steps", "<polyline"} {
		if !strings.Contains(string(svg), want) {
			t.Errorf("plot lacks %q", want)
		}
	}

	// too few idle probes: refused, not a made-up base
	if err := rep.compute(&dirs, o, res, 100*time.Millisecond, down, up, smp); err == nil || !strings.Contains(err.Error(), "base delay") {
		t.Errorf("err %v, want the base delay refused", err)
	}
}

func eq(a, b []float64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if math.Abs(a[i]-b[i]) > 1e-9 {
			return false
		}
	}
	return true
}

// TestGoodputBunchedSamples: on a starved VM the tester's samples run late
// and then come in a bunch, each the mean over its own short span; the
// goodput per second is their bits, not their values times the step.
func TestGoodputBunchedSamples(t *testing.T) {
	// 1 Mbit in each of 5 samples; the 2nd is 700 ms late, the 3rd and
	// 4th follow within a millisecond.
	at := []float64{0.2, 0.9, 0.901, 0.902, 1.0}
	res := &bloat.Result{StepS: 0.2, Series: bloat.Series{TS: []float64{0.2, 0.4, 0.6, 0.8, 1.0}, AtS: at}}
	bins := make([]float64, 2)
	for i := range at {
		from, to := sampleSpan(res, i)
		if i == 0 {
			continue
		}
		v := 1.0 / (to - from) // Mbit/s over its span
		res.Series.DownloadMbps = append(res.Series.DownloadMbps, v)
		spread(bins, from, to, v*(to-from))
	}
	if math.Abs(bins[0]-4) > 1e-9 || bins[1] != 0 {
		t.Errorf("bins %v, want [4 0] (four samples of 1 Mbit, all within the first second)", bins)
	}
	// a span across a second boundary is split by time
	b := make([]float64, 3)
	spread(b, 0.5, 2.5, 4)
	if want := []float64{1, 2, 1}; !eq(b, want) {
		t.Errorf("spread over 0.5..2.5 s = %v, want %v", b, want)
	}
}

// TestIdleRun: a --no-load run waits the idle lead, starts the trace
// once, waits its length and returns the phases with no samples; a
// cancelled context ends it with the context's error.
func TestIdleRun(t *testing.T) {
	o := Options{Idle: 20 * time.Millisecond, Duration: 30 * time.Millisecond}
	var began []time.Time
	start := time.Now()
	res, err := idleRun(context.Background(), o, func(at time.Time) { began = append(began, at) })
	if err != nil {
		t.Fatal(err)
	}
	if len(began) != 1 || began[0].Sub(start) < o.Idle {
		t.Errorf("trace started %d times (%v after the start), want once after the %v idle lead", len(began), began, o.Idle)
	}
	if time.Since(start) < o.Idle+o.Duration {
		t.Errorf("returned after %v, before the idle lead and the trace", time.Since(start))
	}
	if len(res.Series.TS) != 0 || len(res.Phases) != 1 || res.Phases[0].Name != "load" || res.Phases[0].StartS != o.Idle.Seconds() {
		t.Errorf("result %+v: want one load phase from the idle lead and no samples", res)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := idleRun(ctx, o, func(time.Time) { t.Error("trace started in a cancelled run") }); err != context.Canceled {
		t.Errorf("cancelled: %v, want context.Canceled", err)
	}
}
