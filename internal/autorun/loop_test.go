package autorun

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"sqm/internal/autorate"
	"sqm/internal/reflector"
)

// fakeShaper is a direction that sends at whatever rate it is set to (a
// full shaper with a queue) until told otherwise.
type fakeShaper struct {
	mu      sync.Mutex
	rate    uint64
	sets    []uint64
	bytes   float64
	last    time.Duration
	now     *time.Duration
	load    float64 // fraction of the rate sent
	failSet error
	onRead  func() // called on each Read, unlocked
}

func (f *fakeShaper) Read(sh *autorate.Shaper) error {
	if f.onRead != nil {
		f.onRead()
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	dt := *f.now - f.last
	f.last = *f.now
	f.bytes += float64(f.rate) * f.load * dt.Seconds() / 8
	*sh = autorate.Shaper{Bytes: uint64(f.bytes), HaveQueue: true, Backlog: 3000}
	return nil
}

func (f *fakeShaper) SetRate(bits uint64) (uint64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.failSet != nil {
		return f.rate, f.failSet
	}
	f.rate = bits / 1000 * 1000
	f.sets = append(f.sets, f.rate)
	return f.rate, nil
}

type fakeProber struct {
	mu        sync.Mutex
	replaced  map[int]reflector.Target
	pollErr   error
	polls     int                                // Poll's calls
	onPoll    func(emit func(*reflector.Sample)) // if set, each Poll calls it
	intervals []time.Duration                    // SetInterval's, in order
	waiting   map[int]time.Time                  // Waiting's: target, its oldest probe's send time
}

func (p *fakeProber) Poll(emit func(*reflector.Sample)) error {
	p.mu.Lock()
	p.polls++
	p.mu.Unlock()
	if p.pollErr != nil {
		return p.pollErr
	}
	if p.onPoll != nil {
		p.onPoll(emit)
	}
	return nil
}

func (p *fakeProber) Waiting(fn func(int, time.Time)) {
	p.mu.Lock()
	w := p.waiting
	p.mu.Unlock()
	for i, sent := range w {
		fn(i, sent)
	}
}

func (p *fakeProber) SetInterval(d time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.intervals = append(p.intervals, d)
}

func (p *fakeProber) given() []time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]time.Duration(nil), p.intervals...)
}

func (p *fakeProber) Replace(i int, t reflector.Target) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.replaced == nil {
		p.replaced = map[int]reflector.Target{}
	}
	p.replaced[i] = t
	return nil
}

func target(s string) reflector.Target {
	t, err := reflector.ParseTarget(s)
	if err != nil {
		panic(err)
	}
	return t
}

type rig struct {
	t       *testing.T
	now     time.Duration
	origin  time.Time
	down    *fakeShaper
	up      *fakeShaper
	prober  *fakeProber
	loop    *Loop
	logs    []string
	seq     uint32
	targets []reflector.Target
}

func newRig(t *testing.T, upShaped bool, spares ...reflector.Target) *rig {
	r := &rig{t: t, origin: time.Now(), prober: &fakeProber{}}
	r.down = &fakeShaper{now: &r.now, load: 1}
	r.up = &fakeShaper{now: &r.now, load: 0.05}
	r.targets = []reflector.Target{target("sqm://10.0.0.1"), target("sqm://10.0.0.2")}
	cfg := Config{
		Name: "wan",
		Controller: autorate.DefaultConfig(
			autorate.DirConfig{Min: 2e6, Base: 40e6, Max: 80e6},
			autorate.DirConfig{Min: 1e6, Base: 10e6, Max: 20e6},
			[]autorate.Kind{autorate.KindUDP, autorate.KindUDP}),
		Prober:        r.prober,
		Targets:       r.targets,
		Spares:        spares,
		FallbackAfter: 5 * time.Second,
		Logf:          func(f string, a ...any) { r.logs = append(r.logs, f) },
	}
	cfg.Shapers[autorate.Down] = r.down
	if upShaped {
		cfg.Shapers[autorate.Up] = r.up
	}
	l, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	r.loop = l
	return r
}

// tick advances 100 ms: each slot in replying sends one probe 100 ms ago
// whose one-way down delay is 10 ms + rise (up 5 ms), the others are
// reported lost (as the prober does after its timeout), except while none
// replies: a stall, where the losses come only after the timeout.
func (r *rig) tick(rise time.Duration, replying ...int) {
	r.now += 100 * time.Millisecond
	for i := range r.targets {
		if len(replying) > 0 && !slices.Contains(replying, i) {
			r.seq++
			s := reflector.Sample{Target: i, Addr: r.targets[i].Addr, Kind: r.targets[i].Kind, Seq: r.seq, Lost: true}
			r.loop.Emit(&s)
		}
	}
	for _, i := range replying {
		r.seq++
		s := reflector.Sample{Target: i, Addr: r.targets[i].Addr, Kind: r.targets[i].Kind, Seq: r.seq,
			Sent: r.origin.Add(r.now - 100*time.Millisecond), OneWay: true, Down: 10*time.Millisecond + rise, Up: 5 * time.Millisecond}
		r.loop.Emit(&s)
	}
	r.loop.Step(r.now, r.origin)
}

func (r *rig) status() Status {
	var st Status
	r.loop.Status(&st)
	return st
}

// The first tick sets the base rates; a flat delay under full load
// probes up; a delay well over target cuts, with reason delay, and each
// change reaches the shaper once.
func TestStepFollowsTheController(t *testing.T) {
	r := newRig(t, true)
	r.tick(0, 0, 1)
	if len(r.down.sets) != 1 || r.down.sets[0] != 40e6 || len(r.up.sets) != 1 || r.up.sets[0] != 10e6 {
		t.Fatalf("first tick set down %v, up %v; want the base rates 40e6, 10e6", r.down.sets, r.up.sets)
	}
	for range 30 {
		r.tick(0, 0, 1)
	}
	st := r.status()
	if r.down.rate <= 40e6 || st.Dir[autorate.Down].RateBits != r.down.rate {
		t.Fatalf("after 3 s fully loaded with a flat delay: down rate %d (status %d), want above the base 40e6", r.down.rate, st.Dir[0].RateBits)
	}
	if r.up.rate != 10e6 {
		t.Errorf("the lightly loaded upload moved to %d", r.up.rate)
	}
	before := r.down.rate
	for range 5 {
		r.tick(60*time.Millisecond, 0, 1)
	}
	st = r.status()
	if r.down.rate >= before {
		t.Fatalf("a 60 ms rise left the download at %d (was %d)", r.down.rate, before)
	}
	if c := st.Dir[autorate.Down].Changed; c != autorate.ReasonDelay && c != autorate.ReasonBottleneckBelow {
		t.Errorf("last change's reason %v, want delay", c)
	}
	if st.RateChanges != uint64(len(r.down.sets)+len(r.up.sets)-2) {
		t.Errorf("status counts %d rate changes, the shapers saw %d besides the two starts at base", st.RateChanges, len(r.down.sets)+len(r.up.sets)-2)
	}
	for i := 1; i < len(r.down.sets); i++ {
		if r.down.sets[i] == r.down.sets[i-1] {
			t.Errorf("rate %d set twice in a row", r.down.sets[i])
		}
	}
	var n uint64
	for _, c := range st.Decisions[autorate.Down] {
		n += c
	}
	if n != st.Ticks || st.Ticks != 36 {
		t.Errorf("%d decisions counted over %d ticks, want one per tick (36)", n, st.Ticks)
	}
	if !st.Dir[0].HaveDelay || st.Dir[0].Delay < 40*time.Millisecond {
		t.Errorf("status delay %v (have %v), want the 60 ms rise", st.Dir[0].Delay, st.Dir[0].HaveDelay)
	}
	if len(st.Reflectors) != 2 || st.Reflectors[0].Target != "udp-sqm 10.0.0.1:12866" || !st.Reflectors[0].OneWay {
		t.Errorf("reflectors %+v", st.Reflectors)
	}
}

// An unshaped direction is never set.
func TestUnshapedDirection(t *testing.T) {
	r := newRig(t, false)
	for range 20 {
		r.tick(0, 0, 1)
	}
	if len(r.up.sets) != 0 {
		t.Errorf("unshaped upload set to %v", r.up.sets)
	}
	if st := r.status(); st.Dir[autorate.Up].Shaped || !st.Dir[autorate.Down].Shaped {
		t.Errorf("shaped flags %v %v", st.Dir[0].Shaped, st.Dir[1].Shaped)
	}
}

// No reply for FallbackAfter: base rates, said in the status; replies
// again: a fresh controller, from the base.
func TestFallbackToBase(t *testing.T) {
	r := newRig(t, true)
	for range 40 {
		r.tick(0, 0, 1)
	}
	if r.down.rate <= 40e6 {
		t.Fatalf("download did not probe up (%d): the test needs it above base", r.down.rate)
	}
	for range 49 {
		r.tick(0)
	}
	if st := r.status(); st.Fallback || r.down.rate == 40e6 {
		t.Fatalf("fell back after 4.9 s of silence (rate %d, status %+v); FallbackAfter is 5 s, and the controller holds through stalls", r.down.rate, st.Fallback)
	}
	r.tick(0)
	r.tick(0)
	st := r.status()
	if !st.Fallback || r.down.rate != 40e6 || r.up.rate != 10e6 || !strings.Contains(st.Err, "no reflector answered") {
		t.Fatalf("after 5 s without replies: down %d up %d, fallback %v %q; want the base rates and the reason", r.down.rate, r.up.rate, st.Fallback, st.Err)
	}
	if st.Dir[0].RateBits != 40e6 {
		t.Errorf("status rate %d", st.Dir[0].RateBits)
	}
	n := len(r.down.sets)
	for range 20 {
		r.tick(0)
	}
	if len(r.down.sets) != n {
		t.Errorf("rates set while in fallback: %v", r.down.sets[n:])
	}
	r.tick(0, 0, 1)
	st = r.status()
	if st.Fallback || st.Err != "" {
		t.Errorf("replies again, still in fallback: %+v", st.Err)
	}
	for range 30 {
		r.tick(0, 0, 1)
	}
	if r.down.rate <= 40e6 {
		t.Errorf("the fresh controller did not take over: down %d", r.down.rate)
	}
}

// A slot that stops answering while the other answers is refilled from
// the spares; without spares it is logged once.
func TestReplaceFromSpares(t *testing.T) {
	spare := target("sqm://10.0.0.9")
	r := newRig(t, true, target("icmp://10.0.0.8"), spare)
	for range 10 {
		r.tick(0, 0, 1)
	}
	for range 60 {
		r.tick(0, 0) // slot 1 silent
		if len(r.prober.replaced) > 0 {
			break
		}
	}
	got, ok := r.prober.replaced[1]
	if !ok || got.String() != spare.String() {
		t.Fatalf("replacements %v, want slot 1 -> %v (the UDP spare, not the ICMP one)", r.prober.replaced, spare)
	}
	if r.loop.cfg.Targets[1].String() != spare.String() || r.loop.cfg.Spares[1].String() != r.targets[1].String() {
		t.Errorf("targets %v spares %v after the swap", r.loop.cfg.Targets, r.loop.cfg.Spares)
	}

	r2 := newRig(t, true)
	for range 10 {
		r2.tick(0, 0, 1)
	}
	for range 60 {
		r2.tick(0, 0)
	}
	n := 0
	for _, l := range r2.logs {
		if strings.Contains(l, "no spare") {
			n++
		}
	}
	if n != 1 || len(r2.prober.replaced) != 0 {
		t.Errorf("without spares: %d log lines about it, %d replacements; want 1, 0", n, len(r2.prober.replaced))
	}
}

// A rate the kernel refuses is counted and shown, and the status keeps
// the rate that runs.
func TestSetRateError(t *testing.T) {
	r := newRig(t, true)
	r.tick(0, 0, 1)
	r.down.failSet = errors.New("netlink: no such device")
	for range 30 {
		r.tick(0, 0, 1)
	}
	st := r.status()
	if st.SetErrors == 0 || !strings.Contains(st.Dir[0].LastSetErr, "no such device") {
		t.Errorf("set errors %d, last %q", st.SetErrors, st.Dir[0].LastSetErr)
	}
	if st.Dir[0].RateBits != 40e6 {
		t.Errorf("status rate %d, want the 40e6 that runs", st.Dir[0].RateBits)
	}
	n := 0
	for _, l := range r.logs {
		if strings.Contains(l, "set %s rate") {
			n++
		}
	}
	if n != 1 || st.SetErrors < 2 {
		t.Errorf("%d refused changes logged %d times; want once", st.SetErrors, n)
	}
}

// Probes that fail put the base rates back and end Run with the error.
func TestRunProbesFail(t *testing.T) {
	r := newRig(t, true)
	r.loop.cfg.Prober = &fakeProber{pollErr: errors.New("reflector: prober closed")}
	r.down.now, r.up.now = new(time.Duration), new(time.Duration)
	r.down.rate = 55e6
	err := r.loop.Run(context.Background())
	if err == nil || !strings.Contains(err.Error(), "prober closed") {
		t.Fatalf("Run: %v", err)
	}
	st := r.status()
	if !st.Fallback || r.down.rate != 40e6 || r.up.rate != 10e6 || st.Running {
		t.Errorf("after the probes failed: down %d up %d, status %+v", r.down.rate, r.up.rate, st)
	}
}

// Run ticks until ctx ends and puts the base rates back. It polls the
// prober once before the first tick and once at each, before the tick's
// Step, so that the replies read reach the controller in the same tick.
func TestRunTicks(t *testing.T) {
	r := newRig(t, true)
	clock := new(time.Duration)
	r.down.now, r.up.now = clock, clock
	// The first tick's poll returns a reply; the second tick's poll
	// looks at what the first tick's Step made of it.
	var seen *Status
	r.prober.onPoll = func(emit func(*reflector.Sample)) {
		switch r.prober.polls {
		case 2:
			emit(&reflector.Sample{Target: 0, Sent: time.Now().Add(-20 * time.Millisecond), RTT: 20 * time.Millisecond})
		case 3:
			st := r.status()
			seen = &st
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 350*time.Millisecond)
	defer cancel()
	if err := r.loop.Run(ctx); err != nil {
		t.Fatal(err)
	}
	st := r.status()
	if st.Ticks < 2 || st.Running {
		t.Errorf("ticks %d running %v", st.Ticks, st.Running)
	}
	if polls := r.prober.polls; polls != int(st.Ticks)+1 {
		t.Errorf("%d polls for %d ticks, want one before the first tick and one at each", polls, st.Ticks)
	}
	if seen == nil || seen.Ticks != 1 || !seen.Reflectors[0].Replied {
		t.Errorf("after the first tick: %+v, want its poll's reply seen by its Step", seen)
	}
	if len(r.down.sets) != 2 || r.down.sets[0] != 40e6 || r.down.sets[1] != 40e6 {
		t.Errorf("download set %v, want the base at the start and again at the end", r.down.sets)
	}
}

func TestNewChecks(t *testing.T) {
	ctl := autorate.DefaultConfig(autorate.DirConfig{Min: 1e6, Base: 2e6, Max: 4e6}, autorate.DirConfig{Min: 1e6, Base: 2e6, Max: 4e6}, []autorate.Kind{autorate.KindICMP})
	sh := [2]Shaper{&fakeShaper{now: new(time.Duration)}, nil}
	for _, c := range []struct {
		cfg  Config
		want string
	}{
		{Config{Controller: ctl, Shapers: sh, Targets: []reflector.Target{target("1.1.1.1")}}, "no prober"},
		{Config{Controller: ctl, Prober: &fakeProber{}, Targets: []reflector.Target{target("1.1.1.1")}}, "neither direction"},
		{Config{Controller: ctl, Shapers: sh, Prober: &fakeProber{}}, "0 targets for 1"},
		{Config{Controller: ctl, Shapers: sh, Prober: &fakeProber{}, Targets: []reflector.Target{target("dns://1.1.1.1")}}, "not of the controller's kind icmp"},
	} {
		_, err := New(c.cfg)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("New: %v, want %q", err, c.want)
		}
	}
}

// TestIdleSlowsProbes: once both directions have been idle for the
// controller's IdleAfter the prober is told to probe at the idle interval,
// once; load in the shaper's counters brings it back to the probe
// interval at the next tick.
func TestIdleSlowsProbes(t *testing.T) {
	r := newRig(t, true)
	r.down.load, r.up.load = 0, 0
	cfg := autorate.Config{}.WithDefaults()
	for range int(cfg.IdleAfter/(100*time.Millisecond)) + 20 {
		r.tick(0, 0, 1)
	}
	got := r.prober.given()
	if len(got) != 1 || got[0] != cfg.IdleProbeInterval {
		t.Fatalf("after %v idle the prober was given %v, want [%v] (once)", cfg.IdleAfter+2*time.Second, got, cfg.IdleProbeInterval)
	}
	r.down.load = 1
	for range 3 {
		r.tick(0, 0, 1)
	}
	got = r.prober.given()
	if len(got) != 2 || got[1] != ProbeInterval {
		t.Errorf("with load back the prober was given %v, want the idle interval then %v", got, ProbeInterval)
	}
}

// TestIdleRareRepliesNoFallback: an idle link's probes go out every
// IdleProbeInterval (10 s), so its replies come that far apart; that is
// not silence, and the loop must not fall back (FallbackAfter here is
// 5 s) while they keep coming. A minute of it, then a real silence of
// three idle intervals does fall back.
func TestIdleRareRepliesNoFallback(t *testing.T) {
	r := newRig(t, true)
	r.down.load, r.up.load = 0, 0
	cfg := autorate.Config{}.WithDefaults()
	for r.loop.Interval() == ProbeInterval && r.now < time.Minute {
		r.tick(0, 0, 1)
	}
	every := int(cfg.IdleProbeInterval / (100 * time.Millisecond))
	for i := 1; i <= 6*every; i++ {
		if i%every == 0 {
			r.tick(0, 0, 1)
		} else {
			r.tick(0)
		}
		if st := r.status(); st.Fallback {
			t.Fatalf("fell back %v into idle with a reply every %v: %s", time.Duration(i)*100*time.Millisecond, cfg.IdleProbeInterval, st.Err)
		}
	}
	for range 3*every + 1 {
		r.tick(0)
	}
	if st := r.status(); !st.Fallback {
		t.Errorf("no reply for %v of idle and no fallback", 3*cfg.IdleProbeInterval)
	}
}

// TestIdleSlowsTicks: the loop ticks at IdleTick while the controller
// says idle (from the start on a quiet link after a second of probes,
// later after IdleAfter without load), and at the probe interval again
// from the tick that sees load.
func TestIdleSlowsTicks(t *testing.T) {
	r := newRig(t, true)
	r.down.load, r.up.load = 0, 0
	if d := r.loop.Interval(); d != ProbeInterval {
		t.Fatalf("interval at the start %v, want %v", d, ProbeInterval)
	}
	cfg := autorate.Config{}.WithDefaults()
	// told: IdleChanged has said so once, and the status agrees
	told := func(idle bool) {
		t.Helper()
		select {
		case <-r.loop.IdleChanged():
		default:
			t.Fatalf("idle %v: IdleChanged did not say", idle)
		}
		select {
		case <-r.loop.IdleChanged():
			t.Fatalf("idle %v: IdleChanged said twice", idle)
		default:
		}
		if st := r.status(); st.Idle != idle {
			t.Fatalf("status idle %v, want %v", st.Idle, idle)
		}
	}
	idleFor := func(want time.Duration) {
		t.Helper()
		from := r.now
		for r.loop.Interval() == ProbeInterval && r.now-from < 2*cfg.IdleAfter {
			r.tick(0, 0, 1)
		}
		if d, took := r.loop.Interval(), r.now-from; d != IdleTick || took < want || took > want+300*time.Millisecond {
			t.Fatalf("interval %v after %v without load, want %v once idle for %v", d, took, IdleTick, want)
		}
		told(true)
	}
	loaded := func() {
		t.Helper()
		r.down.load = 1
		for range 5 {
			r.tick(0, 0, 1)
			if r.loop.Interval() == ProbeInterval {
				break
			}
		}
		if d := r.loop.Interval(); d != ProbeInterval {
			t.Fatalf("interval %v with load back, want %v", d, ProbeInterval)
		}
		told(false)
	}
	idleFor(10 * ProbeInterval) // from the start: ten probes each
	loaded()
	r.down.load = 0
	idleFor(cfg.IdleAfter)
	loaded()
}

// newIdleRunRig is a rig for Run in real time: the shapers' clock stands
// still (no load), and the controller idles after 200 ms.
// TestStepWaiting: Step gives the controller the prober's probes in
// flight, on the controller's clock.
func TestStepWaiting(t *testing.T) {
	r := newRig(t, false)
	r.tick(0, 0, 1)
	r.prober.mu.Lock()
	r.prober.waiting = map[int]time.Time{1: r.origin.Add(r.now - 30*time.Millisecond)}
	r.prober.mu.Unlock()
	r.tick(0, 0)
	if w := r.loop.in.Waiting; len(w) != 1 || w[0].Reflector != 1 || w[0].Sent != r.now-130*time.Millisecond {
		t.Fatalf("the controller's input had waiting %+v, want reflector 1's probe sent at %v", w, r.now-130*time.Millisecond)
	}
}

func newIdleRunRig(t *testing.T) *rig {
	r := newRig(t, true)
	clock := new(time.Duration)
	r.down.now, r.up.now = clock, clock
	r.down.load, r.up.load = 0, 0
	r.loop.cfg.Controller.IdleAfter = 200 * time.Millisecond
	r.loop.ctl, _ = autorate.New(r.loop.cfg.Controller)
	return r
}

// TestRunIdleTicks: Run follows Interval. With the controller idle after
// 200 ms and a 1 s idle tick, a 2.5 s run has a handful of ticks; at the
// probe interval throughout it would have about 25. A bound on how many
// ticks real time allows, so a slow machine only makes fewer.
func TestRunIdleTicks(t *testing.T) {
	r := newIdleRunRig(t)
	r.loop.cfg.IdleTick = time.Second
	ctx, cancel := context.WithTimeout(context.Background(), 2500*time.Millisecond)
	defer cancel()
	if err := r.loop.Run(ctx); err != nil {
		t.Fatal(err)
	}
	if st := r.status(); st.Ticks < 3 || st.Ticks > 10 {
		t.Errorf("%d ticks in 2.5 s, want 3-10: idle after 0.2 s at 0.1 s ticks, then one a second", st.Ticks)
	}
}

// fakeWaker counts Arm and Disarm; fire wakes an armed one, as
// trafficwake.Waker does (once, disarming).
type fakeWaker struct {
	mu            sync.Mutex
	armed         bool
	arms, disarms int
	armErr        error
	c             chan struct{}
}

func newFakeWaker() *fakeWaker { return &fakeWaker{c: make(chan struct{}, 1)} }

func (w *fakeWaker) Arm() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.armErr != nil {
		return w.armErr
	}
	w.armed = true
	w.arms++
	return nil
}

func (w *fakeWaker) Disarm() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.armed = false
	w.disarms++
	return nil
}

func (w *fakeWaker) C() <-chan struct{} { return w.c }

func (w *fakeWaker) fire() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.armed {
		return false
	}
	w.armed = false
	w.c <- struct{}{}
	return true
}

func (w *fakeWaker) counts() (arms, disarms int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.arms, w.disarms
}

// TestWakerIdle: an idle loop arms its Waker and ticks at ArmedIdleTick;
// a wake brings WatchTicks ticks at the probe interval; when they find no
// load the Waker is armed again after MinRearm, then after twice that,
// and the loop ticks at IdleTick while it waits; when they find load the
// loop runs as loaded, and the next idle arms at once. An Arm that fails
// is logged and the loop goes on at IdleTick. The watch probes at the
// probe interval.
func TestWakerIdle(t *testing.T) {
	r := newRig(t, true)
	w := newFakeWaker()
	r.loop.cfg.Waker = w
	r.down.load, r.up.load = 0, 0
	for r.loop.Interval() == ProbeInterval && r.now < time.Minute {
		r.tick(0, 0, 1)
	}
	if d, arms := r.loop.Interval(), w.arms; d != ArmedIdleTick || arms != 1 {
		t.Fatalf("idle at %v: interval %v, %d arms; want %v and 1", r.now, d, arms, ArmedIdleTick)
	}
	// wake: a stray packet, no load. What Run does: woke, then a Step.
	wake := func() {
		t.Helper()
		if !w.fire() {
			t.Fatal("waker not armed at the wake")
		}
		<-w.C()
		r.loop.woke()
		if g := r.prober.given(); len(g) == 0 || g[len(g)-1] != ProbeInterval {
			t.Fatalf("at the wake the prober was given %v, want %v last (the wake's poll probes)", g, ProbeInterval)
		}
	}
	idleProbes := autorate.Config{}.WithDefaults().IdleProbeInterval
	watch := func(wantBackoff time.Duration) {
		t.Helper()
		wake()
		for i := range WatchTicks {
			r.tick(0, 0, 1)
			if d := r.loop.Interval(); d != ProbeInterval {
				t.Fatalf("watch tick %d: interval %v, want %v", i, d, ProbeInterval)
			}
		}
		r.tick(0, 0, 1)
		if g := r.prober.given(); g[len(g)-1] != idleProbes {
			t.Fatalf("after the watch the prober was given %v, want %v last", g, idleProbes)
		}
		from := r.now
		for r.loop.Interval() != ArmedIdleTick && r.now-from < 20*time.Second {
			if d := r.loop.Interval(); d != IdleTick {
				t.Fatalf("waiting to re-arm: interval %v, want %v", d, IdleTick)
			}
			r.tick(0, 0, 1)
		}
		if took := r.now - from + 100*time.Millisecond; took < wantBackoff || took > wantBackoff+200*time.Millisecond {
			t.Fatalf("re-armed %v after the watch, want %v", took, wantBackoff)
		}
	}
	watch(MinRearm)
	watch(2 * MinRearm)
	// a wake at a load's start: the controller leaves idle, the waker
	// stays disarmed until the next idle, which arms at once.
	wake()
	r.down.load = 1
	r.tick(0, 0, 1)
	r.tick(0, 0, 1)
	if d := r.loop.Interval(); d != ProbeInterval || r.status().Idle {
		t.Fatalf("load after a wake: interval %v, idle %v; want %v, not idle", d, r.status().Idle, ProbeInterval)
	}
	armsBefore, _ := w.counts()
	r.down.load = 0
	for r.loop.Interval() == ProbeInterval {
		r.tick(0, 0, 1)
	}
	if arms, _ := w.counts(); r.loop.Interval() != ArmedIdleTick || arms != armsBefore+1 {
		t.Fatalf("idle again: interval %v, arms %d (were %d); want %v, armed at once", r.loop.Interval(), arms, armsBefore, ArmedIdleTick)
	}
	// load seen by a tick while armed: disarmed.
	r.down.load = 1
	r.tick(0, 0, 1)
	if _, disarms := w.counts(); disarms != 1 || w.armed {
		t.Fatalf("load while armed: %d disarms, armed %v; want 1, disarmed", disarms, w.armed)
	}
	// an Arm that fails: logged, IdleTick from then on.
	w.armErr = errors.New("no CAP_NET_RAW")
	r.down.load = 0
	for r.loop.Interval() == ProbeInterval {
		r.tick(0, 0, 1)
	}
	if d := r.loop.Interval(); d != IdleTick || r.loop.cfg.Waker != nil {
		t.Fatalf("arm failed: interval %v, waker %v; want %v and none", d, r.loop.cfg.Waker, IdleTick)
	}
	if !slices.ContainsFunc(r.logs, func(s string) bool { return strings.Contains(s, "traffic wake-up") }) {
		t.Errorf("the failed arm was not logged: %q", r.logs)
	}
}

// TestRunWake: Run steps at once on a wake, then at the probe interval
// (WatchTicks more), then arms again after MinRearm; without a wake an
// armed loop stays at ArmedIdleTick.
func TestRunWake(t *testing.T) {
	r := newIdleRunRig(t)
	w := newFakeWaker()
	r.loop.cfg.Waker = w
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- r.loop.Run(ctx) }()
	waitArms := func(n int) {
		t.Helper()
		for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(10 * time.Millisecond) {
			if arms, _ := w.counts(); arms >= n {
				return
			}
			if time.Now().After(deadline) {
				cancel()
				t.Fatalf("not armed %d times in 20 s", n)
			}
		}
	}
	waitArms(1)
	before := r.status().Ticks
	time.Sleep(300 * time.Millisecond)
	if n := r.status().Ticks - before; n > 0 {
		t.Errorf("%d ticks in 300 ms while armed, want none (ArmedIdleTick %v)", n, ArmedIdleTick)
	}
	w.fire()
	start := time.Now()
	waitArms(2)
	took := time.Since(start)
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	// the wake's Step, WatchTicks, then IdleTick ticks until MinRearm
	if n := r.status().Ticks - before; n < WatchTicks+1 {
		t.Errorf("%d ticks between the wake and the next arm, want at least %d", n, WatchTicks+1)
	}
	if took < MinRearm {
		t.Errorf("armed again %v after the wake, want at least MinRearm (%v) after the watch", took, MinRearm)
	}
}
