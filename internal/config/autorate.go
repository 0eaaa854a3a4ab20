package config

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"sqm/internal/units"
)

// Autorate options (issue 26). The daemon's controller moves each
// direction's shaper rate between a minimum and a maximum while the link's
// capacity moves; download and upload stay the base rates, so a section
// without these options shapes exactly as before.
//
// The defaults, used when autorate is 1 and an option is unset, follow
// cake-autorate's shipped config (config.primary.sh: minimum 5000, base
// 20000, maximum 80000 kbit/s down and 35000 up):
//
//   - minimum = base / 4 (AutorateMinDiv): cake-autorate's 5000 of 20000 in
//     both directions. A lower floor costs little (the controller only goes
//     there while the delay says the link is that slow), a higher one lets
//     the modem's buffer fill whenever capacity falls below it.
//   - maximum = base * 2 (AutorateMaxMul): between cake-autorate's 1.75x
//     (upload) and 4x (download). A base set by hand is normally a speed
//     test's result, near the link's usual capacity, so twice that covers
//     the good minutes of LTE/cable without leaving the controller a long
//     way to fall when it probes too high.
//   - target = 15 ms one-way (AutorateDefaultTarget). cake-autorate's
//     threshold is 30 ms of one-way delay, but its default pinger (fping)
//     measures round trips and takes half, so a queue in one direction
//     must add 60 ms before it reacts. sqm measures one-way delay changes
//     where the reflector allows it; 15 ms per direction is cake-autorate's
//     30 ms spent on a round trip, and keeps a video call usable.
const (
	AutorateMinDiv        = 4
	AutorateMaxMul        = 2
	AutorateDefaultTarget = 15 * time.Millisecond
	// AutorateMinTarget is the smallest target: below about a millisecond
	// the jitter of any real access link (and the probes' own
	// scheduling on a busy router) would read as a queue.
	AutorateMinTarget = time.Millisecond
	// AutorateMaxTarget is the largest: a target of a second is no longer
	// queue management.
	AutorateMaxTarget = time.Second
	// MaxAutorateReflectors bounds autorate_reflector: each costs probe
	// traffic and state, and 32 is well beyond the handful the
	// cross-reflector statistic needs.
	MaxAutorateReflectors = 32
	// MinRateKbit is the lowest rate sqm shapes at (the planner refuses a
	// lower download/upload: simple.qos's class rates C/6, C-16
	// degenerate below it). Autorate's minimum is held to it too, and the
	// default minimum never goes below it.
	MinRateKbit = 64
)

// Probe kinds of autorate_probe.
const (
	ProbeBoth = "both"
	ProbeICMP = "icmp"
	ProbeUDP  = "udp"
)

// Autorate is a section's autorate options as written; zero values are
// "unset" and take the defaults above ([Queue.AutorateRange],
// [Queue.AutorateTargetOrDefault]).
type Autorate struct {
	Enabled     bool          // autorate: 0 or 1
	DownloadMin uint64        // autorate_download_min, kbit/s
	DownloadMax uint64        // autorate_download_max, kbit/s
	UploadMin   uint64        // autorate_upload_min, kbit/s
	UploadMax   uint64        // autorate_upload_max, kbit/s
	Target      time.Duration // autorate_target; plain numbers are ms
	// Reflectors are the hosts probed (autorate_reflector, a UCI list;
	// each value may also hold several, separated by spaces). Empty: the
	// probe layer's default (the configured sqm server or irtt server,
	// else its built-in list).
	Reflectors []string
	Probe      string // autorate_probe: icmp, udp or both ("" is both)
}

// RateRange is one direction's autorate rates, kbit/s, defaults applied.
type RateRange struct {
	Min, Base, Max uint64
}

// AutorateRange returns a direction's minimum, base and maximum rate with
// the defaults applied. The base is download (ingress) or upload; with
// base 0 (the direction is not shaped) all three are 0.
func (q *Queue) AutorateRange(ingress bool) RateRange {
	base, lo, hi := q.Upload, q.Autorate.UploadMin, q.Autorate.UploadMax
	if ingress {
		base, lo, hi = q.Download, q.Autorate.DownloadMin, q.Autorate.DownloadMax
	}
	if base == 0 {
		return RateRange{}
	}
	if lo == 0 {
		lo = min(max(base/AutorateMinDiv, MinRateKbit), base)
	}
	if hi == 0 {
		hi = min(base*AutorateMaxMul, MaxKbit)
	}
	return RateRange{Min: lo, Base: base, Max: hi}
}

// AutorateTargetOrDefault is the delay target, the default if unset.
func (q *Queue) AutorateTargetOrDefault() time.Duration {
	if q.Autorate.Target == 0 {
		return AutorateDefaultTarget
	}
	return q.Autorate.Target
}

// AutorateProbeOrDefault is the probe kind, both if unset.
func (q *Queue) AutorateProbeOrDefault() string {
	if q.Autorate.Probe == "" {
		return ProbeBoth
	}
	return q.Autorate.Probe
}

// autorateSetters parse the autorate options; they join setters.
func autorateSetters(m map[string]setter) {
	m["autorate"] = func(q *Queue, v string) string {
		return boolOpt(&q.Autorate.Enabled, v, `"1" lets the daemon follow the link's capacity between autorate_*_min and autorate_*_max, "0" shapes at download/upload`)
	}
	m["autorate_download_min"] = func(q *Queue, v string) string {
		return kbitOpt(&q.Autorate.DownloadMin, v, "autorate_download_min", "20000")
	}
	m["autorate_download_max"] = func(q *Queue, v string) string {
		return kbitOpt(&q.Autorate.DownloadMax, v, "autorate_download_max", "150000")
	}
	m["autorate_upload_min"] = func(q *Queue, v string) string {
		return kbitOpt(&q.Autorate.UploadMin, v, "autorate_upload_min", "5000")
	}
	m["autorate_upload_max"] = func(q *Queue, v string) string {
		return kbitOpt(&q.Autorate.UploadMax, v, "autorate_upload_max", "30000")
	}
	m["autorate_target"] = func(q *Queue, v string) string {
		d, msg := autorateTarget(v)
		if msg == "" {
			q.Autorate.Target = d
		}
		return msg
	}
	m["autorate_probe"] = func(q *Queue, v string) string {
		switch v {
		case ProbeICMP, ProbeUDP, ProbeBoth:
			q.Autorate.Probe = v
			return ""
		}
		return fmt.Sprintf("unknown probe %q; use icmp, udp or both (both: ICMP and UDP, so that an ISP deprioritising ICMP cannot hide the queue)", v)
	}
	m["autorate_reflector"] = func(q *Queue, v string) string {
		for _, h := range strings.Fields(v) {
			if msg := checkReflector(h); msg != "" {
				return msg
			}
			if len(q.Autorate.Reflectors) == MaxAutorateReflectors {
				return fmt.Sprintf("more than %d reflectors; %d are plenty for the controller's statistic", MaxAutorateReflectors, MaxAutorateReflectors)
			}
			q.Autorate.Reflectors = append(q.Autorate.Reflectors, h)
		}
		return ""
	}
}

// autorateTarget reads autorate_target: a number of milliseconds (15,
// 7.5) or a time with a unit (15ms, 20000us).
func autorateTarget(v string) (time.Duration, string) {
	const expect = "a delay in ms (e.g. 15 or 7.5) or a time with a unit (e.g. 15ms)"
	var d time.Duration
	if f, err := strconv.ParseFloat(v, 64); err == nil && v[0] != '+' && !strings.ContainsAny(v, "eExXpPnN_") {
		if f < 0 || f > float64(AutorateMaxTarget/time.Millisecond) {
			return 0, fmt.Sprintf("%s ms is out of range: the target must be from %v to %v", v, AutorateMinTarget, AutorateMaxTarget)
		}
		d = time.Duration(f * float64(time.Millisecond))
	} else {
		t, err := units.ParseTime(v)
		if err != nil {
			return 0, fmt.Sprintf("%q is not a delay target; use %s", v, expect)
		}
		d = t
	}
	if msg := targetRangeMsg(d); msg != "" {
		return 0, msg
	}
	return d, ""
}

func targetRangeMsg(d time.Duration) string {
	if d < AutorateMinTarget || d > AutorateMaxTarget {
		return fmt.Sprintf("%v is out of range: the target must be from %v to %v", d, AutorateMinTarget, AutorateMaxTarget)
	}
	return ""
}

// checkReflector accepts an IP address, [IPv6]:port, host, or host:port
// (a DNS name by RFC 1123's rules; an IPv4 address is one). The port is
// for UDP probes. It checks the form only (net/netip's parser would cost
// the router build 30 KB, through package unique): the probe layer
// resolves the name and says when it cannot.
func checkReflector(h string) string {
	bad := func(why string) string {
		return fmt.Sprintf("reflector %q %s; give an address or host name, optionally with :port (e.g. 9.9.9.9, [2620:fe::fe]:2112, irtt.example.net:2112)", h, why)
	}
	if len(h) > 253+8 {
		return bad("is too long")
	}
	host, port := h, ""
	switch {
	case strings.HasPrefix(h, "["): // [IPv6]:port
		end := strings.Index(h, "]:")
		if end < 0 || !isIPv6(h[1:end]) {
			return bad("is not a valid address")
		}
		host, port = "", h[end+2:]
	case strings.Count(h, ":") > 1: // a bare IPv6 address
		if !isIPv6(h) {
			return bad("is not a valid address")
		}
		return ""
	case strings.Contains(h, ":"):
		i := strings.IndexByte(h, ':')
		host, port = h[:i], h[i+1:]
	}
	if port != "" || strings.HasSuffix(h, ":") {
		p, err := strconv.ParseUint(port, 10, 16)
		if err != nil || p == 0 || !allDigits(port) {
			return bad("has a bad port (1..65535)")
		}
	}
	if host == "" && strings.HasPrefix(h, "[") {
		return ""
	}
	if host == "" || len(host) > 253 {
		return bad("has no valid host name")
	}
	for _, label := range strings.Split(strings.TrimSuffix(host, "."), ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return bad("is not a valid host name")
		}
		for i := 0; i < len(label); i++ {
			c := label[i]
			if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || isDigit(c) || c == '-') {
				return bad("is not a valid host name")
			}
		}
	}
	return ""
}

// validateAutorate adds the autorate section's problems: the ranges of a
// section with autorate on, and the option values whatever autorate says
// (a queue built in code must hold what Parse would accept).
func (q *Queue) validateAutorate(add func(option, format string, args ...any)) {
	a := &q.Autorate
	for _, o := range []struct {
		opt string
		v   uint64
	}{{"autorate_download_min", a.DownloadMin}, {"autorate_download_max", a.DownloadMax},
		{"autorate_upload_min", a.UploadMin}, {"autorate_upload_max", a.UploadMax}} {
		if o.v > MaxKbit {
			add(o.opt, "%d kbit/s is too large (at most %d kbit/s)", o.v, uint64(MaxKbit))
		}
	}
	if a.Target != 0 {
		if msg := targetRangeMsg(a.Target); msg != "" {
			add("autorate_target", "%s", msg)
		}
	}
	switch a.Probe {
	case "", ProbeICMP, ProbeUDP, ProbeBoth:
	default:
		add("autorate_probe", "unknown probe %q; use icmp, udp or both", a.Probe)
	}
	if len(a.Reflectors) > MaxAutorateReflectors {
		add("autorate_reflector", "%d reflectors; at most %d", len(a.Reflectors), MaxAutorateReflectors)
	}
	for _, h := range a.Reflectors {
		if msg := checkReflector(h); msg != "" {
			add("autorate_reflector", "%s", msg)
		}
	}
	if !a.Enabled {
		return
	}
	for _, d := range []struct {
		ingress              bool
		base, minOpt, maxOpt string
		lo, hi               uint64
	}{
		{true, "download", "autorate_download_min", "autorate_download_max", a.DownloadMin, a.DownloadMax},
		{false, "upload", "autorate_upload_min", "autorate_upload_max", a.UploadMin, a.UploadMax},
	} {
		r := q.AutorateRange(d.ingress)
		if r.Base == 0 {
			// An unshaped direction has no qdisc whose rate could move.
			if d.lo != 0 || d.hi != 0 {
				opt := d.minOpt
				if d.lo == 0 {
					opt = d.maxOpt
				}
				add(opt, "%s is 0 (not shaped), so it cannot autorate; set %s to a base rate in kbit/s, or remove %s and %s", d.base, d.base, d.minOpt, d.maxOpt)
			}
			continue
		}
		if r.Min < MinRateKbit {
			add(d.minOpt, "%d kbit/s is too low to shape; use at least %d", r.Min, MinRateKbit)
		}
		if r.Min > r.Base {
			add(d.minOpt, "minimum %d kbit/s is above the base rate (%s %d kbit/s); autorate needs min <= base <= max", r.Min, d.base, r.Base)
		}
		if r.Max < r.Base {
			add(d.maxOpt, "maximum %d kbit/s is below the base rate (%s %d kbit/s); autorate needs min <= base <= max", r.Max, d.base, r.Base)
		}
	}
	if q.Download == 0 && q.Upload == 0 {
		add("autorate", "download and upload are both 0 (nothing is shaped), so there is no rate to follow; set a base rate or autorate 0")
	}
}

// isIPv6 checks the form of an IPv6 address: hex groups of at most 4
// digits separated by colons, eight of them or fewer with one "::", the
// last two of which may be a dotted IPv4 address.
func isIPv6(s string) bool {
	double := strings.Count(s, "::")
	if s == "" || double > 1 || strings.Contains(s, ":::") ||
		s[0] == ':' && !strings.HasPrefix(s, "::") || s[len(s)-1] == ':' && !strings.HasSuffix(s, "::") {
		return false
	}
	n := 0
	groups := strings.Split(s, ":")
	for i, g := range groups {
		switch {
		case g == "":
			continue // part of the "::"
		case i == len(groups)-1 && strings.Contains(g, "."):
			n += 2 // ::ffff:1.2.3.4
			continue
		case len(g) > 4:
			return false
		}
		for j := 0; j < len(g); j++ {
			c := g[j]
			if !(isDigit(c) || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
				return false
			}
		}
		n++
	}
	if double == 1 {
		return n <= 7
	}
	return n == 8
}
