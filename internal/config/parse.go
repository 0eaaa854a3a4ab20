package config

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"sqm/internal/uci"
	"sqm/internal/units"
)

// File is a parsed sqm configuration (/etc/config/sqm).
type File struct {
	Path     string
	Queues   []Queue   // the `queue` sections in file order, disabled ones included
	Warnings []Warning // things sqm-scripts would silently ignore
	UCI      *uci.File // the raw file, for other section types (e.g. `sqm`)
}

// Warning is a problem that does not stop sqm: an option nobody reads, or
// a section sqm-scripts would skip. Callers decide whether to print it.
type Warning struct {
	Pos     Position
	Section string
	Option  string
	Msg     string
}

func (w Warning) String() string {
	return (&OptionError{Pos: w.Pos, Section: w.Section, Option: w.Option, Msg: w.Msg}).Error()
}

// Enabled returns the queues sqm starts; see Effective.
func (f *File) Enabled() []Queue {
	start, _ := Effective(f.Queues)
	return start
}

// Effective is the one rule for which sections start: the enabled ones,
// and of several enabled sections on one interface only the first in file
// order, as in sqm-scripts (run.sh skips the later ones because the first
// one's state file exists). The later ones come back as warnings naming
// both sections and where they are; every other interface still starts.
// Parse reports these warnings, the service logs and reports them.
func Effective(qs []Queue) (start []Queue, skipped []Warning) {
	first := map[string]*Queue{}
	for i := range qs {
		q := &qs[i]
		if !q.Enabled {
			continue
		}
		if prev, ok := first[q.Interface]; ok {
			skipped = append(skipped, Warning{Pos: posOf(q, "interface"), Section: q.Name, Option: "interface",
				Msg: fmt.Sprintf("section skipped: interface %s is already shaped by queue %q (%s), the first enabled section for it; as in sqm-scripts only that one is started (disable one of them)",
					q.Interface, prev.Name, prev.Pos)})
			continue
		}
		first[q.Interface] = q
		start = append(start, *q)
	}
	return start, skipped
}

// Queue returns the queue with the given section name or @queue[i]
// reference, or nil.
func (f *File) Queue(ref string) *Queue {
	s := f.UCI.Lookup(ref)
	if s == nil || s.Type != "queue" {
		return nil
	}
	for i := range f.Queues {
		if f.Queues[i].Name == sectionName(s) {
			return &f.Queues[i]
		}
	}
	return nil
}

// Load reads and resolves an sqm UCI file.
func Load(path string) (*File, error) {
	fh, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("load config: %w (pass another file with --config, or start from the sample dist/openwrt/sqm.config)", err)
	}
	defer fh.Close()
	return Parse(path, fh)
}

// LoadQueues is Load for callers that only need the queues, such as the
// daemon's reload hook. Warnings are dropped.
func LoadQueues(path string) ([]Queue, error) {
	f, err := Load(path)
	if err != nil {
		return nil, err
	}
	return f.Queues, nil
}

// Parse reads an sqm UCI file; name is used in positions and errors. Every
// bad value in the file is reported (joined with errors.Join; each is an
// *OptionError or a *uci.Error). Options of disabled sections must be
// well-formed too, but only enabled sections must be complete (interface,
// script), because sqm-scripts never looks at disabled ones.
func Parse(name string, r io.Reader) (*File, error) {
	u, err := uci.Parse(name, r)
	if err != nil {
		return nil, err
	}
	f := &File{Path: name, UCI: u}
	var errs []error
	for _, s := range u.SectionsOfType("queue") {
		q, warns, err := parseQueue(name, s)
		f.Warnings = append(f.Warnings, warns...)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if q.Enabled {
			if err := q.Validate(); err != nil {
				errs = append(errs, err)
				continue
			}
		}
		f.Queues = append(f.Queues, q)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	_, skipped := Effective(f.Queues)
	f.Warnings = append(f.Warnings, skipped...)
	return f, nil
}

func posOf(q *Queue, option string) Position {
	if p, ok := q.OptionPos[option]; ok {
		return p
	}
	return q.Pos
}

func sectionName(s *uci.Section) string {
	if s.Name != "" {
		return s.Name
	}
	return fmt.Sprintf("@queue[%d]", s.Index)
}

// scriptDefaults is what sqm-scripts' defaults.sh and run.sh give an
// option that is unset or empty.
func scriptDefaults() Queue {
	return Queue{
		Download:      14698,
		Upload:        2302,
		Qdisc:         "fq_codel",
		SquashDSCP:    true,
		SquashIngress: true,
		IngressECN:    true,
		EgressECN:     true,
		ITarget:       Target{Mode: TargetAuto},
		ETarget:       Target{Mode: TargetAuto},
		LinkLayer:     "none",
		StabMTU:       2047,
		StabTSize:     512,
		LLAM:          "default",
		Verbosity:     5,
	}
}

// ignoredOption reports options that only LuCI reads (UI gates) or nobody
// reads any more; sqm-scripts accepts them silently and so do we.
func ignoredOption(name string) bool {
	switch name {
	case "qdisc_advanced", "qdisc_really_really_advanced", "linklayer_advanced": // LuCI gates
		return true
	case "target": // exported by run.sh, read by no script
		return true
	case "shaper_burst", "htb_quantum_function": // exported by old run.sh releases only
		return true
	}
	return false
}

// setter parses one option value into q; it returns the message of an
// OptionError, or "".
type setter func(q *Queue, v string) string

// setters returns the parser of every option sqm-scripts reads.
func setters() map[string]setter {
	return map[string]setter{
		"enabled": func(q *Queue, v string) string {
			return boolOpt(&q.Enabled, v, `"1" enables the section, "0" disables it (sqm-scripts starts a section only if enabled is 1)`)
		},
		"interface": func(q *Queue, v string) string {
			if msg := checkIfName(v); msg != "" {
				return msg
			}
			q.Interface = v
			return ""
		},
		"download": func(q *Queue, v string) string { return kbitOpt(&q.Download, v, "download", "85000") },
		"upload":   func(q *Queue, v string) string { return kbitOpt(&q.Upload, v, "upload", "10000") },
		"qdisc": func(q *Queue, v string) string {
			if !isQdiscName(v) {
				return fmt.Sprintf("%q is not a qdisc name (lower-case letters, digits and _, e.g. cake or fq_codel)", v)
			}
			q.Qdisc = v
			return ""
		},
		"script": func(q *Queue, v string) string {
			s := strings.TrimSuffix(v, ".qos")
			if !isScript(s) {
				return fmt.Sprintf("unknown script %q; use one of %s (with or without .qos)", v, strings.Join(Scripts(), ", "))
			}
			q.Script = s
			return ""
		},
		"squash_dscp": func(q *Queue, v string) string {
			return boolOpt(&q.SquashDSCP, v, `"1" washes DSCP marks of received packets, "0" keeps them`)
		},
		"squash_ingress": func(q *Queue, v string) string {
			return boolOpt(&q.SquashIngress, v, `"1" ignores DSCP marks on ingress (one tier), "0" honours them`)
		},
		"ingress_ecn": func(q *Queue, v string) string { return ecnOpt(&q.IngressECN, v) },
		"egress_ecn":  func(q *Queue, v string) string { return ecnOpt(&q.EgressECN, v) },
		"ilimit":      func(q *Queue, v string) string { return uint32Opt(&q.ILimit, "ilimit", v) },
		"elimit":      func(q *Queue, v string) string { return uint32Opt(&q.ELimit, "elimit", v) },
		"itarget":     func(q *Queue, v string) string { return targetOpt(&q.ITarget, v) },
		"etarget":     func(q *Queue, v string) string { return targetOpt(&q.ETarget, v) },
		"iqdisc_opts": func(q *Queue, v string) string { q.IQdiscOpts = v; return "" },
		"eqdisc_opts": func(q *Queue, v string) string { q.EQdiscOpts = v; return "" },
		"linklayer": func(q *Queue, v string) string {
			switch v {
			case "none", "ethernet", "atm":
				q.LinkLayer = v
			case "adsl": // tc's synonym for atm
				q.LinkLayer = "atm"
			default:
				return fmt.Sprintf("unknown link layer %q; use none, ethernet or atm (adsl means atm)", v)
			}
			return ""
		},
		"overhead": func(q *Queue, v string) string {
			n, msg := checkInt("overhead", v)
			if msg == "" {
				q.Overhead = int(n)
			}
			return msg
		},
		"tcMTU":   func(q *Queue, v string) string { return uint32Opt(&q.StabMTU, "tcMTU", v) },
		"tcTSIZE": func(q *Queue, v string) string { return uint32Opt(&q.StabTSize, "tcTSIZE", v) },
		"tcMPU":   func(q *Queue, v string) string { return uint32Opt(&q.StabMPU, "tcMPU", v) },
		"linklayer_adaptation_mechanism": func(q *Queue, v string) string {
			switch v {
			case "default", "cake", "htb_private", "tc_stab":
				q.LLAM = v
				return ""
			}
			return fmt.Sprintf("unknown mechanism %q; use default, cake, htb_private or tc_stab", v)
		},
		"debug_logging": func(q *Queue, v string) string {
			return boolOpt(&q.DebugLogging, v, `"1" writes start/stop debug logs, "0" does not`)
		},
		"verbosity": func(q *Queue, v string) string {
			n, err := strconv.Atoi(v)
			if err != nil || !isVerbosity(n) {
				return fmt.Sprintf("%q is not a log level; use 0 (silent), 1 (error), 2 (warning), 5 (info), 8 (debug) or 10 (trace)", v)
			}
			q.Verbosity = n
			return ""
		},
	}
}

// parseQueue resolves one `config queue` section. Errors come back joined.
func parseQueue(file string, s *uci.Section) (Queue, []Warning, error) {
	q := scriptDefaults()
	q.Name = sectionName(s)
	q.Pos = Position{File: file, Line: s.Line}
	q.OptionPos = map[string]Position{}
	var warns []Warning
	var errs []error
	set := setters()
	for _, o := range s.Options {
		pos := Position{File: file, Line: o.Line}
		q.OptionPos[o.Name] = pos
		if ignoredOption(o.Name) {
			continue
		}
		parse, ok := set[o.Name]
		if !ok {
			warns = append(warns, Warning{Pos: pos, Section: q.Name, Option: o.Name,
				Msg: fmt.Sprintf("unknown option %q is ignored (sqm-scripts does not read it; check the spelling)", o.Name)})
			continue
		}
		// OpenWrt's config_get joins list values with spaces; sqm-scripts
		// sees the same.
		v := o.Value()
		if v == "" {
			continue // empty means unset: the script default stays
		}
		if msg := parse(&q, v); msg != "" {
			errs = append(errs, &OptionError{Pos: pos, Section: q.Name, Option: o.Name, Msg: msg})
		}
	}
	if len(errs) > 0 {
		return q, warns, errors.Join(errs...)
	}
	return q, warns, nil
}

func boolOpt(dst *bool, v, meaning string) string {
	switch v {
	case "1":
		*dst = true
	case "0":
		*dst = false
	default:
		return fmt.Sprintf("%q is not 0 or 1 (%s)", v, meaning)
	}
	return ""
}

func kbitOpt(dst *uint64, v, name, example string) string {
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil || !allDigits(v) {
		return fmt.Sprintf("%q is not a number of kbit/s (sqm-scripts takes %s in kbit/s, e.g. %s)", v, name, example)
	}
	if n > MaxKbit {
		return fmt.Sprintf("%q kbit/s is too large (at most %d kbit/s; sqm-scripts takes %s in kbit/s, e.g. %s)", v, uint64(MaxKbit), name, example)
	}
	*dst = n
	return ""
}

// uint32Opt reads an unsigned option bounded by intBounds (every bound
// there fits in 32 bits).
func uint32Opt(dst *uint32, option, v string) string {
	n, msg := checkInt(option, v)
	if msg == "" {
		*dst = uint32(n)
	}
	return msg
}

func ecnOpt(dst *bool, v string) string {
	switch v {
	case "ECN", "ecn":
		*dst = true
	case "NOECN", "noecn":
		*dst = false
	default:
		return fmt.Sprintf("%q is not ECN or NOECN", v)
	}
	return ""
}

// targetOpt reads itarget/etarget. sqm-scripts accepts <digits><unit> with
// the units of tc's get_time; we also accept fractions (2.5ms), which
// sqm-scripts would silently truncate to 2ms.
func targetOpt(dst *Target, v string) string {
	switch v {
	case "auto", "Auto", "AUTO":
		*dst = Target{Mode: TargetAuto}
		return ""
	case "default", "Default", "DEFAULT":
		*dst = Target{Mode: TargetDefault}
		return ""
	}
	const expect = "use auto, default, or a time with a unit (s, sec, secs, ms, msec, msecs, us, usec, usecs), e.g. 5ms"
	if v != "" && isDigit(v[len(v)-1]) {
		return fmt.Sprintf("%q has no unit; %s", v, expect)
	}
	d, err := units.ParseTime(v)
	// units reports its 32-bit microsecond limit only as text.
	if err != nil && strings.Contains(err.Error(), "too large") {
		return fmt.Sprintf("%s is out of range: a target must be at most %v (the qdiscs take 32-bit microseconds)", v, MaxTarget)
	}
	if err != nil {
		return fmt.Sprintf("%q is not a target; %s", v, expect)
	}
	if d > MaxTarget {
		return fmt.Sprintf("%s is out of range: a target must be at most %v (the qdiscs take 32-bit microseconds)", v, MaxTarget)
	}
	*dst = Target{Mode: TargetExplicit, Value: d}
	return ""
}

func allDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !isDigit(s[i]) {
			return false
		}
	}
	return true
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }
