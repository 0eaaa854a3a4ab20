//go:build linux

package cli

import (
	"context"
	"flag"
	"fmt"
	"strconv"
	"strings"

	"sqm/internal/config"
	"sqm/internal/plan"
	"sqm/internal/service"
)

func cmdApply() *command {
	return &command{
		name:    "apply",
		summary: "shape one interface from flags, without a config file",
		usage:   "sqm apply --iface IF --down RATE --up RATE [--script NAME] [--qdisc NAME] [--linklayer none|ethernet|atm] [--overhead N] [--mpu N] [--dry-run] [--force]",
		help: `Sets up shaping on one interface from the command line, with sqm-scripts'
defaults for everything not given. Rates take a unit: 20mbit, 830kbit,
1gbit; 0 leaves that direction alone. A bare number such as 90000 is
refused: the config file reads it as kbit/s, tc as bit/s, and a guess
either way could cut the line to a trickle; write 90000kbit or 90mbit.
The result is
recorded like a config section named "cli", so 'sqm stop IF' removes it and
'sqm status' shows it. --dry-run prints the tc/ip commands instead.

Example (cable line measured at 100/20 Mbit/s, shaped to 90 %):

  $ sqm apply --iface eth1 --down 90mbit --up 18mbit --linklayer ethernet --overhead 18
  eth1: applied (section "cli"): egress 18000 kbit, ingress 90000 kbit via ifb4eth1, piece_of_cake/cake`,
		flags: func(fs *flag.FlagSet) {
			stateDirFlag(fs)
			fs.String("iface", "", "interface to shape (required)")
			fs.String("down", "", "download (ingress) `rate`, "+rateHelp+"; 0: none (required)")
			fs.String("up", "", "upload (egress) `rate`, "+rateHelp+"; 0: none (required)")
			fs.String("script", "", "recipe: "+strings.Join(config.Scripts(), ", ")+" (default: piece_of_cake)")
			fs.String("qdisc", "", "leaf qdisc, e.g. cake, fq_codel, pfifo (default: sqm-scripts' default)")
			fs.String("linklayer", "", "link-layer accounting: none, ethernet or atm")
			fs.String("overhead", "", "per-packet overhead in bytes (may be negative)")
			fs.String("mpu", "", "minimum packet unit in bytes")
			fs.Bool("dry-run", false, "print the commands, change nothing")
			fs.Bool("force", false, "replace root/ingress qdiscs sqm did not install")
		},
		run: func(ctx context.Context, env *Env, fs *flag.FlagSet, args []string) error {
			if len(args) > 0 {
				return usageError("unexpected arguments %q; give the interface with --iface", args)
			}
			q, err := queueFromFlags(fs)
			if err != nil {
				return err
			}
			if flagBool(fs, "dry-run") {
				mtu := 1500
				if m, ok := linkMTU(q.Interface); ok {
					mtu = m
				}
				p, err := buildPlan(q, mtu) // Validate, then Build, as start does
				if err != nil {
					return err
				}
				fmt.Fprint(env.Stdout, plan.RenderShell(p))
				return nil
			}
			s, err := openSession(env, fs)
			if err != nil {
				return err
			}
			defer s.close()
			outs, err := s.svc.Start([]config.Queue{*q}, service.SourceCLI, service.PrepareOptions{}, flagBool(fs, "force"))
			printOutcomes(env.Stdout, outs)
			return err
		},
	}
}

// queueFromFlags builds the "cli" section: sqm-scripts defaults, then the
// flags given.
func queueFromFlags(fs *flag.FlagSet) (*config.Queue, error) {
	q := config.Defaults()
	q.Name = service.SourceCLI
	q.Enabled = true
	q.Interface = flagString(fs, "iface")
	if q.Interface == "" {
		return nil, usageError("--iface is required")
	}
	for _, r := range []struct {
		flag string
		dst  *uint64
	}{{"down", &q.Download}, {"up", &q.Upload}} {
		v := flagString(fs, r.flag)
		if v == "" {
			return nil, usageError("--%s is required (a tc rate such as 20mbit, or 0)", r.flag)
		}
		bits, err := rateFlag(r.flag, v)
		if err != nil {
			return nil, err
		}
		*r.dst = bits / 1000 // sections are in kbit/s
		if bits > 0 && *r.dst == 0 {
			return nil, usageError("--%s %s is below 1kbit", r.flag, v)
		}
	}
	if v := flagString(fs, "script"); v != "" {
		q.Script = v
	}
	if v := flagString(fs, "qdisc"); v != "" {
		q.Qdisc = v
	}
	if v := flagString(fs, "linklayer"); v != "" {
		switch v {
		case "none", "ethernet", "atm":
			q.LinkLayer = v
		default:
			return nil, usageError("--linklayer %q: use none, ethernet or atm", v)
		}
	}
	// The ranges are config's (Validate below), the same a config file
	// gets; here only the syntax is checked.
	if v := flagString(fs, "overhead"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n != int(int32(n)) {
			return nil, usageError("--overhead %q: want a whole number of bytes (%d to %d)", v, config.MinOverhead, config.MaxOverhead)
		}
		q.Overhead = n
	}
	if v := flagString(fs, "mpu"); v != "" {
		n, err := strconv.ParseUint(v, 10, 32)
		if err != nil {
			return nil, usageError("--mpu %q: want a byte count (0 to %d)", v, config.MaxMPU)
		}
		q.StabMPU = uint32(n)
	}
	if err := q.Validate(); err != nil {
		return nil, usageError("%v", err)
	}
	return &q, nil
}
