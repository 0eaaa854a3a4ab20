//go:build linux

package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"sqm/internal/config"
	"sqm/internal/kernel"
	"sqm/internal/linkwatch"
	"sqm/internal/logger"
	"sqm/internal/service"
	"sqm/internal/units"
)

func cmdDaemon() *command {
	return &command{
		name:    "daemon",
		summary: "keep interfaces shaped as they come and go",
		usage:   "sqm daemon [--config FILE] [--state-dir DIR] [--restore=false] [--check-interval 30s] [--stop-on-exit] [--http ADDR]",
		help: `Runs in the foreground (for systemd or procd) and keeps the config applied:

  - at start it applies every enabled section; sections whose interface does
    not exist yet (PPPoE, Wi-Fi, VLANs that come late) wait for it;
  - it watches link events over rtnetlink and applies a section as soon as
    its interface appears or comes back: a new interface (a new ifindex) is
    shaped at once, further events within --debounce are one apply; it
    forgets the state of interfaces that vanish; a foreign qdisc found on
    an interface that appears is left alone and logged;
  - every --check-interval it compares the kernel with what it applied and
    puts back trees someone removed or replaced (--restore=false: only logs
    the difference, once);
  - on SIGHUP, or when its poll (--poll-interval) sees the config file
    change, it applies only what changed;
  - it never exits on a config problem: a broken enabled section is logged
    with file and line and refused (its interface keeps what it had, 'sqm
    status' and the page show it) while the others are shaped, and it is
    applied once fixed (SIGHUP, or the file changes); a file that is not
    valid UCI, or missing, keeps the running shaping until it is fixed; a
    bad option of the 'daemon' section below is logged and keeps its
    default; SIGHUP is caught before anything else, so a reload while the
    daemon starts is a reload once it runs;
  - on SIGTERM/SIGINT it exits and leaves the shaping in place, unless
    --stop-on-exit.

With --http ADDR it also serves sqm's web page (see below).

It logs one line per event to stderr and nothing while nothing happens.
Lines about a section follow its verbosity option (sqm-scripts' levels: 0
silent, 1 error, 2 warning, 5 info, the default, 8 debug, 10 trace);
--log-level sets the level of the others. A section with debug_logging '1'
also has every line about it, with each netlink change sqm sends, appended
to <state-dir>/<iface>.debug.log (started over at 1 MiB).

The settings can also be given in the config file, in a section
'config sqm 'daemon''; a flag given on the command line wins:

  config sqm 'daemon'
  	option restore '1'          # --restore
  	option check_interval '30'  # --check-interval (seconds, or 30s, 2m)
  	option poll_interval '5'    # --poll-interval
  	option debounce '1'         # --debounce
  	option stop_on_exit '0'     # --stop-on-exit
  	option log_level 'info'     # --log-level
  	option http '8080'          # --http (loopback unless a LAN address is named)
  	option http_users '/etc/sqm/web-users'  # --http-users
  	option test_server '192.0.2.7'          # --test-server
  	option http_cert '/etc/uhttpd.crt'      # --http-cert: HTTPS (PEM or DER)
  	option http_key '/etc/uhttpd.key'       # --http-key
  	option http_hosts 'router.example.com'  # --http-hosts: more names

The web page (--http ADDR): the queues at a glance (applied, link up, rates,
recipe, last error, drift) with live counters, cake's per-tin statistics
and a short history; a form for every option (link presets, diffserv,
per-host fairness, ack-filter) checked like 'sqm start' and written back
with comments kept, then applied (the old file is put back if the kernel
refuses); a bufferbloat test against --test-server; and sqm tune on a
section against the same server (its progress, the chosen rates, every
point and the trade-off plot), whose rates "Save these rates" writes into
the section as sqm tune writes them and applies. While a tune from the page
runs it holds the state lock: the daemon's own operations are skipped
(logged) and the config is reloaded when it ends. A bare PORT listens on
127.0.0.1; the wildcard address and the shaped interfaces' addresses are
refused, and so is every connection from a client the router reaches
through a shaped interface (the WAN side; checked per connection). Logins are the --http-users file's lines ("admin HASH" or "read
HASH", from sqm passwd). With --http-cert and --http-key the page is HTTPS
only (and its session cookie Secure); OpenWrt's uhttpd pair will do;
without them the password crosses the LAN in clear. Prometheus metrics are
at /metrics without login.

The page assumes a hostile LAN and hostile pages in LAN browsers. It
answers only requests whose Host names the router: its addresses,
localhost, its host name (also with .lan and resolv.conf's domains) and the
--http-hosts names; any other gets 421 (a page elsewhere that points its
own name at the router, DNS rebinding, reads nothing, /metrics included).
Each client (an IPv4 address or an IPv6 /64) holds at most 16 connections,
all together 128 (at that cap the biggest holder's oldest makes room); a
request's headers must arrive within 10 s and its body within 20 s. After
three failed logins a client waits 1 s before its next login is checked,
doubling to 2 minutes, and logins from other clients are not delayed;
failures are logged at most once a minute per client. Sessions end after
an hour unused and 12 hours after the login; read-only and admin logins
have 32 places each. The config API changes only queue sections, at most
64 options at a time. See docs/web.md.

Example:

  $ sqm daemon --config /etc/config/sqm
  level=INFO msg="daemon started" config=/etc/config/sqm sections=2 pid=1234
  level=INFO msg=applied interface=eth1 section=wan detail="egress 10000 kbit, ..."
  level=INFO msg=waiting interface=pppoe-wan section=wan6 detail="interface does not exist yet"`,
		flags: func(fs *flag.FlagSet) {
			configFlag(fs)
			stateDirFlag(fs)
			fs.Bool("restore", true, "put back trees someone removed or replaced (false: only report)")
			units.DurationFlag(fs, "check-interval", 30*time.Second, "how often to compare the kernel with the state (0: never)")
			units.DurationFlag(fs, "poll-interval", 5*time.Second, "how often to look at the config file's modification time (0: never)")
			units.DurationFlag(fs, "debounce", time.Second, "quiet time after link events before acting (0: act on the first event)")
			fs.Bool("stop-on-exit", false, "remove the shaping when the daemon exits")
			fs.String("log-level", "info", "debug, info, warn or error")
			webFlags(fs)
		},
		run: func(ctx context.Context, env *Env, fs *flag.FlagSet, args []string) error {
			// SIGHUP first, before anything slow (the page, netlink, the
			// link watcher): Go's default for it is to end the process,
			// and procd sends one on every reload, so a reload while the
			// daemon starts would count as a crash. One that comes early
			// waits in the channel and is a reload once the loop runs.
			// SIGTERM/SIGINT are caught by cmd/sqm from the start.
			hup := make(chan os.Signal, 1)
			signal.Notify(hup, syscall.SIGHUP)
			defer signal.Stop(hup)
			if DaemonSignalsCaught != nil {
				DaemonSignalsCaught()
			}
			if len(args) > 0 {
				return usageError("daemon takes no arguments; select sections with the config's enabled option")
			}
			// A bad option in the file's daemon section is logged
			// (below) and that setting keeps its default: the daemon
			// never exits on a config problem (issue 23).
			levelOnCommandLine := flagSet(fs, "log-level")
			sectionErr := daemonSection(fs, flagString(fs, "config"))
			var level logger.Level
			if err := level.UnmarshalText([]byte(flagString(fs, "log-level"))); err != nil {
				if !levelOnCommandLine {
					sectionErr = errors.Join(sectionErr, fmt.Errorf("log_level %q: use debug, info, warn or error", flagString(fs, "log-level")))
					fs.Set("log-level", "info")
					level = logger.LevelInfo
				} else {
					return usageError("--log-level %q: use debug, info, warn or error", flagString(fs, "log-level"))
				}
			}
			setDaemonGC(env.Getenv)
			setDaemonProcs(env.Getenv)
			// The page's address and logins are checked, and its port
			// bound, before anything touches the kernel.
			page, err := prepareWeb(env, fs, configSource(fs))
			if err != nil {
				return err
			}
			if page != nil {
				defer page.close()
			}
			logs := newSectionLogs(env.Stderr, level)
			defer logs.close()
			log := logs.logger()
			for _, e := range splitErrors(sectionErr) {
				log.Error("daemon setting ignored; its default is used", "err", e)
			}
			dir := stateDir(env, fs)
			conn, err := kernel.Open()
			if err != nil {
				return err
			}
			defer conn.Close()
			conn.SetTrace(logs.trace(log))

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
			debounce, checkEvery, pollEvery := daemonTimings(fs)
			reqs := make(chan service.Request)
			// loaded is the last config that loaded, for the stop log.
			var loaded []config.Queue
			d := &service.Daemon{
				Svc: &service.Service{
					Kernel: conn,
					Store:  &service.Store{Dir: dir},
					Plan:   buildPlan,
					Log:    log,
					// One section the kernel refuses must not keep
					// the others unshaped.
					Independent: true,
				},
				ConfigPath: configSource(fs),
				Load: func(path string) (*config.File, error) {
					refreshAvailableQdiscs(log, dir)
					f, err := loadConfig(&Env{Stderr: log.Writer(logger.LevelWarn), Getenv: env.Getenv}, path)
					if f != nil {
						loaded = f.Queues
						// luci-app-sqm tells users to look at
						// <iface>.start-sqm.log: the daemon's whole
						// life goes there (appended, cut at 1 MiB).
						if lerr := logs.configure(f.Queues, dir, "start-sqm", true); lerr != nil {
							log.Error("cannot write a debug log", "err", lerr)
						}
						debugHeader(log, f.Queues, "daemon (re)load")
					}
					return f, err
				},
				Lock: func() (func(), error) {
					l, err := service.AcquireLock(dir, lockWait)
					if err != nil {
						return nil, err
					}
					if ctx.Err() != nil && flagBool(fs, "stop-on-exit") {
						// Shutting down: what follows is the
						// removal, which goes to <iface>.stop-sqm.log
						// as `sqm stop` writes it (LuCI's other name).
						if lerr := logs.configure(loaded, dir, "stop-sqm", false); lerr != nil {
							log.Error("cannot write a debug log", "err", lerr)
						}
					}
					return func() { l.Release() }, nil
				},
				Events:     events,
				Reload:     hup,
				Requests:   reqs,
				Debounce:   debounce,
				CheckEvery: checkEvery,
				PollEvery:  pollEvery,
				Restore:    flagBool(fs, "restore"),
				StopOnExit: flagBool(fs, "stop-on-exit"),
				Log:        log,
			}
			if page != nil {
				page.start(ctx, d, reqs, log)
			}
			if err := d.Run(ctx); err != nil {
				return fmt.Errorf("daemon: %w", err)
			}
			return nil
		},
	}
}

// DaemonSignalsCaught, when set (only by tests, through clitest), is called
// as soon as the daemon catches SIGHUP, before it opens anything, so a
// test can send a signal in that window without guessing at sleeps.
var DaemonSignalsCaught func()

// daemonTimings maps the duration flags to service.Daemon's fields, where
// 0 means "use the default" and a negative value means "none". On the
// command line 0 is the natural way to say "never" (--check-interval 0,
// --poll-interval 0) and "act at once" (--debounce 0), so a 0 flag becomes
// -1 here rather than silently turning into the daemon's default.
func daemonTimings(fs *flag.FlagSet) (debounce, checkEvery, pollEvery time.Duration) {
	get := func(name string) time.Duration {
		d := fs.Lookup(name).Value.(flag.Getter).Get().(time.Duration)
		if d <= 0 {
			return -1
		}
		return d
	}
	return get("debounce"), get("check-interval"), get("poll-interval")
}

// daemonOptions maps `config sqm 'daemon'` options to flags.
func daemonOptions() []struct{ option, flag, kind string } {
	return []struct{ option, flag, kind string }{
		{"restore", "restore", "bool"},
		{"check_interval", "check-interval", "duration"},
		{"poll_interval", "poll-interval", "duration"},
		{"debounce", "debounce", "duration"},
		{"stop_on_exit", "stop-on-exit", "bool"},
		{"log_level", "log-level", "string"},
		{"http", "http", "string"},
		{"http_users", "http-users", "string"},
		{"http_cert", "http-cert", "string"},
		{"http_key", "http-key", "string"},
		{"http_hosts", "http-hosts", "string"},
		{"test_server", "test-server", "string"},
	}
}

// daemonSection applies the config file's `config sqm 'daemon'` section to
// the flags the command line did not set. A missing or unreadable file is
// left to the daemon's own load, which reports it; a refused queue section
// does not hide this one. A bad option is an error (the daemon logs it and
// keeps that flag's value); every other option is still applied.
func daemonSection(fs *flag.FlagSet, path string) error {
	f, _ := config.Load(path)
	if f == nil || f.UCI == nil {
		return nil
	}
	sec := f.UCI.Lookup("daemon")
	if sec == nil || sec.Type != "sqm" {
		return nil
	}
	set := map[string]bool{}
	fs.Visit(func(fl *flag.Flag) { set[fl.Name] = true })
	var errs []error
	for _, o := range daemonOptions() {
		opt := sec.Option(o.option)
		if opt == nil || set[o.flag] {
			continue
		}
		v := opt.Value()
		switch o.kind {
		case "bool":
			switch v {
			case "1", "true", "yes", "on":
				v = "true"
			case "0", "false", "no", "off":
				v = "false"
			default:
				errs = append(errs, fmt.Errorf("%s:%d: sqm \"daemon\" option %s: %q is not a boolean; use '1' or '0'", path, opt.Line, o.option, v))
				continue
			}
		case "duration":
			// The flag's own parser: plain numbers are seconds, as
			// elsewhere in UCI and on the command line.
			if _, err := units.ParseDuration(v); err != nil {
				errs = append(errs, fmt.Errorf("%s:%d: sqm \"daemon\" option %s: %q is not a duration; use seconds (30) or 30s, 2m", path, opt.Line, o.option, opt.Value()))
				continue
			}
		}
		if err := fs.Set(o.flag, v); err != nil {
			errs = append(errs, fmt.Errorf("%s:%d: sqm \"daemon\" option %s: %w", path, opt.Line, o.option, err))
		}
	}
	return errors.Join(errs...)
}

// flagSet reports whether the command line set flag name.
func flagSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

// splitErrors splits an errors.Join result into its errors (none for nil).
func splitErrors(err error) []error {
	if err == nil {
		return nil
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}
