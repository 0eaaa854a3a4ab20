package config

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

// Scripts returns the recipes sqm knows: the five sqm-scripts recipes and sqm's
// own ingress policers ("police", and "codel_police", an eBPF policer that
// marks before it drops).
func Scripts() []string {
	return []string{"simplest", "simple", "simplest_tbf", "piece_of_cake", "layer_cake", "police", "codel_police"}
}

// Defaults returns a queue with sqm-scripts' defaults for every option, for
// building a queue from command-line flags. defaults.sh has no script, so
// the script is piece_of_cake, the default of sqm-scripts' Linux
// default.conf and of LuCI; its qdisc is therefore cake (the recipe forces
// it anyway). Interface is empty and Enabled false: the caller sets them.
// Parse, by contrast, leaves an unset script empty and an unset qdisc
// fq_codel, exactly as defaults.sh does.
func Defaults() Queue {
	q := scriptDefaults()
	q.Script = "piece_of_cake"
	q.Qdisc = "cake"
	q.OptionPos = map[string]Position{}
	return q
}

// Validate checks that the queue can be started: an interface name Linux
// accepts, a known script, and every field within the range Parse accepts.
// It does not apply recipe rules (piece_of_cake forcing cake, and so on):
// the planner does, with a note. All problems are returned, joined; each
// is an *OptionError pointing at the option (or the section, for values
// that were not written in a file).
func (q *Queue) Validate() error {
	var errs []error
	add := func(option, format string, args ...any) {
		errs = append(errs, q.Errorf(option, format, args...))
	}
	if q.Interface == "" {
		add("interface", "no interface given; set option interface to the device to shape, e.g. eth0 or pppoe-wan")
	} else if msg := checkIfName(q.Interface); msg != "" {
		add("interface", "%s", msg)
	}
	switch s := strings.TrimSuffix(q.Script, ".qos"); {
	case s == "":
		add("script", "no script given; sqm-scripts refuses to start without one; use one of %s", strings.Join(Scripts(), ", "))
	case !isScript(s):
		add("script", "unknown script %q; use one of %s (with or without .qos)", q.Script, strings.Join(Scripts(), ", "))
	}
	if !isQdiscName(q.Qdisc) {
		add("qdisc", "%q is not a qdisc name (lower-case letters, digits and _, e.g. cake or fq_codel)", q.Qdisc)
	}
	if q.Download > MaxKbit {
		add("download", "%d kbit/s is too large (at most %d kbit/s)", q.Download, uint64(MaxKbit))
	}
	if q.Upload > MaxKbit {
		add("upload", "%d kbit/s is too large (at most %d kbit/s)", q.Upload, uint64(MaxKbit))
	}
	switch q.LinkLayer {
	case "none", "ethernet", "atm", "adsl":
	default:
		add("linklayer", "unknown link layer %q; use none, ethernet or atm", q.LinkLayer)
	}
	for _, o := range []struct {
		option string
		n      int64
		unset  bool // 0 means "the default" and is not range-checked
	}{
		{"overhead", int64(q.Overhead), false},
		{"tcMTU", int64(q.StabMTU), false},
		{"tcTSIZE", int64(q.StabTSize), false},
		{"tcMPU", int64(q.StabMPU), false},
		{"ilimit", int64(q.ILimit), q.ILimit == 0},
		{"elimit", int64(q.ELimit), q.ELimit == 0},
	} {
		if msg := rangeMsg(o.option, o.n); msg != "" && !o.unset {
			add(o.option, "%s", msg)
		}
	}
	switch q.LLAM {
	case "default", "cake", "htb_private", "tc_stab":
	default:
		add("linklayer_adaptation_mechanism", "unknown mechanism %q; use default, cake, htb_private or tc_stab", q.LLAM)
	}
	for _, t := range []struct {
		option string
		t      Target
	}{{"itarget", q.ITarget}, {"etarget", q.ETarget}} {
		switch t.t.Mode {
		case TargetAuto, TargetDefault:
		case TargetExplicit:
			if t.t.Value < 0 {
				add(t.option, "target %v is negative", t.t.Value)
			} else if t.t.Value > MaxTarget {
				add(t.option, "target %v is out of range: at most %v (the qdiscs take 32-bit microseconds)", t.t.Value, MaxTarget)
			}
		default:
			add(t.option, "unknown target mode %d", t.t.Mode)
		}
	}
	if !isVerbosity(q.Verbosity) {
		add("verbosity", "%d is not a log level; use 0, 1, 2, 5, 8 or 10", q.Verbosity)
	}
	q.validateAutorate(add)
	return errors.Join(errs...)
}

// CheckIfName applies the kernel's dev_valid_name rules. It is the one
// interface-name check: the config reader, Validate, and the service (for
// names from the command line, and before using a name in a state file's
// path) all call it, so a name one accepts the others accept too.
func CheckIfName(name string) error {
	if msg := checkIfName(name); msg != "" {
		return errors.New(msg)
	}
	return nil
}

func checkIfName(name string) string {
	switch {
	case name == "":
		return "empty interface name"
	case len(name) > 15:
		return fmt.Sprintf("interface name %q is %d characters long; Linux allows at most 15", name, len(name))
	case name == "." || name == "..":
		return fmt.Sprintf("interface name %q is not allowed by Linux", name)
	case strings.ContainsAny(name, "/: \t\n\v\f\r"):
		return fmt.Sprintf("interface name %q contains '/', ':' or white space, which Linux does not allow", name)
	}
	return ""
}

func isQdiscName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '_') {
			return false
		}
	}
	return true
}

func isScript(s string) bool { return slices.Contains(Scripts(), s) }

func isVerbosity(n int) bool {
	switch n {
	case 0, 1, 2, 5, 8, 10:
		return true
	}
	return false
}
