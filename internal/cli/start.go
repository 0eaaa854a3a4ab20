//go:build linux

package cli

import (
	"context"
	"flag"
	"fmt"
	"io"
	"path/filepath"

	"sqm/internal/config"
	"sqm/internal/kernel"
	"sqm/internal/logger"
	"sqm/internal/service"
)

// session is an open kernel connection plus the service over it, with the
// state lock held.
type session struct {
	svc    *service.Service
	conn   *kernel.Conn
	lock   *service.Lock
	source string
	dir    string
	logs   *sectionLogs
}

func (s *session) close() {
	s.logs.close()
	s.lock.Release()
	s.conn.Close()
}

// sections makes the sections' verbosity and debug_logging options govern
// the log lines about them (sectionLogs); file is the debug log's name,
// "start-sqm" or "stop-sqm" as in sqm-scripts.
func (s *session) sections(qs []config.Queue, file, command string) error {
	if err := s.logs.configure(qs, s.dir, file, false); err != nil {
		return err
	}
	debugHeader(s.svc.Log, qs, command)
	return nil
}

// openSession locks the state directory and connects to the kernel. Every
// command that changes something runs inside one, so concurrent sqm
// invocations take turns.
func openSession(env *Env, fs *flag.FlagSet) (*session, error) {
	dir := stateDir(env, fs)
	lock, err := service.AcquireLock(dir, lockWait)
	if err != nil {
		return nil, err
	}
	conn, err := kernel.Open()
	if err != nil {
		lock.Release()
		return nil, err
	}
	logs := newSectionLogs(env.Stderr, logger.LevelWarn)
	log := logs.logger()
	conn.SetTrace(logs.trace(log))
	return &session{
		svc: &service.Service{
			Kernel: conn,
			Store:  &service.Store{Dir: dir},
			Plan:   buildPlan,
			Log:    log,
		},
		conn: conn, lock: lock, source: configSource(fs), dir: dir, logs: logs,
	}, nil
}

// printOutcomes reports what happened, one line per interface.
func printOutcomes(w io.Writer, outs []service.Outcome) {
	for _, o := range outs {
		fmt.Fprintln(w, o.String())
	}
}

func cmdStart() *command {
	return &command{
		name:    "start",
		summary: "shape the interfaces of every enabled config section",
		usage:   "sqm start [--config FILE] [--force] [--state-dir DIR] [IFACE...]",
		help: `Applies every enabled 'config queue' section of the config file (or only
those for the named interfaces). Everything is checked first: the config,
that each interface exists, that no two interfaces need one IFB device. Of
several enabled sections for one interface only the first is started, with
a warning naming both. An enabled section that is broken (a bad value, or
options the planner refuses) is refused: the other sections are started,
then start exits 1 naming it and each problem with file:line, and the
refused section's interface keeps what it had ('sqm status' lists it). A
disabled section is only read for its syntax: its bad values are warnings.
If anything else is wrong (a missing interface, an IFB clash, the kernel
refusing a tree) nothing is changed. Sections already
applied unchanged are left alone (their counters keep counting); changed
sections are re-applied. A section whose interface does not exist is an
error here; 'sqm daemon' waits for it instead.

sqm refuses to replace a root or ingress qdisc it did not install (e.g. one
set up by hand or another tool); --force replaces it.

Each section's verbosity option (sqm-scripts' levels: 0 silent, 1 error,
2 warning, 5 info, the default, 8 debug, 10 trace) gates the log lines
about it on stderr. With debug_logging '1', every line about the section,
at every level, and each netlink change sqm sends for it are also written
to <state-dir>/<iface>.start-sqm.log ('sqm stop': <iface>.stop-sqm.log),
rewritten by each run, as sqm-scripts does.

Example:

  $ sqm start
  eth1: applied (section "wan"): egress 10000 kbit, ingress 85000 kbit via ifb4eth1, piece_of_cake/cake
  $ sqm start eth1
  eth1: unchanged (section "wan")`,
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
			if err := s.sections(f.Queues, "start-sqm", "start"); err != nil {
				return err
			}
			outs, err := s.svc.Start(f.Queues, s.source, service.PrepareOptions{Ifaces: args, Refused: f.Refused}, flagBool(fs, "force"))
			printOutcomes(env.Stdout, outs)
			return err
		},
	}
}

// configSource is --config as an absolute path: state records it as the
// source of each section, and `sqm reload --config ./sqm` run from another
// directory must recognise its own sections.
func configSource(fs *flag.FlagSet) string {
	p := flagString(fs, "config")
	if p == "" {
		return ""
	}
	if abs, err := filepath.Abs(p); err == nil {
		return abs
	}
	return p
}
