package lab

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"testing"
	"time"

	"sqm/internal/testutil"
	"sqm/internal/trace"
)

// TestVMTraceFollow runs the lab's modem on testdata's vm-follow.steps
// (down: 8 -> 2 -> 8 Mbit/s, a 2 s stall at 11 s, 8 again; 18 s; up a
// fixed 2 Mbit/s) with sqm shaping far above it (20 Mbit/s), so the modem
// is the bottleneck and its FIFO stays full under the four download
// streams: goodput must then be the trace's capacity less the framing.
// The rates are low so that the emulated VM has CPU to spare, and the FIFO
// is 100 packets (600 ms at 2 Mbit/s): with 300 (1.8 s) the streams'
// losses in that queue ended in retransmission timeouts of seconds, which
// left the 2 Mbit/s step idle for parts of seconds with the modem on time
// (TCP's doing, measured: 0.97..2.21 Mbit/s per second).
//
// The bound, per step: over the whole seconds of a step from 1 s after
// its change, or a stall's length after a stall (TCP's retransmission
// timer backs off during a stall, so the senders come back up to that
// long after it, while the FIFO's packets leave at once; a run measured
// 2.3 and 1.3 Mbit/s in the two seconds after the stall, another 7.2 and
// 7.4), mean goodput is 85 % .. 103 % of capacity
// times the framing's efficiency (1448/1514), and each of those seconds
// 70 % .. 130 %. The first step is not judged: it is TCP's slow start
// into the FIFO, which overshoots and loses a window (the load's
// business, not the modem's). Above: tbf refills its 5 ms bucket only at changes, so
// nothing passes more than the rate; the per-second slack is the tester's
// samples, which are the client's reads: a sample taken L late moves L's
// share of a second's bytes into the next second, and the VM's emulated
// CPU runs them (and the modem's own schedule, see modem_late_ms) 100 to
// 300 ms late on a loaded host (a run with the modem at most 122 ms late
// read 1.55 then 2.16 Mbit/s in a 2 Mbit/s step whose mean was 98 %); the
// step mean takes that back out. Below: a modem that did not follow
// lands far outside (a rate left at 2 Mbit/s after the step up gives
// 25 %, one left at 8 in the 2 Mbit/s step 400 %; netem's enqueue-time
// rate would keep the old rate for a FIFO's length, 600 ms at 2 Mbit/s).
//
// The stall must be a stall: the down modem's tbf sends at most one
// packet between the change into it and the change out of it (the
// kernel's own count; one leaves at the stall's start: tbf starts each
// rate with a full bucket), the tester's samples wholly inside it (from
// 100 ms after its start, the last packet in flight landed) carry at most
// two packets, no ground-truth probe sent in it arrives before it ends,
// and goodput is back after it (the kick).
func TestVMTraceFollow(t *testing.T) {
	testutil.RequireVM(t)
	tr, err := trace.ReadFile("../trace/testdata/vm-follow.steps")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	start := time.Now()
	o := DefaultOptions()
	o.Link.DownBits, o.Link.UpBits = 8_000_000, 2_000_000
	o.Link.Buffer = 100
	o.Duration = tr.Length
	o.Idle = 2 * time.Second
	o.Shaping.DownBits, o.Shaping.UpBits = 20_000_000, 1_800_000
	o.Progress = func(p string) { t.Logf("[%5.1fs] %s", time.Since(start).Seconds(), p) }
	rep, err := RunTrace(ctx, o, Traces{Down: tr})
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := rep.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	t.Logf("trace report:\n%s", b.String())
	s := rep.Series
	for k := range s.TS {
		t.Logf("%2d s: capacity %5.2f goodput %5.2f Mbit/s, induced down %7.1f ms (max %7.1f) | up goodput %4.2f, induced %6.1f ms",
			k, s.CapacityDownMbps[k], s.GoodputDownMbps[k], s.InducedDownMs[k], s.InducedDownMaxMs[k], s.GoodputUpMbps[k], s.InducedUpMs[k])
	}

	eff := o.Link.Efficiency()
	steps := tr.Steps()
	checked := 0
	for i, st := range steps[1:] {
		from := int(st.Start.Seconds()) + 1
		if steps[i].Bits == 0 { // after a stall: its length
			from = int(st.Start.Seconds()) + int((st.Start - steps[i].Start).Seconds())
		}
		to := int(tr.Length.Seconds())
		if i+2 < len(steps) {
			to = int(steps[i+2].Start.Seconds())
		}
		c := float64(st.Bits) / 1e6
		if c == 0 || to <= from {
			continue
		}
		var sum float64
		for k := from; k < to; k++ {
			checked++
			sum += s.GoodputDownMbps[k]
			if r := s.GoodputDownMbps[k] / (c * eff); r < 0.70 || r > 1.30 {
				t.Errorf("second %d: goodput %.2f Mbit/s is %.0f%% of the trace's %.1f Mbit/s less framing, want 70..130%%", k, s.GoodputDownMbps[k], 100*r, c)
			}
		}
		mean := sum / float64(to-from)
		if r := mean / (c * eff); r < 0.85 || r > 1.03 {
			t.Errorf("step at %v (%.1f Mbit/s), seconds %d..%d: mean goodput %.2f Mbit/s is %.0f%% of capacity less framing, want 85..103%%", st.Start, c, from, to-1, mean, 100*r)
		}
	}
	if checked < 5 {
		t.Errorf("only %d settled seconds checked", checked)
	}
	if rep.ModemLateMs > 50 {
		t.Logf("note: the modem's schedule ran up to %.0f ms late: the VM was short of CPU (host load?)", rep.ModemLateMs)
	}

	// The stall: [11 s, 13 s) in vm-follow.steps.
	stall0, stall1 := 11.0, 13.0
	var inside float64
	n := 0
	t0 := rep.loadT0(rep.Load)
	for i := range rep.Load.Series.TS {
		from, to := sampleSpan(rep.Load, i)
		if from-t0 >= stall0+0.1 && to-t0 <= stall1 {
			inside += rep.Load.Series.DownloadMbps[i] * (to - from) * 1e6 / 8
			n++
		}
	}
	if n < 5 {
		t.Errorf("only %d tester samples inside the stall", n)
	}
	if inside > 2*tcpPayload {
		t.Errorf("%.0f bytes of goodput arrived inside the stall (%d samples), want at most 2 packets: the stall trickles", inside, n)
	}
	// The kernel's count: what the down modem's tbf sent between the
	// change into the stall and the change out of it.
	var into, out *modemChange
	for i := range rep.modemLog {
		c := &rep.modemLog[i]
		if c.dir == 0 && c.bits == 0 {
			into = c
		} else if c.dir == 0 && into != nil && out == nil {
			out = c
		}
	}
	if into == nil || out == nil {
		t.Errorf("modem log %+v has no change into and out of the stall", rep.modemLog)
	} else if n := out.sentBefore - into.sentAfter; n > 1 {
		t.Errorf("the down modem sent %d packets during the stall (%v..%v), want at most 1 (its full bucket at the change)", n, into.at, out.at)
	} else {
		t.Logf("the down modem sent %d packet(s) during the stall", n)
	}
	early := 0
	for _, r := range rep.probeDown {
		sent, got := (r.sent - rep.probeOff).Seconds(), (r.got - rep.probeOff).Seconds()
		if r.got > 0 && sent >= stall0+0.01 && sent < stall1 && got < stall1-0.005 {
			early++
		}
	}
	if early > 0 {
		t.Errorf("%d ground-truth probes sent in the stall arrived before it ended", early)
	}
	if p := rep.Controller.InducedOWDMs.Down.Max; p < 1900 {
		t.Errorf("max induced down delay %.0f ms: a probe sent at the stall's start must wait it out (2 s)", p)
	}
	// utilisation is the series' goodput over its capacity
	var g, c float64
	for k := range s.TS {
		g, c = g+s.GoodputDownMbps[k], c+s.CapacityDownMbps[k]
	}
	if u := rep.Controller.Utilisation.Down; math.Abs(u-g/c) > 1e-9 || u <= 0 || u > 1 {
		t.Errorf("download utilisation %.4f, the series say %.4f; want that, in (0, 1]", u, g/c)
	}
	if rep.Controller.Name != "fixed" || rep.Controller.RateChanges != 0 || rep.Controller.CPUSeconds != 0 {
		t.Errorf("controller %+v, want fixed with no changes", rep.Controller)
	}
	if rep.ModemChanges != len(steps)-1 {
		t.Errorf("modem changed its rate %d times, want %d (one per step)", rep.ModemChanges, len(steps)-1)
	}
	if rs := s.RateDownMbps; len(rs) == 0 || rs[len(rs)/2] != 20 {
		t.Errorf("shaping rate read from the kernel %v, want 20 Mbit/s", rs)
	}

	// The output contract's members.
	js, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	var back struct {
		Link  map[string]json.RawMessage `json:"link"`
		Trace map[string]struct {
			File     *string  `json:"file"`
			Seconds  *float64 `json:"seconds"`
			MeanMbps *float64 `json:"mean_mbps"`
		} `json:"trace"`
		Controller struct {
			Name         *string                               `json:"name"`
			InducedOWDMs map[string]map[string]json.RawMessage `json:"induced_owd_ms"`
			Utilisation  map[string]*float64                   `json:"utilisation"`
			RateChanges  *int                                  `json:"rate_changes"`
			CPUSeconds   *float64                              `json:"cpu_seconds"`
		} `json:"controller"`
	}
	if err := json.Unmarshal(js, &back); err != nil {
		t.Fatal(err)
	}
	if back.Link["down_bits"] == nil || back.Link["namespaces"] == nil {
		t.Errorf("link lacks down_bits/namespaces: %v", back.Link)
	}
	for _, d := range []string{"down", "up"} {
		tr := back.Trace[d]
		if tr.File == nil || tr.Seconds == nil || tr.MeanMbps == nil {
			t.Errorf("trace.%s = %+v", d, tr)
		}
		for _, p := range []string{"p50", "p95", "p99"} {
			if back.Controller.InducedOWDMs[d][p] == nil {
				t.Errorf("controller.induced_owd_ms.%s lacks %s", d, p)
			}
		}
		if back.Controller.Utilisation[d] == nil {
			t.Errorf("controller.utilisation lacks %s", d)
		}
	}
	if back.Controller.Name == nil || back.Controller.RateChanges == nil || back.Controller.CPUSeconds == nil {
		t.Errorf("controller lacks name, rate_changes or cpu_seconds: %s", js[:min(len(js), 400)])
	}
	if *back.Trace["down"].File != "vm-follow.steps" || *back.Trace["up"].File != "" {
		t.Errorf("trace files %q / %q", *back.Trace["down"].File, *back.Trace["up"].File)
	}
}
