package service

import (
	"context"
	"errors"
	"os"
	"slices"
	"sync"
	"time"

	"sqm/internal/config"
	"sqm/internal/linkwatch"
	"sqm/internal/logger"
)

// Daemon keeps the kernel shaped as the config says while interfaces come
// and go:
//
//	start ──► apply config (missing interfaces wait)
//	  │
//	  ├─ link event for a configured interface ─► apply it now if it was not
//	  │                      handled within Debounce, else debounce, then apply
//	  ├─ every CheckEvery ─► compare kernel with state ─► restore or report
//	  ├─ SIGHUP, or config mtime/size changed ─► reload (only what changed;
//	  │             a broken section keeps its interface's tree and the
//	  │             others are shaped; a file that does not parse at all
//	  │             keeps all shaping; neither ends the daemon)
//	  └─ ctx cancelled (SIGTERM) ─► return; shaping stays unless StopOnExit
//
// It blocks in select between events (no busy polling); the only timers are
// the config poll and the drift check.
type Daemon struct {
	Svc        *Service
	ConfigPath string
	// Load reads the config: config.Load in production. A File with
	// Refused sections is used (the others are shaped, the refused ones
	// reported); a nil File (the file is missing or not UCI) keeps what
	// is running until the file is fixed.
	Load func(path string) (*config.File, error)
	// Lock serialises the daemon's changes with CLI invocations; it
	// returns the unlock function.
	Lock func() (func(), error)
	// Events are link events (nil: the daemon does not watch links).
	Events <-chan linkwatch.Event
	// Reload requests a reload (SIGHUP).
	Reload <-chan os.Signal
	// Requests are reloads whose caller waits for the outcome (the web
	// page after writing the config): the change is made by this loop,
	// the only goroutine that changes the kernel, and reported back.
	Requests <-chan Request

	// Debounce bounds how often one interface is handled. An event for a
	// new incarnation of an interface (an ifindex not handled before:
	// it appeared, or was deleted and re-created, as on a PPPoE
	// reconnect) is handled at once, so it is shaped within one apply;
	// so is the first event more than Debounce after the last such
	// handling. Other events are collected and handled once they have
	// been quiet for Debounce. 0 means the default, 1 s;
	// negative means none: every event is handled at once (sqm daemon
	// --debounce 0).
	Debounce   time.Duration
	CheckEvery time.Duration // drift check period; default 30 s; <0 disables
	PollEvery  time.Duration // config mtime poll period; default 5 s; <0 disables
	// Restore re-applies a tree someone removed or replaced; when false
	// the daemon only logs the difference (once per distinct difference).
	Restore    bool
	StopOnExit bool
	Log        *logger.Logger
	// Autorate starts the autorate loop of a queue with autorate on
	// (autorate.go); nil: the build's own (StartAutorate).
	Autorate AutorateStarter

	queues   []config.Queue
	refused  []*config.SectionError
	cfgStamp stamp
	reported map[string]string

	ar *autorates

	mu      sync.Mutex
	last    map[string]Outcome
	lastErr error
	lastAt  time.Time
}

// Request is a reload someone waits for. Done receives one result; give it
// a buffer of one so the daemon never blocks on a caller that gave up.
type Request struct {
	Why  string
	Done chan<- RequestResult
}

// RequestResult is what a requested reload did. Err is a config that did
// not load or a section the kernel refused (its interface keeps its old
// tree: each interface is one transaction).
type RequestResult struct {
	Outcomes []Outcome
	Err      error
}

// LastRun is what the daemon last did: the latest outcome per interface of
// any operation, and the last operation's error with its time.
type LastRun struct {
	Outcomes map[string]Outcome
	Err      error
	At       time.Time
}

// Last reports what the daemon last did, for a status page: otherwise it
// is only in the daemon's log.
func (d *Daemon) Last() LastRun {
	d.mu.Lock()
	defer d.mu.Unlock()
	m := make(map[string]Outcome, len(d.last))
	for k, v := range d.last {
		m[k] = v
	}
	return LastRun{Outcomes: m, Err: d.lastErr, At: d.lastAt}
}

type stamp struct {
	mod  time.Time
	size int64
}

func statConfig(path string) stamp {
	fi, err := os.Stat(path)
	if err != nil {
		return stamp{}
	}
	return stamp{fi.ModTime(), fi.Size()}
}

func (d *Daemon) log() *logger.Logger {
	if d.Log == nil {
		return logger.New(logger.Discard)
	}
	return d.Log
}

func orDefault(v, def time.Duration) time.Duration {
	if v == 0 {
		return def
	}
	return v
}

// ticker returns a channel ticking every d, or a nil channel (never ready)
// when d < 0.
func ticker(d time.Duration) (<-chan time.Time, func()) {
	if d < 0 {
		return nil, func() {}
	}
	t := time.NewTicker(d)
	return t.C, t.Stop
}

// Run applies the config and then serves events until ctx is cancelled,
// which is a clean exit (nil). A config problem never ends it: procd
// would respawn it a few times and give up, leaving the WAN unshaped after
// the next reboot. It shapes what it can, logs the rest, and applies the
// fixed file on SIGHUP or when the poll sees it change.
func (d *Daemon) Run(ctx context.Context) error {
	debounce := orDefault(d.Debounce, time.Second)
	maxWait := 5 * debounce
	d.reported = map[string]string{}
	d.cfgStamp = statConfig(d.ConfigPath)
	start := d.Autorate
	if start == nil {
		start = StartAutorate
	}
	kern := d.Svc.Kernel
	d.ar = &autorates{start: start, store: d.Svc.Store, log: d.log(), mtu: kern.LinkMTU}
	d.Svc.Kernel = autorateKernel{Kernel: kern, a: d.ar}
	defer func() {
		d.ar.stopAll()
		d.Svc.Kernel = kern
	}()
	if f, err := d.Load(d.ConfigPath); f == nil {
		// Nothing known about the sections: what an earlier run
		// shaped stays until the file can be read.
		d.log().Error("config not loaded; waiting for it to be fixed (SIGHUP, or the file changes)", "err", err)
		d.record(nil, err)
		d.log().Info("daemon started", "config", d.ConfigPath, "sections", 0, "pid", os.Getpid())
	} else {
		d.use(f)
		d.log().Info("daemon started", "config", d.ConfigPath, "sections", len(f.Queues)+len(f.Refused), "pid", os.Getpid())
		d.locked("start", func() ([]Outcome, error) {
			return d.Svc.Reload(d.queues, d.ConfigPath, PrepareOptions{AllowMissing: true, Refused: d.refused})
		}, true)
	}

	checkC, stopCheck := ticker(orDefault(d.CheckEvery, 30*time.Second))
	defer stopCheck()
	pollC, stopPoll := ticker(orDefault(d.PollEvery, 5*time.Second))
	defer stopPoll()

	timer := time.NewTimer(time.Hour)
	timer.Stop()
	pending := map[string]bool{}
	resync := false
	var first time.Time
	// handled is which incarnation (ifindex) of each interface was last
	// handled at once, and when; a burst of events after that goes
	// through the debounce.
	type leading struct {
		index int
		at    time.Time
	}
	handled := map[string]leading{}

	for {
		select {
		case <-ctx.Done():
			if d.StopOnExit {
				d.locked("stop-on-exit", func() ([]Outcome, error) {
					return d.Svc.Stop(StopOptions{})
				}, true)
			}
			d.log().Info("daemon stopped", "shaping", map[bool]string{true: "removed", false: "left in place"}[d.StopOnExit])
			return nil

		case ev, ok := <-d.Events:
			if !ok {
				if ctx.Err() != nil {
					// The watcher closes its channel when ctx is
					// cancelled; select may see that before ctx.Done.
					// That is the shutdown, not a failure.
					d.Events = nil
					continue
				}
				d.log().Error("link watching stopped; interfaces that appear from now on are not shaped until the daemon restarts")
				d.Events = nil
				continue
			}
			if !ev.Resync && !d.interesting(ev.Name) {
				continue
			}
			d.log().Debug("link event", "event", ev.String())
			if !ev.Resync && !ev.Deleted && d.configured(ev.Name) {
				// Deleting an interface first reports it down (same
				// index), then deleted; its re-creation has a new index.
				// Keying on the index keeps the old one's last events
				// from using up the new one's immediate handling.
				if h, ok := handled[ev.Name]; !ok || h.index != ev.Index || time.Since(h.at) >= debounce {
					// Leading edge: shape an interface that (re)appears
					// without waiting. The debounced pass below still
					// follows, and finds the tree unchanged unless later
					// events changed something.
					d.handleLinks([]string{ev.Name}, false)
					handled[ev.Name] = leading{ev.Index, time.Now()}
				}
			}
			if ev.Resync {
				resync = true
			} else {
				pending[ev.Name] = true
			}
			if first.IsZero() {
				first = time.Now()
			}
			// Trailing debounce, but never postpone beyond maxWait.
			wait := debounce
			if left := maxWait - time.Since(first); left < wait {
				wait = max(left, 0)
			}
			timer.Reset(wait)

		case <-timer.C:
			ifaces := make([]string, 0, len(pending))
			for i := range pending {
				ifaces = append(ifaces, i)
			}
			slices.Sort(ifaces)
			all := resync
			pending, resync, first = map[string]bool{}, false, time.Time{}
			d.handleLinks(ifaces, all)

		case <-checkC:
			d.check()

		case <-pollC:
			if st := statConfig(d.ConfigPath); st != d.cfgStamp {
				d.cfgStamp = st
				d.reload("config file changed")
			}

		case <-d.Reload:
			d.cfgStamp = statConfig(d.ConfigPath)
			d.reload("SIGHUP")

		case r := <-d.Requests:
			d.cfgStamp = statConfig(d.ConfigPath)
			outs, err := d.reload(r.Why)
			r.Done <- RequestResult{Outcomes: outs, Err: err}
		}
	}
}

// interesting reports whether a link event concerns a configured enabled
// section or an interface sqm shapes.
func (d *Daemon) interesting(iface string) bool {
	for _, q := range d.queues {
		if q.Enabled && q.Interface == iface {
			return true
		}
	}
	st, _ := d.Svc.Store.Load(iface)
	return st != nil
}

func (d *Daemon) configured(iface string) bool {
	for _, q := range d.queues {
		if q.Enabled && q.Interface == iface {
			return true
		}
	}
	return false
}

// handleLinks brings the given interfaces (all, after lost events) in line
// with the config: apply those that exist, forget those that vanished.
func (d *Daemon) handleLinks(ifaces []string, all bool) {
	d.locked("link change", func() ([]Outcome, error) {
		outs, err := d.Svc.CleanStale()
		var sel []string
		for _, i := range ifaces {
			if d.configured(i) {
				sel = append(sel, i)
			}
		}
		if !all && len(sel) == 0 {
			return outs, err
		}
		if all {
			sel = nil
		}
		// Never force: an interface that appears with a qdisc sqm did not
		// install (a hotplug script, another tool) is refused and logged,
		// as sqm start refuses it without --force. Restore is about trees
		// sqm installed and someone changed (see check), not this.
		more, err2 := d.Svc.Start(d.queues, d.ConfigPath, PrepareOptions{Ifaces: sel, AllowMissing: true, Refused: d.refused}, false)
		return append(outs, more...), errors.Join(err, err2)
	}, false)
}

func (d *Daemon) reload(why string) ([]Outcome, error) {
	f, err := d.Load(d.ConfigPath)
	if f == nil {
		d.log().Error("config not reloaded; the running shaping is kept", "reason", why, "err", err)
		d.record(nil, err)
		return nil, err
	}
	d.use(f)
	d.log().Info("reloading config", "reason", why, "config", d.ConfigPath)
	return d.locked("reload", func() ([]Outcome, error) {
		return d.Svc.Reload(d.queues, d.ConfigPath, PrepareOptions{AllowMissing: true, Refused: d.refused})
	}, false)
}

// use makes f the config the daemon acts on.
func (d *Daemon) use(f *config.File) {
	d.queues, d.refused = f.Queues, f.Refused
}

func (d *Daemon) record(outs []Outcome, err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.last == nil {
		d.last = map[string]Outcome{}
	}
	for _, o := range outs {
		if o.Interface != "" { // a section refused for its interface option; Store.Refused has it
			d.last[o.Interface] = o
		}
	}
	d.lastErr, d.lastAt = err, time.Now()
}

// check compares the kernel with the state and restores or reports drift.
func (d *Daemon) check() {
	var drift map[string]string
	d.locked("check", func() ([]Outcome, error) {
		var err error
		drift, err = d.Svc.Check()
		return nil, err
	}, false)
	for i := range d.reported {
		if _, still := drift[i]; !still {
			delete(d.reported, i)
		}
	}
	if len(drift) == 0 {
		return
	}
	var ifaces []string
	for i, diff := range drift {
		if !d.Restore {
			if d.reported[i] != diff {
				d.log().Warn("kernel tree differs from sqm's state; not restoring (restore is off)", "interface", i, "diff", oneLine(diff))
				d.reported[i] = diff
			}
			continue
		}
		d.log().Warn("kernel tree differs from sqm's state; restoring", "interface", i, "diff", oneLine(diff))
		ifaces = append(ifaces, i)
	}
	if len(ifaces) == 0 {
		return
	}
	slices.Sort(ifaces)
	d.locked("restore", func() ([]Outcome, error) {
		return d.Svc.Restore(ifaces)
	}, false)
}

// ErrDeferred, wrapped by a Lock error, says the shaping is held on
// purpose (a tune from the web page) by something that reloads when it is
// done: the skipped operation is logged as information, not an error.
var ErrDeferred = errors.New("deferred")

// locked runs op under the lock and logs its outcomes: every change, and
// unchanged ones only when verbose (at start).
func (d *Daemon) locked(what string, op func() ([]Outcome, error), verbose bool) ([]Outcome, error) {
	unlock, err := d.Lock()
	if errors.Is(err, ErrDeferred) {
		d.log().Info(what+" deferred", "why", err)
		d.record(nil, err)
		return nil, err
	}
	if err != nil {
		d.log().Error(what+" skipped", "err", err)
		d.record(nil, err)
		return nil, err
	}
	defer unlock()
	outs, err := op()
	if what != "check" {
		d.record(outs, err)
	}
	if d.ar != nil {
		// Loops for the queues now applied with autorate on; those
		// whose tree was re-applied start again on the new tree.
		states, _ := d.Svc.Store.All()
		d.ar.sync(states)
	}
	for _, o := range outs {
		if o.Action == ActUnchanged && !verbose {
			continue
		}
		d.log().Info(string(o.Action), "interface", o.Interface, "section", o.Section, "detail", o.Detail)
	}
	if err != nil {
		d.log().Error(what+" failed", "err", err)
	}
	return outs, err
}
