package autorate

import "strconv"

// Reason says why a direction's rate is what it is after a tick. It is a
// small integer so that status and metrics can carry it without allocating;
// String gives the stable name they print.
type Reason uint8

const (
	ReasonStart           Reason = iota // first tick: the base rate
	ReasonHold                          // loaded between the thresholds, delay fine: no change
	ReasonIncrease                      // loaded, delay within target: probing up
	ReasonIncreaseCareful               // probing up slowly, near a rate that failed recently
	ReasonAtMax                         // would increase, already at the max rate
	ReasonDelay                         // delay over target: cut in proportion to the excess
	ReasonBottleneckBelow               // delay over target, shaper not full: cut to the achieved rate
	ReasonDraining                      // delay still over target after a cut, falling: wait
	ReasonAtMin                         // would decrease, already at the min rate
	ReasonDrift                         // lightly loaded: moving toward the base rate
	ReasonIdle                          // idle: toward the base rate, probing slowed
	ReasonStall                         // no replies: holding the rate (a stall, not a signal)
	ReasonNoDelay                       // no delay sample yet: holding the rate
	numReasons
)

var reasonNames = [numReasons]string{
	"start", "hold", "increase", "increase-careful", "at-max",
	"delay", "bottleneck-below", "draining", "at-min",
	"drift", "idle", "stall", "no-delay",
}

func (r Reason) String() string {
	if r < numReasons {
		return reasonNames[r]
	}
	return "reason(" + strconv.Itoa(int(r)) + ")"
}

// Why says why a reflector should be replaced.
type Why uint8

const (
	WhyNone      Why = iota
	WhyNoReply       // it stopped answering while others answered
	WhyDisagrees     // its delay changes disagree with the other reflectors of its kind (lying, drifting, or its own path congested)
)

func (w Why) String() string {
	switch w {
	case WhyNone:
		return "ok"
	case WhyNoReply:
		return "no-reply"
	case WhyDisagrees:
		return "disagrees"
	}
	return "why(" + strconv.Itoa(int(w)) + ")"
}
