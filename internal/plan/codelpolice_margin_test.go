package plan

import (
	"fmt"
	"math"
	"testing"
)

// TestCodelPoliceLineMargin pins, for the derived defaults, how much faster
// than the policed rate the upstream line may be before the hard limit is
// always reached ahead of CoDel's first signal (CodelPolice.LineMargin).
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
			got := cp.LineMargin()
			if math.Abs(got-c.want) > 0.005 {
				t.Errorf("margin %.3f (target %s, interval %s, limit %s), want %.2f", got, cp.Target, cp.Interval, cp.Limit, c.want)
			}
			if got <= at90 {
				t.Errorf("margin %.3f: with the policer at 90 %% of the line (margin %.3f) the limit comes before CoDel's first signal", got, at90)
			}
		})
	}
	// The helper itself: no room when the limit is not above the target.
	if m := (&CodelPolice{Target: 5e6, Interval: 100e6, Limit: 5e6}).LineMargin(); m != 0 {
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
	if m := p.Ingress.Hook[0].CodelPolice.LineMargin(); m > at90 {
		t.Errorf("ilimit 62 at 50 Mbit/s: margin %.3f, want below %.3f", m, at90)
	}
}
