package config

import (
	"fmt"
	"time"
)

// Position is where something was written in a config file. A zero Position
// means "not from a file" (defaults, command-line flags).
type Position struct {
	File string
	Line int
}

func (p Position) String() string {
	switch {
	case p.File == "" && p.Line == 0:
		return "command line"
	case p.Line == 0:
		return p.File
	}
	return fmt.Sprintf("%s:%d", p.File, p.Line)
}

// TargetMode says how an AQM target was given (sqm-scripts itarget/etarget).
type TargetMode int

const (
	TargetAuto     TargetMode = iota // "" or "auto": tuned from the rate
	TargetDefault                    // "default": the qdisc's own default
	TargetExplicit                   // "5ms": used as given, interval untouched
)

// Target is one direction's AQM target setting.
type Target struct {
	Mode  TargetMode
	Value time.Duration // only for TargetExplicit
}

// Queue is one sqm-scripts `config queue` section with every option resolved
// to its effective value (sqm-scripts' defaults applied). Field comments give
// the UCI option name. Rates are kbit/s (1000 bit/s) as in sqm-scripts.
type Queue struct {
	Name string   // section name, or "@queue[N]" for anonymous sections
	Pos  Position // the `config queue` line

	Enabled   bool   // enabled: only the literal "1" enables
	Interface string // interface
	Download  uint64 // download, kbit/s; 0 disables ingress shaping
	Upload    uint64 // upload, kbit/s; 0 disables egress shaping
	Qdisc     string // qdisc (leaf qdisc, or cake)
	Script    string // script, without the ".qos" suffix (e.g. "piece_of_cake")

	SquashDSCP    bool // squash_dscp (ZERO_DSCP_INGRESS): wash DSCP of received packets
	SquashIngress bool // squash_ingress (IGNORE_DSCP_INGRESS): one tier on ingress
	IngressECN    bool // ingress_ecn: ECN or NOECN
	EgressECN     bool // egress_ecn

	ILimit     uint32 // ilimit; 0 means the default (1001 packets)
	ELimit     uint32 // elimit
	ITarget    Target
	ETarget    Target
	IQdiscOpts string // iqdisc_opts, tc syntax, parsed by the planner
	EQdiscOpts string // eqdisc_opts

	LinkLayer string // linklayer: none, ethernet or atm ("adsl" is read as atm)
	Overhead  int    // overhead, bytes, may be negative
	StabMTU   uint32 // tcMTU (default 2047)
	StabTSize uint32 // tcTSIZE (default 512)
	StabMPU   uint32 // tcMPU (default 0)
	LLAM      string // linklayer_adaptation_mechanism: default, cake, htb_private, tc_stab

	DebugLogging bool // debug_logging
	Verbosity    int  // verbosity (default 5)

	// Autorate holds the autorate_* options (sqm's own, not sqm-scripts').
	Autorate Autorate

	// OptionPos records where each option was set, keyed by UCI option
	// name, so that errors found later (by the planner) can point at it.
	OptionPos map[string]Position
}

// Errorf returns an error about one option of the section, prefixed with
// the place the option was written (or the section, if it was defaulted):
//
//	/etc/config/sqm:12: queue "wan" option eqdisc_opts: unknown cake keyword "diffserv5"
func (q *Queue) Errorf(option, format string, args ...any) error {
	pos, ok := q.OptionPos[option]
	if !ok {
		pos = q.Pos
	}
	return &OptionError{Pos: pos, Section: q.Name, Option: option, Msg: fmt.Sprintf(format, args...)}
}

// OptionError is an error about one option; callers print it as is.
type OptionError struct {
	Pos     Position
	Section string
	Option  string
	Msg     string
}

func (e *OptionError) Error() string {
	s := e.Pos.String() + ": "
	if e.Section != "" {
		s += fmt.Sprintf("queue %q ", e.Section)
	}
	if e.Option != "" {
		s += "option " + e.Option + ": "
	}
	return s + e.Msg
}
