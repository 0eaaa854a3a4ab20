package bloat

import (
	"testing"
	"time"
)

// SplitLoaded takes each load phase's first warmup apart, leaves idle
// phases out, and counts lost probes as sent.
func TestSplitLoaded(t *testing.T) {
	r := &Result{
		Phases: []Phase{
			{Name: "idle-before", StartS: 0, EndS: 2},
			{Name: "download", StartS: 2, EndS: 7},
			{Name: "upload", StartS: 7, EndS: 12},
			{Name: "idle-after", StartS: 12, EndS: 14},
		},
	}
	add := func(ts, rtt float64, lost bool) {
		r.Samples = append(r.Samples, Sample{TS: ts, RTTMs: rtt, Lost: lost})
	}
	add(1, 5, false)       // idle: neither
	add(2.0, 200, false)   // download start
	add(3.9, 150, false)   // download start
	add(4.0, 20, false)    // download steady
	add(6.9, 30, false)    // download steady
	add(7.5, 100, false)   // upload start
	add(8.0, 0, true)      // upload start, lost
	add(10, 40, false)     // upload steady
	add(12.5, 1000, false) // idle-after: neither
	start, steady := r.SplitLoaded(2 * time.Second)
	if start.Count != 3 || start.Sent != 4 || start.MaxMs != 200 || start.MinMs != 100 {
		t.Errorf("start %+v: want 3 answered of 4 sent, 100..200 ms", start)
	}
	if steady.Count != 3 || steady.Sent != 3 || steady.MaxMs != 40 || steady.MinMs != 20 {
		t.Errorf("steady %+v: want 3 of 3, 20..40 ms", steady)
	}
	// No warm-up: everything loaded is steady.
	if start, steady := r.SplitLoaded(0); start.Sent != 0 || steady.Sent != 7 {
		t.Errorf("warmup 0: start %d sent, steady %d; want 0 and 7", start.Sent, steady.Sent)
	}
}
