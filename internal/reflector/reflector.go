// Package reflector measures delay for autorate: it keeps probing a set
// of reflectors (hosts that answer) at a fixed interval and hands each
// reply or loss to its caller as a Sample. Where the reflector stamps its
// own clock (ICMP timestamp replies, irtt servers, `sqm server`'s echo),
// a sample carries one-way delays up and down, so the controller can tell
// which direction queues; otherwise the round trip only.
//
// One-way delays are raw: the reflector's receive time minus our send
// time, and our receive time minus its send time. The two clocks are not
// synchronised, so each holds an unknown constant offset (plus the drift
// of the clocks): only their changes mean something, which is all a
// controller that subtracts a per-reflector baseline needs.
//
// It runs in the router build, which may not link package net (122 KB on
// mipsle): the sockets are raw system calls (golang.org/x/sys/unix),
// addresses are netip.Addr, IP literals only (no resolver). One goroutine
// runs a poll loop over at most five descriptors (ICMP and UDP per
// address family, and an eventfd to stop it); a probe and its reply
// allocate nothing, and memory is bounded by the target list.
//
// ICMP uses unprivileged datagram sockets where the kernel allows them
// (net.ipv4.ping_group_range) and raw sockets otherwise (root). ICMP
// timestamps (type 13) need a raw socket: without one, timestamp targets
// are probed with echo. Receive times come from the kernel (SO_TIMESTAMPNS),
// so the loop's own wake-up latency stays out of the delays.
package reflector

import (
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"sqm/internal/irtt"
)

// Kind is how a reflector is probed.
type Kind uint8

const (
	// ICMPEcho is ICMP (or ICMPv6) echo: round trip only.
	ICMPEcho Kind = iota + 1
	// ICMPTimestamp is ICMP timestamp request/reply (IPv4 only): one-way
	// delays at a millisecond's resolution, from reflectors whose stamps
	// pass the checks of CheckTimestamps; round trip only from the others.
	ICMPTimestamp
	// UDPSQM is `sqm server`'s sessionless timestamp echo (UDP, port
	// 12866): one-way delays at the server clock's resolution.
	UDPSQM
	// UDPIRTT is an irtt server (UDP, port 2112): a session is opened and
	// reopened as the server ends it; one-way delays from its wall clock.
	UDPIRTT
	// UDPDNS is a DNS query to a resolver (UDP, port 53): round trip
	// only, the UDP probe of reflectors that run no irtt or sqm server.
	UDPDNS
)

var kindNames = [...]string{ICMPEcho: "icmp-echo", ICMPTimestamp: "icmp-timestamp", UDPSQM: "udp-sqm", UDPIRTT: "udp-irtt", UDPDNS: "udp-dns"}

func (k Kind) String() string {
	if int(k) < len(kindNames) && kindNames[k] != "" {
		return kindNames[k]
	}
	return "kind(" + strconv.Itoa(int(k)) + ")"
}

// UDP reports whether k probes over UDP.
func (k Kind) UDP() bool { return k == UDPSQM || k == UDPIRTT || k == UDPDNS }

// Default ports of the UDP kinds.
const (
	SQMPort  = 12866 // bloat.DefaultPort (package bloat links net)
	IRTTPort = 2112  // irtt.DefaultPort
	DNSPort  = 53
)

// Target is one reflector and how to probe it.
type Target struct {
	Addr netip.Addr
	// Port is the UDP port (0: the kind's default); ICMP kinds ignore it.
	Port uint16
	Kind Kind
	// Key is an irtt server's HMAC key (irtt.ParseKey), if it wants one.
	Key []byte
}

func (t Target) String() string {
	switch {
	case t.Kind.UDP():
		return t.Kind.String() + " " + netip.AddrPortFrom(t.Addr, t.port()).String()
	default:
		return t.Kind.String() + " " + t.Addr.String()
	}
}

func (t Target) port() uint16 {
	switch {
	case t.Port != 0:
		return t.Port
	case t.Kind == UDPSQM:
		return SQMPort
	case t.Kind == UDPIRTT:
		return IRTTPort
	case t.Kind == UDPDNS:
		return DNSPort
	}
	return 0
}

// ParseTarget reads a target as a config gives it: an IP address (ICMP:
// timestamps for IPv4, echo for IPv6), or KIND://ADDR[:PORT] with KIND one
// of icmp (the same), icmp-echo, icmp-timestamp, sqm, irtt, dns; an IPv6
// address with a port in brackets. Names are refused: the router build
// has no resolver.
func ParseTarget(s string) (Target, error) {
	kind, rest, scheme := strings.Cut(s, "://")
	if !scheme {
		kind, rest = "icmp", s
	}
	var t Target
	switch kind {
	case "icmp", "icmp-echo", "icmp-timestamp":
		a, err := netip.ParseAddr(rest)
		if err != nil {
			return t, fmt.Errorf("reflector %q: %q is not an IP address (names are not resolved)", s, rest)
		}
		t.Addr = a.Unmap()
		switch {
		case kind == "icmp-echo" || (kind == "icmp" && t.Addr.Is6()):
			t.Kind = ICMPEcho
		default:
			t.Kind = ICMPTimestamp
		}
	case "sqm", "irtt", "dns":
		t.Kind = map[string]Kind{"sqm": UDPSQM, "irtt": UDPIRTT, "dns": UDPDNS}[kind]
		if ap, err := netip.ParseAddrPort(rest); err == nil {
			if ap.Port() == 0 {
				return t, fmt.Errorf("reflector %q: port 0", s)
			}
			t.Addr, t.Port = ap.Addr().Unmap(), ap.Port()
		} else if a, err2 := netip.ParseAddr(rest); err2 == nil {
			t.Addr = a.Unmap()
		} else {
			return t, fmt.Errorf("reflector %q: %q is neither ADDR nor ADDR:PORT ([ADDR]:PORT for IPv6); names are not resolved", s, rest)
		}
	default:
		return t, fmt.Errorf("reflector %q: unknown kind %q (want icmp, icmp-echo, icmp-timestamp, sqm, irtt or dns)", s, kind)
	}
	return t, t.check()
}

func (t Target) check() error {
	switch {
	case !t.Addr.IsValid():
		return fmt.Errorf("reflector %v: no address", t)
	case t.Addr.IsUnspecified() || t.Addr.IsMulticast():
		return fmt.Errorf("reflector %v: %s cannot answer probes", t, t.Addr)
	case t.Addr.Zone() != "":
		return fmt.Errorf("reflector %v: zoned addresses are not supported", t)
	case t.Kind < ICMPEcho || t.Kind > UDPDNS:
		return fmt.Errorf("reflector %v: unknown kind", t)
	case t.Kind == ICMPTimestamp && !t.Addr.Is4():
		return fmt.Errorf("reflector %v: ICMP timestamps exist in IPv4 only; use icmp-echo", t)
	case len(t.Key) > 0 && t.Kind != UDPIRTT:
		return fmt.Errorf("reflector %v: only irtt targets take a key", t)
	case len(t.Key) > 0 && !irtt.HMAC:
		return fmt.Errorf("reflector %v: %w", t, irtt.ErrHMACOmitted)
	}
	return nil
}

// DefaultReflectors are probed when the config names none: the anycast
// addresses of four public resolvers, which answer ICMP echo and DNS
// from almost everywhere within a few milliseconds (anycast puts a node
// near every ISP), are built to take heavy traffic, and are the
// addresses cake-autorate's users rely on too. Several operators, so one
// operator's trouble is outvoted. Whether they answer ICMP timestamp
// requests or stamp sensibly varies; the prober finds out per reflector
// (see CheckTimestamps) and falls back to the round trip.
var DefaultReflectors = []netip.Addr{
	netip.MustParseAddr("1.1.1.1"), // Cloudflare
	netip.MustParseAddr("1.0.0.1"),
	netip.MustParseAddr("8.8.8.8"), // Google
	netip.MustParseAddr("8.8.4.4"),
	netip.MustParseAddr("9.9.9.9"), // Quad9
	netip.MustParseAddr("149.112.112.112"),
	netip.MustParseAddr("94.140.14.140"), // AdGuard (unfiltered)
	netip.MustParseAddr("94.140.14.141"),
	netip.MustParseAddr("2606:4700:4700::1111"),
	netip.MustParseAddr("2606:4700:4700::1001"),
	netip.MustParseAddr("2001:4860:4860::8888"),
	netip.MustParseAddr("2001:4860:4860::8844"),
	netip.MustParseAddr("2620:fe::fe"),
	netip.MustParseAddr("2620:fe::9"),
}

// Probe is how addresses that come without a kind are probed (the
// built-in list, a bare address in a config): ICMP, UDP or both.
type Probe uint8

const (
	ProbeICMP Probe = 1 << iota
	ProbeUDP
	ProbeBoth = ProbeICMP | ProbeUDP
)

// ParseProbe reads "icmp", "udp" or "both".
func ParseProbe(s string) (Probe, error) {
	switch s {
	case "icmp":
		return ProbeICMP, nil
	case "udp":
		return ProbeUDP, nil
	case "both":
		return ProbeBoth, nil
	}
	return 0, fmt.Errorf("reflector: probe %q: want icmp, udp or both", s)
}

// Targets makes targets of addrs: for ICMP, timestamps for IPv4
// (falling back to echo per reflector) and echo for IPv6; for UDP, a DNS
// query (the addresses are resolvers, as the built-in ones are).
func Targets(addrs []netip.Addr, p Probe) []Target {
	ts := make([]Target, 0, 2*len(addrs))
	for _, a := range addrs {
		a = a.Unmap()
		if p&ProbeICMP != 0 {
			k := ICMPTimestamp
			if !a.Is4() {
				k = ICMPEcho
			}
			ts = append(ts, Target{Addr: a, Kind: k})
		}
		if p&ProbeUDP != 0 {
			ts = append(ts, Target{Addr: a, Kind: UDPDNS})
		}
	}
	return ts
}

// Sample is one probe's outcome.
type Sample struct {
	// Target is the index of the reflector in Config.Targets.
	Target int
	Addr   netip.Addr
	// Kind is how this probe went: an ICMPTimestamp target probed with
	// echo (no raw socket, or it never answered timestamps) says ICMPEcho.
	Kind Kind
	// Seq numbers the prober's probes in the order sent, across targets.
	Seq uint32
	// Sent is when the probe left (time.Now before the send).
	Sent time.Time
	// Lost: no valid reply within Config.Timeout. The other fields below
	// are then zero.
	Lost bool
	// RTT is the round trip, from the kernel's receive stamp, minus the
	// reflector's own receive-to-send time where it reports it (irtt,
	// sqm; ICMP timestamps only to the millisecond).
	RTT time.Duration
	// OneWay says Up and Down hold one-way delays.
	OneWay bool
	// Up is the reflector's receive time minus Sent, Down our receive
	// time minus the reflector's send time, each offset by the difference
	// of the two clocks (opposite signs): use their changes only.
	Up, Down time.Duration
}

// Config is what a Prober probes and how often.
type Config struct {
	Targets []Target
	// Interval between two probes to one target (default 300 ms, at
	// least 10 ms); the targets' probes are spread evenly over it.
	Interval time.Duration
	// Timeout after which a probe without a valid reply is lost (default
	// 2 s). It must exceed the largest delay worth measuring: a queue that
	// holds replies longer turns every sample into a loss, which a
	// controller reads as a stall, not as bloat.
	Timeout time.Duration
	// Enter, if set, wraps the creation of the sockets, which then live
	// in whatever network namespace fn runs in (internal/netns NS.Do).
	Enter func(fn func() error) error
	// Logf gets one line per change of a target's state (timestamps
	// refused or unusable, irtt sessions opened and closed). nil: none.
	Logf func(format string, args ...any)
	// sockets forces a socket type for tests: "raw" or "dgram" ICMP.
	sockets string
}

// MaxTargets bounds the target list (and with it the memory).
const MaxTargets = 64

func (c *Config) withDefaults() (Config, error) {
	o := *c
	if o.Interval == 0 {
		o.Interval = 300 * time.Millisecond
	}
	if o.Timeout == 0 {
		o.Timeout = 2 * time.Second
	}
	if o.Logf == nil {
		o.Logf = func(string, ...any) {}
	}
	switch {
	case len(o.Targets) == 0:
		return o, errors.New("reflector: no targets")
	case len(o.Targets) > MaxTargets:
		return o, fmt.Errorf("reflector: %d targets, at most %d", len(o.Targets), MaxTargets)
	case o.Interval < 10*time.Millisecond || o.Interval > time.Minute:
		return o, fmt.Errorf("reflector: interval %v outside 10ms..1m", o.Interval)
	case o.Timeout < 10*time.Millisecond || o.Timeout > time.Minute:
		return o, fmt.Errorf("reflector: timeout %v outside 10ms..1m", o.Timeout)
	}
	for _, t := range o.Targets {
		if err := t.check(); err != nil {
			return o, err
		}
	}
	return o, nil
}
