package autorun

import (
	"errors"
	"strconv"
	"strings"
	"time"

	"sqm/internal/autorate"
	"sqm/internal/plan"
	"sqm/internal/reflector"
)

// ProbeInterval is how often each reflector is probed and the controller
// ticks: docs/autorate.md's measurement (the 1 s step-down target needs
// fresh replies; 300 ms, cake-autorate's pace, took 1.2-1.4 s).
const ProbeInterval = 100 * time.Millisecond

// IdleTick is how often the loop ticks while the controller says the link
// is idle (probes at its idle interval) and no Waker is armed. Each tick
// reads the shapers' counters from the kernel and wakes the runtime, the
// loop's main cost on an idle link (docs/autorate.md, "The idle tick",
// "The idle link's cost": 4-7 ms of the lab's emulated CPU a tick);
// between two reads the rates sit at their bases, which is where an idle
// link drifts to, so load that starts between them meets the base rate
// for at most this long before the loop ticks at ProbeInterval again.
// cake-autorate's sleeping monitor reads its counters every 200 ms. A 2 s
// tick let a load's start sit in the modem for up to 2 s; a Waker, where
// the kernel gives one, sees it at its first packet instead.
const IdleTick = time.Second

// ArmedIdleTick is the idle tick while a Waker is armed: a load that
// starts wakes the loop at its first packet of load size, so the tick
// has only the idle probes to send and the fallback to judge (docs/
// autorate.md, "Waking on traffic").
const ArmedIdleTick = 5 * time.Second

// WatchTicks is how many ticks at ProbeInterval follow a wake: a
// transfer's slow start carries more than the controller's idle
// threshold within one or two, and a stray packet costs no more.
const WatchTicks = 5

// Re-arming after a watch that found no load waits MinRearm, doubling
// to MaxRearm while it keeps happening (light traffic with large
// packets); the loop then ticks at IdleTick, as without a Waker.
const (
	MinRearm = time.Second
	MaxRearm = 8 * time.Second
)

// MaxSlots bounds the reflectors probed at once (the rest are spares):
// enough for the statistic across reflectors to outvote a liar in each
// kind, few enough to cost a router nothing (60 small packets a second).
const MaxSlots = 6

// ControllerConfig is the controller's configuration for a plan's
// autorate settings, with one slot per target. A direction the plan does
// not autorate gets placeholder bounds: the loop has no shaper for it and
// never sets its rate.
func ControllerConfig(a *plan.Autorate, targets []reflector.Target) autorate.Config {
	var dirs [2]autorate.DirConfig
	for d, r := range [2]*plan.RateRange{a.Download, a.Upload} {
		if r == nil {
			dirs[d] = autorate.DirConfig{Min: 64000, Base: 64000, Max: 64000, Target: a.Target}
			continue
		}
		dirs[d] = autorate.DirConfig{Min: r.MinKbit * 1000, Base: r.BaseKbit * 1000, Max: r.MaxKbit * 1000, Target: a.Target}
	}
	kinds := make([]autorate.Kind, len(targets))
	for i, t := range targets {
		kinds[i] = KindOf(t.Kind)
	}
	cfg := autorate.DefaultConfig(dirs[0], dirs[1], kinds)
	cfg.ProbeInterval = ProbeInterval
	return cfg
}

// Targets turns a plan's reflectors (config's autorate_reflector: an IP
// address, or ADDR:PORT / [IPv6]:PORT for a UDP reflector; or the
// reflector package's KIND://ADDR) into probe targets, the first MaxSlots
// in slots and the rest spares, probed as a.Probe says: a bare address by
// ICMP (timestamps for IPv4) for icmp, by a UDP probe for udp (a DNS
// query: bare addresses are taken to be resolvers, as the built-in ones
// are), both for both; ADDR:PORT is a UDP reflector whatever the probe
// (port 2112 irtt, 53 DNS, any other sqm server's echo). With no
// reflectors, defaults are used (the lab passes its server; the daemon
// reflector.DefaultReflectors). Host names are refused: the router build
// has no resolver.
func Targets(a *plan.Autorate, defaults []string) (slots, spares []reflector.Target, err error) {
	probe, err := reflector.ParseProbe(a.Probe)
	if err != nil {
		return nil, nil, err
	}
	hosts := a.Reflectors
	if len(hosts) == 0 {
		hosts = defaults
	}
	var all []reflector.Target
	for _, h := range hosts {
		ts, err := hostTargets(h, probe)
		if err != nil {
			return nil, nil, err
		}
		all = append(all, ts...)
	}
	if len(all) == 0 {
		return nil, nil, errors.New("autorun: no reflectors to probe")
	}
	if len(all) > reflector.MaxTargets {
		all = all[:reflector.MaxTargets]
	}
	// Slots alternate kinds, so that the first MaxSlots hold both ICMP
	// and UDP reflectors when both are probed.
	var icmp, udp []reflector.Target
	for _, t := range all {
		if t.Kind.UDP() {
			udp = append(udp, t)
		} else {
			icmp = append(icmp, t)
		}
	}
	var order []reflector.Target
	for i := 0; i < len(icmp) || i < len(udp); i++ {
		if i < len(udp) {
			order = append(order, udp[i])
		}
		if i < len(icmp) {
			order = append(order, icmp[i])
		}
	}
	n := min(len(order), MaxSlots)
	return order[:n], order[n:], nil
}

func hostTargets(h string, probe reflector.Probe) ([]reflector.Target, error) {
	if strings.Contains(h, "://") {
		t, err := reflector.ParseTarget(h)
		if err != nil {
			return nil, err
		}
		return []reflector.Target{t}, nil
	}
	if strings.HasPrefix(h, "[") || strings.Count(h, ":") == 1 { // ADDR:PORT
		i := strings.LastIndexByte(h, ':')
		port, err := strconv.ParseUint(h[i+1:], 10, 16)
		if err != nil || port == 0 {
			return nil, errors.New("reflector " + strconv.Quote(h) + ": bad port")
		}
		kind := "sqm"
		switch port {
		case reflector.IRTTPort:
			kind = "irtt"
		case reflector.DNSPort:
			kind = "dns"
		}
		t, err := reflector.ParseTarget(kind + "://" + h)
		if err != nil {
			return nil, err
		}
		return []reflector.Target{t}, nil
	}
	var ts []reflector.Target
	if probe&reflector.ProbeICMP != 0 {
		t, err := reflector.ParseTarget(h)
		if err != nil {
			return nil, err
		}
		ts = append(ts, t)
	}
	if probe&reflector.ProbeUDP != 0 {
		t, err := reflector.ParseTarget("dns://" + h)
		if err != nil {
			return nil, err
		}
		ts = append(ts, t)
	}
	return ts, nil
}
