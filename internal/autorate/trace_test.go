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
	s := link(d, capf, udpReflectors(4), tickEnv())
	from, _ := strconv.Atoi(os.Getenv("FROM"))
	to, _ := strconv.Atoi(os.Getenv("TO"))
	for s.t < time.Duration(to)*time.Second {
		s.run(s.t + 50*time.Millisecond)
		if s.t >= time.Duration(from)*time.Second {
			var st autorate.Status
			s.ctrl.Status(&st)
			ds := st.Dir[d]
			r := s.recs[len(s.recs)-1]
			t.Logf("%6.2f rate %6.2f cap %5.1f truth %6.1fms stat %6.1fms load %.2f %v q=%v sl %.3f post %.3f/%d age %v ep %v", s.t.Seconds(), r.rate[d]/1e6, r.cap[d]/1e6, float64(r.delay[d])/1e6, float64(ds.Delay)/1e6, ds.Load, ds.Reason, ds.Queueing, ds.Slope, ds.PostSlope, ds.PostN, ds.Age, ds.Episode)
		}
	}
}

func tickEnv() time.Duration {
	if v, err := time.ParseDuration(os.Getenv("TICK")); err == nil {
		return v
	}
	return 50 * time.Millisecond
}
