package autorate_test

import (
	"os"
	"strconv"
	"testing"
	"time"

	"sqm/internal/autorate"
)

func TestTrace(t *testing.T) {
	if os.Getenv("TRACE") == "" {
		t.Skip()
	}
	d := autorate.Dir(0)
	if os.Getenv("DIR") == "up" {
		d = 1
	}
	capf := steps([]time.Duration{0, 30 * time.Second, 50 * time.Second}, []float64{40 * mbit, 20 * mbit, 40 * mbit})
	if os.Getenv("RAMP") != "" {
		capf = ramp(step)
	}
	if os.Getenv("STALL") != "" {
		capf = withStalls(constant(40*mbit), step, step+stallLen())
	}
	s := link(d, capf, udpReflectors(4), tickEnv())
	if os.Getenv("STALL") != "" {
		s.stallS = []time.Duration{step, step + stallLen()}
		s.dir[1-d].capacity = withStalls(s.dir[1-d].capacity, s.stallS...)
	}
	if os.Getenv("DEBUG") != "" {
		*autorate.DebugHook = func(d autorate.Dir, now time.Duration, capEst, in, slopeCap, recent, r, next float64) {
			t.Logf("cut %v at %v: capEst %.2f in %.2f slopeCap %.2f recent %.2f r %.2f next %.2f", d, now, capEst/1e6, in/1e6, slopeCap/1e6, recent/1e6, r/1e6, next/1e6)
		}
	}
	fromS, _ := strconv.ParseFloat(os.Getenv("FROM"), 64)
	toS, _ := strconv.ParseFloat(os.Getenv("TO"), 64)
	from, to := time.Duration(fromS*1e9), time.Duration(toS*1e9)
	for s.t < to {
		s.run(s.t + 50*time.Millisecond)
		if s.t >= from {
			var st autorate.Status
			s.ctrl.Status(&st)
			ds := st.Dir[d]
			r := s.recs[len(s.recs)-1]
			t.Logf("%6.2f rate %6.2f cap %5.1f truth %6.1fms stat %6.1fms load %.2f %v q=%v sl %.3f post %.3f/%d age %v ep %v f %.2f", s.t.Seconds(), r.rate[d]/1e6, r.cap[d]/1e6, float64(r.delay[d])/1e6, float64(ds.Delay)/1e6, ds.Load, ds.Reason, ds.Queueing, ds.Slope, ds.PostSlope, ds.PostN, ds.Age, ds.Episode, float64(ds.Failed)/1e6)
		}
	}
}

func tickEnv() time.Duration {
	if v, err := time.ParseDuration(os.Getenv("TICK")); err == nil {
		return v
	}
	return 50 * time.Millisecond
}

func stallLen() time.Duration {
	v, _ := strconv.Atoi(os.Getenv("STALL"))
	return time.Duration(v) * time.Second
}
