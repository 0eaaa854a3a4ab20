//go:build linux

package cli

import (
	"context"
	"flag"

	"sqm/internal/service"
)

func cmdReload() *command {
	return &command{
		name:    "reload",
		summary: "apply only what changed in the config",
		usage:   "sqm reload [--config FILE] [--state-dir DIR] [IFACE...]",
		help: `Brings the kernel in line with the config file: new and changed sections
are applied, unchanged ones are left alone (their counters keep counting),
and the shaping of sections that were deleted or disabled is removed. A
broken enabled section is refused as by 'sqm start' (the others are
applied, its interface keeps its tree, exit 1); a file that is not valid
UCI changes nothing. With a running daemon, send it
SIGHUP instead (systemctl reload sqm, /etc/init.d/sqm reload).

Example:

  $ sqm reload
  eth2: removed (section "guest"): section removed or disabled
  eth1: unchanged (section "wan")`,
		flags: func(fs *flag.FlagSet) {
			configFlag(fs)
			stateDirFlag(fs)
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
			if err := s.sections(f.Queues, "start-sqm", "reload"); err != nil {
				return err
			}
			outs, err := s.svc.Reload(f.Queues, s.source, service.PrepareOptions{Ifaces: args, Refused: f.Refused})
			printOutcomes(env.Stdout, outs)
			return err
		},
	}
}
