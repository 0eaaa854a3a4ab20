package plan

import (
	"fmt"
	"time"

	"sqm/internal/config"
)

// CoDel's own defaults, for target 'default' (fq_codel's 5 ms / 100 ms).
const (
	codelDefaultTarget   = 5 * time.Millisecond
	codelDefaultInterval = 100 * time.Millisecond
	// codelPoliceLimitTargets: the hard limit is this many targets of
	// virtual delay (see codelPolicer).
	codelPoliceLimitTargets = 4
)

// codelPolicer is the codel_police recipe's ingress: one cls_bpf filter
// in direct-action mode on the ingress hook, no IFB.
//
// Its parameters come from the same rules as the AQM leaves', so a
// codel_police at a rate signals where fq_codel on an IFB at that rate
// would: target and interval are sqm-scripts' auto values (target at
// least 5 ms and at least one worst-case packet's serialisation time,
// interval 95 ms plus the target; itarget overrides the target and
// 'default' gives CoDel's 5/100 ms). The hard limit is four targets of
// virtual delay (20 ms at the usual 5 ms target, like the police
// recipe's bucket). The debt is not a queue anyone waits in: it bounds the
// queue the same excess builds at the real bottleneck upstream (the
// modem, a little faster than our rate), which every flow waits in. Two
// intervals (200 ms), the first choice, let that queue grow to 74 ms at
// the 90th percentile in the VM lab at 50 Mbit/s (RRUL, 20 ms base);
// 40 ms gave 16 ms, 20 ms 4.6 and 18.1 ms in two runs, about the plain
// policer's 18.7 ms and goodput (docs/codel-police.md). CoDel's signals act between target and limit,
// and keep responsive flows off the limit. At low rates the limit holds at
// least 16 full frames, as the police recipe's bucket does, so a burst of
// a few packets is not dropped outright. ilimit, when set, replaces it
// with that many full frames' time at the rate, as it caps fq_codel's
// queue in packets. The program saves time spent below the rate as credit
// up to half the limit. ingress_ecn decides between marking and
// dropping ECN-capable packets. iqdisc_opts takes 'flows' (the default:
// signals go to flows above the average first) or 'flowblind'.
func (b *builder) codelPolicer(d dir) (*Ingress, error) {
	frame := uint32(b.env.MTU + ethHeader)
	rateBits := d.rateKbit * 1000
	cp := &CodelPolice{RateBits: rateBits, MTU: frame, ECN: d.ecn, Flows: true}
	switch d.target.Mode {
	case config.TargetDefault:
		cp.Target, cp.Interval = codelDefaultTarget, codelDefaultInterval
	default:
		cp.Target, cp.Interval = b.target(d)
		if cp.Interval == 0 { // explicit target: interval as the auto rule has it
			cp.Interval = time.Duration(intervalBaseUS)*time.Microsecond + cp.Target
		}
	}
	if cp.Interval > CodelPoliceMaxInterval {
		return nil, b.q.Errorf("itarget", "target %s gives an interval of %s; codel_police allows at most %s", cp.Target, cp.Interval, CodelPoliceMaxInterval)
	}
	minLimit := time.Duration(policeMinPackets * uint64(frame) * 8 * uint64(time.Second) / rateBits)
	cp.Limit = max(codelPoliceLimitTargets*cp.Target, minLimit)
	if d.limit != 0 {
		cp.Limit = time.Duration(uint64(d.limit) * uint64(frame) * 8 * uint64(time.Second) / rateBits)
		if cp.Limit <= cp.Target || cp.Limit > CodelPoliceMaxLimit {
			return nil, b.q.Errorf("ilimit", "%d full frames take %s at %d kbit/s; codel_police needs a limit above the target %s and at most %s", d.limit, cp.Limit, d.rateKbit, cp.Target, CodelPoliceMaxLimit)
		}
	}
	flows, err := parseCodelPoliceOpts(d.opts)
	if err != nil {
		return nil, b.q.Errorf(d.optsName, "%v", err)
	}
	cp.Flows = flows
	if err := cp.Validate(); err != nil {
		return nil, fmt.Errorf("plan: %s: %w", b.q.Interface, err)
	}
	mode := "flow-aware"
	if !cp.Flows {
		mode = "flow-blind"
	}
	signal := "drop"
	if cp.ECN {
		signal = "mark ECN-capable packets, drop the others"
	}
	return &Ingress{
		Hook: []Filter{{
			Parent: hFFFF, Prio: 10, Protocol: "all", Kind: "bpf",
			CodelPolice: cp,
			Comment: fmt.Sprintf("codel_police all received packets to %dkbit (%s; target %s, interval %s, limit %s; %s)",
				d.rateKbit, mode, cp.Target, cp.Interval, cp.Limit, signal),
		}},
		RateKbit: d.rateKbit,
	}, nil
}

// parseCodelPoliceOpts reads codel_police's iqdisc_opts: 'flows' or
// 'flowblind' (the last one given wins, as with tc keywords). It reports
// whether the policer is flow-aware.
func parseCodelPoliceOpts(opts []string) (bool, error) {
	flows := true
	for _, o := range opts {
		switch o {
		case "flows":
			flows = true
		case "flowblind":
			flows = false
		default:
			return false, fmt.Errorf("codel_police: unknown option %q; use flows or flowblind", o)
		}
	}
	return flows, nil
}
