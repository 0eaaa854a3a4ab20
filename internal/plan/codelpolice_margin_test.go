package plan

import (
	"fmt"
	"math"
	"testing"
)

// TestCodelPoliceLineMargin pins, for the derived defaults, how much faster
// than the policed rate the upstream line may be before the hard limit is
// always reached ahead of CoDel's first signal (lineMargin).
// sqm's usual ingress rate is 85-90 % of the line; at 90 % the line is
// 11.1 % faster. The defaults must leave CoDel that room at every rate,
// else codel_police degenerates into the police recipe wherever it is used
// as documented. At 85 % (17.6 %) they do not at 50 Mbit/s, which
// docs/codel-police.md says.
func TestCodelPoliceLineMargin(t *testing.T) {
	const at90 = 1/0.9 - 1
	for _, c := range []struct {
		kbit uint64
		want float64 // limit - target over interval
	}{
		{1000, 1.65}, // 16 frames of limit at 1 Mbit/s: a long bucket
		{8000, 0.19},
		{20000, 0.15},
		{50000, 0.15},
		{100000, 0.15},
		{1000000, 0.15},
	} {
		t.Run(fmt.Sprint(c.kbit), func(t *testing.T) {
			q := baseQueue()
			q.Script = "codel_police"
			q.Download = c.kbit
			p, err := Build(q, Env{MTU: 1500})
			if err != nil {
				t.Fatal(err)
			}
			cp := p.Ingress.Hook[0].CodelPolice
			got := lineMargin(cp)
			if math.Abs(got-c.want) > 0.005 {
				t.Errorf("margin %.3f (target %s, interval %s, limit %s), want %.2f", got, cp.Target, cp.Interval, cp.Limit, c.want)
			}
			if got <= at90 {
				t.Errorf("margin %.3f: with the policer at 90 %% of the line (margin %.3f) the limit comes before CoDel's first signal", got, at90)
			}
		})
	}
	// The helper itself: no room when the limit is not above the target.
	if m := lineMargin(&CodelPolice{Target: 5e6, Interval: 100e6, Limit: 5e6}); m != 0 {
		t.Errorf("margin with limit = target: %v, want 0", m)
	}
	// An ilimit of 3 targets leaves CoDel too little room at 90 %: the
	// check above can fail.
	q := baseQueue()
	q.Script, q.Download, q.ILimit = "codel_police", 50000, 62 // 62 frames: 15 ms at 50 Mbit/s
	p, err := Build(q, Env{MTU: 1500})
	if err != nil {
		t.Fatal(err)
	}
	if m := lineMargin(p.Ingress.Hook[0].CodelPolice); m > at90 {
		t.Errorf("ilimit 62 at 50 Mbit/s: margin %.3f, want below %.3f", m, at90)
	}
}

// lineMargin is how much faster than the policed rate the line in front
// of the policer may deliver, as a fraction of the rate, for CoDel's first
// signal to fall before the hard limit when the line runs saturated. A
// saturated line adds (line - rate) / rate of debt per unit of time, so the
// delay passes the target, waits an interval and signals before reaching
// the limit only while interval x margin < limit - target. Beyond that
// margin every saturation episode ends at the limit, and the program is a
// plain policer with a bucket of Limit (docs/evidence/codel-police-lab.md).
func lineMargin(cp *CodelPolice) float64 {
	if cp.Interval <= 0 || cp.Limit <= cp.Target {
		return 0
	}
	return float64(cp.Limit-cp.Target) / float64(cp.Interval)
}
