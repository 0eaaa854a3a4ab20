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
	Path string
	// Queues are the `queue` sections in file order that sqm can use:
	// every enabled section that parsed and validated, and every disabled
	// one (whose bad values, if any, are only warnings). An enabled
	// section that is broken is in Refused instead.
	Queues []Queue
	// Refused are the enabled sections sqm cannot start, each with every
	// problem and where it was written. The other sections start without
	// them, as sqm-scripts starts each section on its own.
	Refused  []*SectionError
	Warnings []Warning // things sqm-scripts would silently ignore
	UCI      *uci.File // the raw file, for other section types (e.g. `sqm`)
}

// SectionError is an enabled section sqm refuses to start. Errs are the
// section's problems, each an *OptionError with file:line.
type SectionError struct {
	Section string
	// Interface is the section's interface option when it is a valid
	// name, else "": whoever shapes from the file keeps that interface's
	// running tree rather than remove it for a typo elsewhere.
	Interface string
	Pos       Position // the `config queue` line
	Errs      []error
}

func (e *SectionError) Error() string {
	msgs := make([]string, len(e.Errs))
	for i, err := range e.Errs {
		msgs[i] = err.Error()
	}
	return strings.Join(msgs, "\n")
}

func (e *SectionError) Unwrap() []error { return e.Errs }

// Err is every refused section's errors joined, or nil when there are
// none.
func (f *File) Err() error {
	errs := make([]error, len(f.Refused))
	for i, r := range f.Refused {
		errs[i] = r
	}
	return errors.Join(errs...)
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

// Load reads and resolves an sqm UCI file; see Parse.
func Load(path string) (*File, error) {
	fh, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("load config: %w (pass another file with --config, or start from the sample dist/openwrt/sqm.config)", err)
	}
	defer fh.Close()
	return Parse(path, fh)
}

// LoadQueues is Load for callers that only need the queues and want the
// whole file or nothing (`sqm lab`): a refused section is an error.
// Warnings are dropped.
func LoadQueues(path string) ([]Queue, error) {
	f, err := Load(path)
	if err != nil {
		return nil, err
	}
	return f.Queues, nil
}

// Parse reads an sqm UCI file; name is used in positions and errors.
//
// A file that is not valid UCI returns no File and a *uci.Error. Otherwise
// the File is always returned, and each `config queue` section stands on
// its own, as in sqm-scripts (run-openwrt.sh starts every section
// separately and never reads a disabled one): an enabled section with a
// bad value, or without an interface or script, goes to File.Refused with
// every problem (*OptionError, file:line) and the other sections are in
// File.Queues; a disabled section's bad values are warnings. The error is
// then File.Err(), so a caller that wants all or nothing (the web page
// checking a file before it writes it) just checks it, and one that
// shapes what it can (start, reload, the daemon) uses the File and
// reports the error.
func Parse(name string, r io.Reader) (*File, error) {
	u, err := uci.Parse(name, r)
	if err != nil {
		return nil, err
	}
	f := &File{Path: name, UCI: u}
	for _, s := range u.SectionsOfType("queue") {
		q, warns, errs := parseQueue(name, s)
		f.Warnings = append(f.Warnings, warns...)
		if q.Enabled && len(errs) == 0 {
			if err := q.Validate(); err != nil {
				errs = unjoin(err)
			}
		}
		switch {
		case len(errs) == 0:
			f.Queues = append(f.Queues, q)
		case q.Enabled || enabledUnclear(s):
			iface := ""
			if v, ok := s.Get("interface"); ok && checkIfName(v) == "" {
				iface = v
			}
			f.Refused = append(f.Refused, &SectionError{Section: q.Name, Interface: iface, Pos: q.Pos, Errs: errs})
		default:
			// sqm-scripts never reads a disabled section; what would
			// stop it once enabled is worth saying, not refusing.
			for _, e := range errs {
				oe := e.(*OptionError)
				f.Warnings = append(f.Warnings, Warning{Pos: oe.Pos, Section: oe.Section, Option: oe.Option,
					Msg: oe.Msg + " (the section is disabled, so this does not matter until it is enabled)"})
			}
			f.Queues = append(f.Queues, q)
		}
	}
	_, skipped := Effective(f.Queues)
	f.Warnings = append(f.Warnings, skipped...)
	return f, f.Err()
}

// enabledUnclear reports a section whose enabled option is neither 0 nor
// 1: it may have been meant to start, so it is refused (and reported)
// rather than quietly treated as disabled.
func enabledUnclear(s *uci.Section) bool {
	v, ok := s.Get("enabled")
	return ok && v != "" && v != "0" && v != "1"
}

// Refuse is the refusal of q for err: the planner's verdict on a section
// that parsed (its problems joined, each naming its option), kept as the
// config's own refusals are, so every surface reports both alike.
func Refuse(q *Queue, err error) *SectionError {
	return &SectionError{Section: q.Name, Interface: q.Interface, Pos: q.Pos, Errs: unjoin(err)}
}

// JoinRefused is the error of a run that went on without rs: every
// refused section's problems, then one line naming the sections, ending
// with others (what the run did with the rest). nil without refusals.
func JoinRefused(rs []*SectionError, others string) error {
	if len(rs) == 0 {
		return nil
	}
	errs := make([]error, 0, len(rs)+1)
	names := make([]string, len(rs))
	for i, r := range rs {
		errs = append(errs, r)
		names[i] = fmt.Sprintf("%q (%s)", r.Section, r.Pos)
	}
	errs = append(errs, fmt.Errorf("refused %d section(s): %s; %s", len(rs), strings.Join(names, ", "), others))
	return errors.Join(errs...)
}

// unjoin splits an errors.Join result into its errors.
func unjoin(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
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
	m := map[string]setter{
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
	autorateSetters(m)
	return m
}

// parseQueue resolves one `config queue` section. It returns every bad
// value as an *OptionError; an option that does not parse keeps its
// default.
func parseQueue(file string, s *uci.Section) (Queue, []Warning, []error) {
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
		if (o.Name == "ilimit" || o.Name == "elimit") && strings.Trim(v, "0") == "" {
			// LuCI's form accepts 0 (its datatype is a plain uinteger)
			// next to "leave empty for default". sqm-scripts would pass
			// "limit 0" to tc, a queue that drops nearly every packet;
			// nobody means that, so 0 is the default, as empty is.
			warns = append(warns, Warning{Pos: pos, Section: q.Name, Option: o.Name,
				Msg: fmt.Sprintf("%q means the default limit (1001 packets, where the qdisc takes one); sqm-scripts would pass limit 0 to tc, which drops nearly everything (leave it empty instead)", v)})
			continue
		}
		if msg := parse(&q, v); msg != "" {
			errs = append(errs, &OptionError{Pos: pos, Section: q.Name, Option: o.Name, Msg: msg})
		}
	}
	return q, warns, errs
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
