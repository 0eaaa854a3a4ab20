package cli

import (
	"context"
	"flag"

	"sqm/internal/service"
)

func cmdRestart() *command {
	return &command{
		name:    "restart",
		summary: "remove and re-apply the shaping from the config",
		usage:   "sqm restart [--config FILE] [--force] [--state-dir DIR] [IFACE...]",
		help: `Stops what sqm installed from the config file (or on the named
interfaces) and starts again from scratch, resetting every counter. The
config is checked before anything is removed: a broken config leaves the
running shaping alone. 'sqm reload' changes only what changed.

Example:

  $ sqm restart eth1
  eth1: removed (section "wan")
  eth1: applied (section "wan"): egress 10000 kbit, ingress 85000 kbit via ifb4eth1, piece_of_cake/cake`,
		flags: func(fs *flag.FlagSet) {
			configFlag(fs)
			stateDirFlag(fs)
			fs.Bool("force", false, "replace root/ingress qdiscs sqm did not install")
		},
		run: func(ctx context.Context, env *Env, fs *flag.FlagSet, args []string) error {
			qs, err := loadConfig(env, flagString(fs, "config"))
			if err != nil {
				return err
			}
			s, err := openSession(env, fs)
			if err != nil {
				return err
			}
			defer s.close()
			// Check first, so a config that cannot be applied does not
			// leave the router unshaped.
			if _, err := s.svc.Prepare(qs, s.source, service.PrepareOptions{Ifaces: args}); err != nil {
				return err
			}
			src := s.source
			if len(args) > 0 {
				src = ""
			}
			outs, err := s.svc.Stop(service.StopOptions{Ifaces: args, Source: src})
			printOutcomes(env.Stdout, outs)
			if err != nil {
				return err
			}
			outs, err = s.svc.Start(qs, s.source, service.PrepareOptions{Ifaces: args}, flagBool(fs, "force"))
			printOutcomes(env.Stdout, outs)
			return err
		},
	}
}
