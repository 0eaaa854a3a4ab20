//go:build linux

package cli

import (
	"context"
	"flag"

	"sqm/internal/service"
)

func cmdRestart() *command {
	return &command{
		name:    "restart",
		summary: "rebuild the shaping from the config, counters from zero",
		usage:   "sqm restart [--config FILE] [--force] [--state-dir DIR] [IFACE...]",
		help: `Rebuilds the shaping of every enabled section of the config file (or of
the named interfaces) with fresh qdiscs, so every counter starts from zero,
even where nothing changed; the shaping of sections that were deleted or
disabled is removed. 'sqm reload' changes only what changed.

It is not a stop followed by a start: each interface's new tree replaces
the old one in one transaction, and if the kernel refuses the new tree the
old one is put back, so a failed restart leaves the interface shaped as
before. A broken enabled section is refused as by 'sqm start' (the others
are rebuilt, its interface keeps its tree, exit 1); a file that is not
valid UCI changes nothing.

Example:

  $ sqm restart eth1
  eth1: applied (section "wan"): egress 10000 kbit, ingress 85000 kbit via ifb4eth1, piece_of_cake/cake`,
		flags: func(fs *flag.FlagSet) {
			configFlag(fs)
			stateDirFlag(fs)
			fs.Bool("force", false, "replace root/ingress qdiscs sqm did not install")
		},
		run: func(ctx context.Context, env *Env, fs *flag.FlagSet, args []string) error {
			// Broken sections are refused (reported, and exit 1)
			// after the others are shaped, as sqm-scripts starts each
			// section on its own.
			f, err := loadConfig(env, flagString(fs, "config"))
			if f == nil {
				return err
			}
			s, err := openSession(env, fs)
			if err != nil {
				return err
			}
			defer s.close()
			if err := s.sections(f.Queues, "start-sqm", "restart"); err != nil {
				return err
			}
			outs, err := s.svc.Restart(f.Queues, s.source, service.PrepareOptions{Ifaces: args, Refused: f.Refused}, flagBool(fs, "force"))
			printOutcomes(env.Stdout, outs)
			return err
		},
	}
}
