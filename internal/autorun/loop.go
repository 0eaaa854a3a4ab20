// Package autorun runs sqm's autorate for one queue: it feeds the
// reflector probes' samples (internal/reflector) and the shaper's own
// counters to the controller (internal/autorate) every probe interval, and
// when a direction's rate changed it sets the new rate on the running tree
// (plan.Rerate, kernel SetRate). The daemon runs one Loop per queue with
// autorate on, the lab runs one against its emulated link: both through
// this package, so what the lab measures is what a router runs.
//
// The loop talks to the kernel and the probes through small interfaces
// (Shaper, Prober), so its logic (rates set only when they change, the
// fall back to the base rate when no reflector answers, replacements,
// status) is tested with fakes and a fake clock.
//
// A failure never leaves a queue unshaped or stuck at a bad rate: when the
// probes fail or no reflector answers for Config.FallbackAfter, the loop
// puts both directions back at their base rate and says so in its status;
// when replies come back it starts the controller afresh from the base.
package autorun

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"time"

	"sqm/internal/autorate"
	"sqm/internal/reflector"
)

// Shaper is one direction's shaper in the kernel.
type Shaper interface {
	// Read fills sh with the shaper's cumulative counters.
	Read(sh *autorate.Shaper) error
	// SetRate changes the running tree's rate to bits/s. It returns the
	// rate actually set (the tree's resolution, kbit/s), which is what
	// the status shows.
	SetRate(bits uint64) (uint64, error)
}

// Waker is what the loop needs of a *trafficwake.Waker: a signal, while
// the link is idle, that traffic started.
type Waker interface {
	// Arm: the next packet of load size sends on C and disarms.
	Arm() error
	Disarm() error
	C() <-chan struct{}
}

// Prober is what the loop needs of a *reflector.Prober.
type Prober interface {
	// Poll reads the replies waiting, reports lost probes and sends the
	// probes due, without waiting; the loop calls it at each tick.
	Poll(emit func(*reflector.Sample)) error
	Replace(i int, t reflector.Target) error
	// SetInterval: probe each target every d (the controller's idle
	// interval while the link is idle, its probe interval otherwise).
	SetInterval(d time.Duration)
	// Waiting calls fn with each target's oldest probe still in flight.
	Waiting(fn func(target int, sent time.Time))
}

// Config is one loop.
type Config struct {
	// Name says whose loop this is in log lines (the interface).
	Name string
	// Controller is the controller's configuration; its Reflectors must
	// be the kinds of Targets, slot by slot (KindOf).
	Controller autorate.Config
	// Shapers per direction (autorate.Down, autorate.Up); nil: that
	// direction is not shaped, its rate is never set.
	Shapers [2]Shaper
	Prober  Prober
	// Targets are the prober's targets, slot by slot; Spares are the
	// reflectors a slot the controller gives up on is refilled from.
	Targets []reflector.Target
	Spares  []reflector.Target
	// FallbackAfter: no reply from any reflector for this long and both
	// directions go back to their base rates (default 10 s; at least three
	// probe intervals, so that an idle link's rare probes are not taken
	// for silence). The controller itself holds the rate through shorter
	// stalls.
	FallbackAfter time.Duration
	// Logf gets one line per event worth a log line (not per tick).
	Logf func(format string, args ...any)
	// Debugf, if set, gets one line per rate change with the decision's
	// reason and what it saw (a debug log, the lab's test).
	Debugf func(format string, args ...any)
	// BufferSize bounds the samples held between ticks (default 256).
	BufferSize int
	// IdleTick is the tick while the controller probes at its idle
	// interval (default the package's IdleTick; never faster than the
	// controller's ProbeInterval).
	IdleTick time.Duration
	// Waker, if set, wakes an idle loop when traffic starts; the idle
	// tick is then ArmedIdleTick while it is armed.
	Waker Waker
}

// Loop is one running autorate. Step and Status may be called from
// different goroutines; Step from one at a time.
type Loop struct {
	cfg   Config
	ctl   *autorate.Controller
	buf   *reflector.Buffer
	rs    []reflector.Sample
	in    autorate.Input
	st    autorate.Status
	spare int
	asked []bool // replacement asked for and logged, per slot

	stalledSince time.Duration
	fallback     bool
	lastErr      [2]string     // the last SetRate error logged, per direction
	probeEvery   time.Duration // the interval the prober was last given
	tick         time.Duration // how often Step should run now (Interval)
	lastStep     time.Duration // now at the previous Step
	origin       time.Time     // Step's, for waitFn
	waitFn       func(int, time.Time)
	idleC        chan struct{} // IdleChanged's

	// The Waker's state: armed; the ticks at ProbeInterval left after a
	// wake; when it may be armed again, and the wait before that.
	armed   bool
	watch   int
	rearmAt time.Duration
	backoff time.Duration

	mu     sync.Mutex
	status Status
}

// Status is what status pages and metrics show of a loop.
type Status struct {
	Running  bool   // the loop is ticking
	Idle     bool   // the controller says idle: ticks at IdleTick, probes at its idle interval
	Fallback bool   // at the base rates: no reflector answered for FallbackAfter
	Err      string // why the loop stopped or fell back ("" while fine)
	Dir      [2]DirStatus
	// Reflectors per slot.
	Reflectors []ReflectorStatus
	// Decisions counts the controller's decisions by reason, per direction
	// (index autorate.Reason).
	Decisions   [2][MaxReasons]uint64
	RateChanges uint64 // rate changes set on the shaper, both directions (the start at the base rate is none)
	SetErrors   uint64 // rate changes the kernel refused
	Dropped     uint64 // samples dropped because the loop fell behind
	Ticks       uint64
}

// MaxReasons bounds autorate.Reason values counted in Decisions.
const MaxReasons = 16

// DirStatus is one direction.
type DirStatus struct {
	Shaped        bool
	RateBits      uint64 // set on the shaper now
	BaseBits      uint64
	MinBits       uint64
	MaxBits       uint64
	AchievedBits  uint64        // what the shaper sent over the last 200 ms
	Load          float64       // AchievedBits / RateBits
	Delay         time.Duration // the delay rise the controller acted on
	HaveDelay     bool
	Target        time.Duration
	Reason        autorate.Reason // the last tick's decision
	Changed       autorate.Reason // the reason of the last rate change
	ChangedAgo    time.Duration   // how long ago (at the last tick)
	Queueing      bool
	LastSetErr    string
	LastSetErrAgo time.Duration
}

// ReflectorStatus is one probe slot.
type ReflectorStatus struct {
	Target   string // reflector.Target's String
	OneWay   bool
	Replied  bool
	Baseline [2]time.Duration // down, up (one-way); [0] the round trip otherwise
	Rise     [2]time.Duration
	Lost     int
	Replace  autorate.Why
}

// KindOf is the controller's kind of a reflector target: ICMP kinds share
// a fate (an ISP's ICMP policy), UDP kinds another.
func KindOf(k reflector.Kind) autorate.Kind {
	if k.UDP() {
		return autorate.KindUDP
	}
	return autorate.KindICMP
}

// New checks cfg and makes the loop; the controller starts at the base
// rates on the first Step.
func New(cfg Config) (*Loop, error) {
	if cfg.Prober == nil {
		return nil, errors.New("autorun: no prober")
	}
	if cfg.Shapers[autorate.Down] == nil && cfg.Shapers[autorate.Up] == nil {
		return nil, errors.New("autorun: neither direction is shaped")
	}
	if len(cfg.Targets) != len(cfg.Controller.Reflectors) {
		return nil, errors.New("autorun: " + strconv.Itoa(len(cfg.Targets)) + " targets for " + strconv.Itoa(len(cfg.Controller.Reflectors)) + " controller slots")
	}
	for i, t := range cfg.Targets {
		if KindOf(t.Kind) != cfg.Controller.Reflectors[i] {
			return nil, errors.New("autorun: slot " + strconv.Itoa(i) + ": target " + t.String() + " is not of the controller's kind " + cfg.Controller.Reflectors[i].String())
		}
	}
	if cfg.FallbackAfter == 0 {
		cfg.FallbackAfter = 10 * time.Second
	}
	if cfg.Logf == nil {
		cfg.Logf = func(string, ...any) {}
	}
	if cfg.BufferSize == 0 {
		cfg.BufferSize = 256
	}
	cfg.Controller = cfg.Controller.WithDefaults()
	if cfg.IdleTick == 0 {
		cfg.IdleTick = IdleTick
	}
	cfg.IdleTick = max(cfg.IdleTick, cfg.Controller.ProbeInterval)
	ctl, err := autorate.New(cfg.Controller)
	if err != nil {
		return nil, err
	}
	l := &Loop{cfg: cfg, ctl: ctl, buf: reflector.NewBuffer(cfg.BufferSize), asked: make([]bool, len(cfg.Targets)), stalledSince: -1,
		probeEvery: cfg.Controller.ProbeInterval, tick: cfg.Controller.ProbeInterval, idleC: make(chan struct{}, 1)}
	l.cfg.Targets = append([]reflector.Target(nil), cfg.Targets...)
	l.in.Samples = make([]autorate.Sample, 0, cfg.BufferSize)
	l.in.Waiting = make([]autorate.Waiting, 0, len(cfg.Targets))
	l.waitFn = func(i int, sent time.Time) {
		l.in.Waiting = append(l.in.Waiting, autorate.Waiting{Reflector: i, Sent: sent.Sub(l.origin)})
	}
	l.rs = make([]reflector.Sample, 0, cfg.BufferSize)
	l.status.Reflectors = make([]ReflectorStatus, len(cfg.Targets))
	for d := range l.status.Dir {
		dc := &cfg.Controller.Dir[d]
		// The tree was built at the base rate: that is what runs.
		l.status.Dir[d] = DirStatus{Shaped: cfg.Shapers[d] != nil, RateBits: dc.Base, BaseBits: dc.Base, MinBits: dc.Min, MaxBits: dc.Max, Target: dc.Target}
	}
	return l, nil
}

// Emit is the prober's emit function: it buffers the sample until the
// next Step.
func (l *Loop) Emit(s *reflector.Sample) { l.buf.Add(s) }

// IdleChanged receives (at most one pending) when a Step finds the
// controller's idleness changed: a status writer that writes rarely while
// idle writes then, rather than show the link idle for its interval
// after load came back.
func (l *Loop) IdleChanged() <-chan struct{} { return l.idleC }

// Interval is how often Step should run now: the controller's probe
// interval, or Config.IdleTick while the controller says the link is idle.
// It changes only in Step.
func (l *Loop) Interval() time.Duration { return l.tick }

// Step runs one tick at now (a monotonic time since the loop's origin,
// the clock the samples' Sent times are converted to by origin): the
// samples since the last tick and the shapers' counters go to the
// controller, and a changed rate to the shaper.
func (l *Loop) Step(now time.Duration, origin time.Time) {
	defer func() { l.lastStep = now }()
	var dropped uint64
	l.rs, dropped = l.buf.Drain(l.rs[:0])
	l.in.Samples = l.in.Samples[:0]
	replied := false
	for i := range l.rs {
		s := &l.rs[i]
		as := autorate.Sample{Reflector: s.Target, Lost: s.Lost}
		if !s.Sent.IsZero() {
			as.Sent = s.Sent.Sub(origin)
		}
		if !s.Lost {
			replied = true
			as.OneWay, as.Down, as.Up, as.RTT = s.OneWay, s.Down, s.Up, s.RTT
		}
		l.in.Samples = append(l.in.Samples, as)
	}
	l.in.Waiting, l.origin = l.in.Waiting[:0], origin
	l.cfg.Prober.Waiting(l.waitFn)
	var readErr [2]error
	for d, sh := range l.cfg.Shapers {
		if sh != nil {
			readErr[d] = sh.Read(&l.in.Shaper[d])
		}
	}

	// No reply for FallbackAfter: base rates and a fresh controller when
	// replies come back (its idea of the link is stale by then).
	if replied {
		l.stalledSince = -1
	} else if l.stalledSince < 0 {
		l.stalledSince = now
	}
	if l.fallback {
		if !replied {
			l.count(now, dropped)
			return
		}
		l.cfg.Logf("autorate %s: reflectors answer again; the controller starts over from the base rates", l.cfg.Name)
		l.ctl, _ = autorate.New(l.cfg.Controller) // validated in New
		l.fallback = false
		l.setStatus(func(s *Status) { s.Fallback, s.Err = false, "" })
	} else if after := max(l.cfg.FallbackAfter, 3*l.probeEvery); l.stalledSince >= 0 && now-l.stalledSince >= after {
		l.fallBack(now, "no reflector answered for "+after.String())
		l.count(now, dropped)
		return
	}

	out := l.ctl.Tick(now, &l.in)
	probeEvery := out.ProbeInterval
	if l.watch > 1 {
		probeEvery = l.cfg.Controller.ProbeInterval // a wake's watch (woke)
	}
	if probeEvery != l.probeEvery && probeEvery > 0 {
		// Idle for the controller's IdleAfter: probes slow to its idle
		// interval (the "stop probing when idle"), and come back
		// at once when it sees load in the shaper's counters.
		l.setProbeEvery(probeEvery)
	}
	l.tick = l.nextTick(now, out.ProbeIdle)
	changed := [2]bool{}
	var setErr [2]error
	var set [2]uint64
	for d := range out.Dir {
		o := &out.Dir[d]
		sh := l.cfg.Shapers[d]
		if sh == nil || !o.Changed {
			continue
		}
		got, err := sh.SetRate(o.Rate)
		if err != nil {
			setErr[d] = err
			// Once per distinct error: a tree removed under the loop
			// (sqm stop from the CLI) fails every change until the
			// daemon notices and stops the loop.
			if msg := err.Error(); msg != l.lastErr[d] {
				l.lastErr[d] = msg
				l.cfg.Logf("autorate %s: set %s rate %d bit/s: %v", l.cfg.Name, autorate.Dir(d), o.Rate, err)
			}
			continue
		}
		l.lastErr[d] = ""
		changed[d], set[d] = true, got
	}
	for _, r := range out.Replace {
		l.replace(r)
	}
	l.ctl.Status(&l.st)
	if l.cfg.Debugf != nil {
		for d := range changed {
			if cs := &l.st.Dir[d]; changed[d] {
				l.cfg.Debugf("autorate %s: %s %d bit/s (%v): delay %v (fresh %v) achieved %d load %.2f queueing %v slope %.3f cut-capacity %d failed %d",
					l.cfg.Name, autorate.Dir(d), set[d], cs.Reason, cs.Delay, cs.HaveDelay, cs.Achieved, cs.Load, cs.Queueing, cs.Slope, cs.CutCap, cs.Failed)
			}
		}
	}

	l.mu.Lock()
	defer l.mu.Unlock()
	s := &l.status
	s.Running = true
	if s.Idle != out.ProbeIdle {
		select {
		case l.idleC <- struct{}{}:
		default:
		}
		if l.cfg.Debugf != nil {
			l.cfg.Debugf("autorate %s: idle %v; ticks every %v, traffic wake-up armed %v", l.cfg.Name, out.ProbeIdle, l.tick, l.armed)
		}
	}
	s.Idle = out.ProbeIdle
	s.Ticks++
	s.Dropped += dropped
	for d := range s.Dir {
		ds, cs := &s.Dir[d], &l.st.Dir[d]
		if changed[d] && set[d] != ds.RateBits {
			ds.RateBits = set[d]
			s.RateChanges++
		}
		if setErr[d] != nil {
			s.SetErrors++
			ds.LastSetErr, ds.LastSetErrAgo = setErr[d].Error(), 0
		} else if readErr[d] != nil {
			ds.LastSetErr, ds.LastSetErrAgo = "read counters: "+readErr[d].Error(), 0
		} else if ds.LastSetErr != "" {
			ds.LastSetErrAgo += now - l.lastStep
		}
		ds.AchievedBits, ds.Load, ds.Delay, ds.HaveDelay = cs.Achieved, cs.Load, cs.Delay, cs.HaveDelay
		ds.Reason, ds.Changed, ds.ChangedAgo, ds.Queueing = cs.Reason, cs.Changed, now-cs.ChangedAt, cs.Queueing
		if r := cs.Reason; r < MaxReasons {
			s.Decisions[d][r]++
		}
	}
	for i := range l.st.Reflectors {
		if i >= len(s.Reflectors) {
			break
		}
		r := &l.st.Reflectors[i]
		s.Reflectors[i] = ReflectorStatus{Target: l.cfg.Targets[i].String(), OneWay: r.OneWay, Replied: r.Replied,
			Baseline: r.Baseline, Rise: r.Rise, Lost: r.Lost, Replace: r.Replace}
	}
}

// nextTick says how long until the next Step, and arms or disarms the
// Waker. The loop slows with the probes while the controller says idle:
// an idle tick has nothing to decide but whether load is back. With a
// Waker armed, a load's first packet says so sooner than any tick, and
// the tick slows further; a wake is followed by WatchTicks fast ticks,
// and when they find no load, the Waker is armed again after a backoff
// (a link with light traffic in large packets would wake it at each).
func (l *Loop) nextTick(now time.Duration, idle bool) time.Duration {
	fast := l.cfg.Controller.ProbeInterval
	w := l.cfg.Waker
	if !idle {
		l.watch, l.backoff, l.rearmAt = 0, 0, 0
		if l.armed {
			l.armed = false
			if err := w.Disarm(); err != nil {
				l.wakerFailed(err)
			}
		}
		return fast
	}
	if l.watch > 0 {
		if l.watch--; l.watch > 0 {
			return fast
		}
		l.backoff = min(max(2*l.backoff, MinRearm), MaxRearm)
		l.rearmAt = now + l.backoff
	}
	if w != nil && !l.armed && now >= l.rearmAt {
		if err := w.Arm(); err != nil {
			l.wakerFailed(err)
		} else {
			l.armed = true
		}
	}
	if l.armed {
		return max(ArmedIdleTick, l.cfg.IdleTick)
	}
	return l.cfg.IdleTick
}

// woke is the Waker's wake: it disarmed itself, and the next WatchTicks
// ticks (the first at once) look for the load.
func (l *Loop) woke() {
	if !l.armed {
		return // disarmed since (the wake raced a Step that saw load)
	}
	l.armed = false
	l.watch = WatchTicks + 1 // the Step at the wake counts one
	// Probes at the full rate from the wake's own poll: when the next
	// tick sees the load, its first cut is sized on replies that crossed
	// the queue, not a tick later (in the VM the wake's first cut came
	// at 110 ms of queue without this).
	l.setProbeEvery(l.cfg.Controller.ProbeInterval)
	if l.cfg.Debugf != nil {
		l.cfg.Debugf("autorate %s: traffic woke the idle loop", l.cfg.Name)
	}
}

func (l *Loop) setProbeEvery(d time.Duration) {
	l.probeEvery = d
	l.cfg.Prober.SetInterval(d)
}

// wakerFailed logs why the Waker stopped; the loop goes on without it,
// at IdleTick.
func (l *Loop) wakerFailed(err error) {
	l.cfg.Logf("autorate %s: traffic wake-up: %v; an idle link is checked every %v instead", l.cfg.Name, err, l.cfg.IdleTick)
	l.cfg.Waker, l.armed = nil, false
}

func (l *Loop) count(now time.Duration, dropped uint64) {
	l.mu.Lock()
	l.status.Ticks++
	l.status.Dropped += dropped
	l.mu.Unlock()
}

// fallBack puts both directions at their base rate.
func (l *Loop) fallBack(now time.Duration, why string) {
	l.fallback = true
	errs := l.base()
	msg := why + "; shaping at the base rates"
	if len(errs) > 0 {
		msg += " (failed: " + errs[0] + ")"
	}
	l.cfg.Logf("autorate %s: %s", l.cfg.Name, msg)
	l.setStatus(func(s *Status) { s.Fallback, s.Err = true, msg })
}

// base sets both directions' base rates; it returns what failed.
func (l *Loop) base() []string {
	var errs []string
	for d, sh := range l.cfg.Shapers {
		if sh == nil {
			continue
		}
		got, err := sh.SetRate(l.cfg.Controller.Dir[d].Base)
		if err != nil {
			errs = append(errs, err.Error())
			continue
		}
		l.mu.Lock()
		l.status.Dir[d].RateBits = got
		l.mu.Unlock()
	}
	return errs
}

// replace refills a slot the controller gave up on from the spares (of
// the same controller kind), round robin; without one it logs once and
// leaves the slot as it is.
func (l *Loop) replace(r autorate.Replacement) {
	if r.Slot < 0 || r.Slot >= len(l.cfg.Targets) {
		return
	}
	old := l.cfg.Targets[r.Slot]
	for n := 0; n < len(l.cfg.Spares); n++ {
		i := (l.spare + n) % len(l.cfg.Spares)
		t := l.cfg.Spares[i]
		if KindOf(t.Kind) != KindOf(old.Kind) {
			continue
		}
		if err := l.cfg.Prober.Replace(r.Slot, t); err != nil {
			continue // another slot probes it, or no socket for it
		}
		l.spare = i + 1
		l.cfg.Spares[i] = old // the old one may be fine again later
		l.cfg.Targets[r.Slot] = t
		l.ctl.Replace(r.Slot, KindOf(t.Kind))
		l.asked[r.Slot] = false
		l.cfg.Logf("autorate %s: reflector %v replaced by %v (%v)", l.cfg.Name, old, t, r.Why)
		return
	}
	if !l.asked[r.Slot] {
		l.asked[r.Slot] = true
		l.cfg.Logf("autorate %s: reflector %v %v; no spare reflector to replace it", l.cfg.Name, old, r.Why)
	}
}

func (l *Loop) setStatus(f func(*Status)) {
	l.mu.Lock()
	f(&l.status)
	l.mu.Unlock()
}

// Status copies the loop's status into st (reusing st.Reflectors).
func (l *Loop) Status(st *Status) {
	l.mu.Lock()
	defer l.mu.Unlock()
	refl := append(st.Reflectors[:0], l.status.Reflectors...)
	*st = l.status
	st.Reflectors = refl
}

// Run ticks the loop every Interval until ctx ends, polling the prober
// before each tick's Step (so that the replies read reach the controller
// in the same tick), then puts the base rates back (the tree as it was
// applied). A prober that fails puts the rates back at their bases and
// ends Run with its error: the queue stays shaped.
//
// One poll a tick means a probe sent at a tick is acted on at the next,
// 70-85 ms after it crossed the queue. A second poll half a tick before
// each Step, sending the probes there, was tried and measured (five runs
// each of the step trace in the VM): download p95 40.1 ms against 39.5,
// and 24 % more CPU (docs/autorate.md, "CPU: the prober on the loop's
// tick").
func (l *Loop) Run(ctx context.Context) error {
	origin := time.Now()
	every := l.Interval()
	tk := time.NewTicker(every)
	defer tk.Stop()
	poll := func() error { return l.cfg.Prober.Poll(l.Emit) }
	var wakeC <-chan struct{}
	if l.cfg.Waker != nil {
		wakeC = l.cfg.Waker.C()
		defer func() {
			if l.armed {
				l.cfg.Waker.Disarm()
			}
		}()
	}
	perr := poll() // the first probes go out now, not a tick from now
	for perr == nil {
		select {
		case <-ctx.Done():
			l.base() // stopped: leave the tree as it was applied
			l.setStatus(func(s *Status) { s.Running = false })
			return nil
		case <-tk.C:
		case <-wakeC:
			// The first fast tick is an interval after this Step, not
			// whatever the idle ticker had left.
			l.woke()
			every = 0
		}
		if perr = poll(); perr != nil {
			break
		}
		l.Step(time.Since(origin), origin)
		if d := l.Interval(); d != every {
			every = d
			tk.Reset(d)
		}
	}
	l.fallBack(time.Since(origin), "probes failed: "+perr.Error())
	l.setStatus(func(s *Status) { s.Running = false })
	return errors.New("autorate " + l.cfg.Name + ": " + perr.Error())
}
