package cli

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"sqm/internal/config"
	"sqm/internal/kernel"
	"sqm/internal/linkwatch"
	"sqm/internal/service"
)

func cmdDaemon() *command {
	return &command{
		name:    "daemon",
		summary: "keep interfaces shaped as they come and go",
		usage:   "sqm daemon [--config FILE] [--state-dir DIR] [--restore=false] [--check-interval 30s] [--stop-on-exit]",
		help: `Runs in the foreground (for systemd or procd) and keeps the config applied:

  - at start it applies every enabled section; sections whose interface does
    not exist yet (PPPoE, Wi-Fi, VLANs that come late) wait for it;
  - it watches link events over rtnetlink and applies a section as soon as
    its interface appears or comes back (events within --debounce are one
    apply), and forgets the state of interfaces that vanish;
  - every --check-interval it compares the kernel with what it applied and
    puts back trees someone removed or replaced (--restore=false: only logs
    the difference, once);
  - on SIGHUP, or when the config file changes, it applies only what
    changed; a config that does not parse is logged with file and line and
    the running shaping is kept;
  - on SIGTERM/SIGINT it exits and leaves the shaping in place, unless
    --stop-on-exit.

It logs one line per event to stderr and nothing while nothing happens.

Example:

  $ sqm daemon --config /etc/config/sqm
  level=INFO msg="daemon started" config=/etc/config/sqm sections=2 pid=1234
  level=INFO msg=applied interface=eth1 section=wan detail="egress 10000 kbit, ..."
  level=INFO msg=waiting interface=pppoe-wan section=wan6 detail="interface does not exist yet"`,
		flags: func(fs *flag.FlagSet) {
			configFlag(fs)
			stateDirFlag(fs)
			fs.Bool("restore", true, "put back trees someone removed or replaced (false: only report)")
			fs.Duration("check-interval", 30*time.Second, "how often to compare the kernel with the state (0: never)")
			fs.Duration("poll-interval", 5*time.Second, "how often to look at the config file's modification time (0: never)")
			fs.Duration("debounce", time.Second, "quiet time after link events before acting")
			fs.Bool("stop-on-exit", false, "remove the shaping when the daemon exits")
			fs.String("log-level", "info", "debug, info, warn or error")
		},
		run: func(ctx context.Context, env *Env, fs *flag.FlagSet, args []string) error {
			if len(args) > 0 {
				return usageError("daemon takes no arguments; select sections with the config's enabled option")
			}
			var level slog.Level
			if err := level.UnmarshalText([]byte(flagString(fs, "log-level"))); err != nil {
				return usageError("--log-level %q: use debug, info, warn or error", flagString(fs, "log-level"))
			}
			log := newLogger(env.Stderr, level)
			dir := stateDir(env, fs)
			conn, err := kernel.Open()
			if err != nil {
				return err
			}
			defer conn.Close()

			ctx, cancel := context.WithCancel(ctx)
			defer cancel()
			events := make(chan linkwatch.Event, 64)
			if w, err := linkwatch.Open(); err != nil {
				log.Error("not watching links: interfaces that appear later are shaped only on SIGHUP or restart", "err", err)
				events = nil
			} else {
				go func() {
					defer close(events)
					if err := w.Run(ctx, events); err != nil {
						log.Error("link watching failed", "err", err)
					}
				}()
			}
			hup := make(chan os.Signal, 1)
			signal.Notify(hup, syscall.SIGHUP)
			defer signal.Stop(hup)

			every := func(name string) time.Duration {
				d, _ := time.ParseDuration(flagString(fs, name))
				if d <= 0 {
					return -1
				}
				return d
			}
			d := &service.Daemon{
				Svc: &service.Service{
					Kernel: conn,
					Store:  &service.Store{Dir: dir},
					Plan:   buildPlan,
					Log:    log,
				},
				ConfigPath: flagString(fs, "config"),
				Load: func(path string) ([]config.Queue, error) {
					return loadConfig(&Env{Stderr: logWriter{log}, Getenv: env.Getenv}, path)
				},
				Lock: func() (func(), error) {
					l, err := service.AcquireLock(dir, lockWait)
					if err != nil {
						return nil, err
					}
					return func() { l.Release() }, nil
				},
				Events:     events,
				Reload:     hup,
				Debounce:   every("debounce"),
				CheckEvery: every("check-interval"),
				PollEvery:  every("poll-interval"),
				Restore:    flagBool(fs, "restore"),
				StopOnExit: flagBool(fs, "stop-on-exit"),
				Log:        log,
			}
			if d.Debounce < 0 {
				d.Debounce = 0
			}
			if err := d.Run(ctx); err != nil {
				return fmt.Errorf("daemon: %w", err)
			}
			return nil
		},
	}
}

// logWriter turns lines written by loadConfig (config warnings) into log
// records, so the daemon's output stays one line per event.
type logWriter struct{ log *slog.Logger }

func (l logWriter) Write(p []byte) (int, error) {
	for _, line := range strings.Split(strings.TrimSpace(string(p)), "\n") {
		if line != "" {
			l.log.Warn(line)
		}
	}
	return len(p), nil
}
