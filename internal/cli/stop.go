//go:build linux

package cli

import (
	"context"
	"flag"

	"sqm/internal/config"
	"sqm/internal/service"
)

func cmdStop() *command {
	return &command{
		name:    "stop",
		summary: "remove the shaping sqm installed",
		usage:   "sqm stop [--config FILE] [--state-dir DIR] [IFACE...]",
		help: `Removes exactly what the state directory says sqm installed: its root and
ingress qdiscs and its IFB devices, nothing else. Without arguments every
interface sqm shapes is stopped; with --config only those from that file.
Stopping an interface sqm does not shape is reported, not an error.
With 'sqm daemon' running, stop the daemon instead (systemctl stop sqm,
/etc/init.d/sqm stop) or disable the section and reload: the daemon
re-applies configured sections when their link changes.

Example:

  $ sqm stop eth1
  eth1: removed (section "wan")`,
		flags: func(fs *flag.FlagSet) {
			fs.String("config", "", "only stop sections applied from this config `file`")
			stateDirFlag(fs)
		},
		run: func(ctx context.Context, env *Env, fs *flag.FlagSet, args []string) error {
			s, err := openSession(env, fs)
			if err != nil {
				return err
			}
			defer s.close()
			// The sections as they were applied: their options say how
			// to log their removal.
			states, _ := s.svc.Store.All()
			qs := make([]config.Queue, 0, len(states))
			for _, st := range states {
				qs = append(qs, st.Queue)
			}
			if err := s.sections(qs, "stop-sqm", "stop"); err != nil {
				return err
			}
			outs, err := s.svc.Stop(service.StopOptions{Ifaces: args, Source: configSource(fs)})
			printOutcomes(env.Stdout, outs)
			return err
		},
	}
}
