package tune

import (
	"context"
	"fmt"
	"math"
	"time"
)

// OracleResult is the exhaustive sweep's answer, the yardstick tune is
// judged by in the lab: the highest rate per direction whose induced
// latency met the target (no noise margin), found by stepping rather than
// bisecting.
type OracleResult struct {
	DownloadKbit int     `json:"download_kbit"`
	UploadKbit   int     `json:"upload_kbit"`
	StepPct      float64 `json:"step_pct"`
	Points       []Point `json:"points"`
}

// Oracle steps each direction's rate up from 90 % of tune's choice in
// steps of stepPct percent until two rates in a row miss the target (or
// 140 % of the choice), and reports the highest rate that met it. It is
// exhaustive over the window where the knee can be, which is what makes
// it affordable in the VM; a knee below 90 % of the choice would show as
// the oracle's answer at the window's bottom.
func Oracle(ctx context.Context, m Measurer, res *Result, stepPct float64) (*OracleResult, error) {
	if stepPct <= 0 {
		stepPct = 1
	}
	o := &OracleResult{StepPct: stepPct, Points: []Point{}}
	r := &runner{m: m, o: Options{Now: time.Now, Budget: -1}, target: res.TargetMs, res: &Result{Idle: res.Idle, TargetMs: res.TargetMs}}
	for _, d := range []Dir{Down, Up} {
		chosen := res.AloneDownKbit
		if d == Up {
			chosen = res.AloneUpKbit
		}
		if chosen <= 0 {
			return o, fmt.Errorf("tune: oracle: no %s choice to sweep around", d)
		}
		best, misses := 0, 0
		for f := 0.9; f <= 1.4+1e-9 && misses < 2; f += stepPct / 100 {
			rate := int(math.Round(float64(chosen) * f))
			p, err := r.measure(ctx, "oracle", d, shaping(d, rate))
			if err != nil {
				return o, err
			}
			if p.Pass {
				best, misses = rate, 0
			} else {
				misses++
			}
		}
		if d == Down {
			o.DownloadKbit = best
		} else {
			o.UploadKbit = best
		}
	}
	o.Points = r.res.Points
	return o, nil
}
