package autorate

import "time"

// DirStatus is what a status page shows of one direction.
type DirStatus struct {
	Rate      uint64        // bits/s now
	Achieved  uint64        // bits/s the shaper sent over the last 200 ms
	Load      float64       // Achieved / Rate
	Delay     time.Duration // the delay rise the decision used (statistic across reflectors)
	HaveDelay bool          // a fresh reflector answered
	Target    time.Duration
	Reason    Reason        // the last tick's decision
	Changed   Reason        // the reason of the last rate change
	ChangedAt time.Duration // when (the Tick's clock)
	Failed    uint64        // where the increase slows after a recent cut (0: none remembered)
	CutCap    uint64        // the capacity the last cut estimated (0: no cut yet)
	Held      uint64        // a recent rate that held loaded with the delay flat (0: none)
	Queueing  bool          // the shaper queued or dropped in the last tick
	Slope     float64       // delay growth over the last probes, seconds per second
	PostSlope float64       // the same from probes sent after the last cut
	PostN     int           // reflectors that gave PostSlope
	Age       time.Duration // mean time since the probes behind Delay were sent
	Episode   bool          // cut, and the delay not yet back under target
}

// ReflectorStatus is one probe slot.
type ReflectorStatus struct {
	Slot      int
	Kind      Kind
	OneWay    bool
	Replied   bool          // answered at least once
	LastReply time.Duration // the Tick's clock
	// Baseline and Rise per Down, Up for one-way reflectors; round-trip
	// reflectors fill index Down with the round trip and leave Up zero.
	Baseline [2]time.Duration
	Rise     [2]time.Duration
	Lost     int     // consecutive lost probes
	Disagree float64 // 0..1, share of recent samples out of line with its kind
	Replace  Why
}

// Status is the whole state a status page or metrics exporter shows.
type Status struct {
	Dir        [2]DirStatus
	Reflectors []ReflectorStatus
	Stalled    bool
	Idle       bool
}

// Status fills st, reusing st.Reflectors' storage.
func (c *Controller) Status(st *Status) {
	for d := range c.dir {
		s := &c.dir[d]
		st.Dir[d] = DirStatus{
			Rate: s.rate, Achieved: s.achieved, Load: s.util, Delay: s.q, HaveDelay: s.haveQ,
			Target: c.cfg.Dir[d].TargetAt(s.rate), Reason: s.reason, Changed: s.last, ChangedAt: s.lastAt,
			Failed: s.failed, CutCap: uint64(s.cutCap), Held: s.held, Queueing: s.queueing,
			Slope: s.slope, PostSlope: s.postSlope, PostN: s.postN, Age: s.age, Episode: s.episode,
		}
	}
	st.Reflectors = st.Reflectors[:0]
	for i := range c.refl {
		r := &c.refl[i]
		rs := ReflectorStatus{Slot: i, Kind: r.kind, OneWay: r.oneWay, Replied: r.replied,
			LastReply: r.at, Lost: r.lost, Disagree: r.disagree, Replace: r.why}
		if r.oneWay {
			rs.Baseline = [2]time.Duration{r.base[iDown], r.base[iUp]}
			rs.Rise = [2]time.Duration{r.delta[iDown], r.delta[iUp]}
		} else {
			rs.Baseline[0], rs.Rise[0] = r.base[iRTT], r.delta[iRTT]
		}
		st.Reflectors = append(st.Reflectors, rs)
	}
	st.Stalled = c.stalled
	st.Idle = c.idle
}
