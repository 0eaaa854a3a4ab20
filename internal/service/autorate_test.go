package service

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"sqm/internal/config"
	"sqm/internal/logger"
	"sqm/internal/plan"
)

// autoratePlan is fakePlan with the autorate settings the real planner
// adds for a section with autorate on.
func autoratePlan(q *config.Queue, mtu int) (*plan.Plan, error) {
	p, err := fakePlan(q, mtu)
	if err != nil || !q.Autorate.Enabled {
		return p, err
	}
	p.Autorate = &plan.Autorate{Target: 15 * time.Millisecond, Probe: "both"}
	if q.Upload > 0 {
		p.Autorate.Upload = &plan.RateRange{MinKbit: q.Upload / 4, BaseKbit: q.Upload, MaxKbit: 2 * q.Upload}
	}
	return p, nil
}

// fakeRunner moves the upload rate in the fake kernel as a loop would
// (the tree's JSON at another rate), and says what happened to it.
type fakeRunner struct {
	k       *fakeKernel
	base    *plan.Plan
	mu      sync.Mutex
	rate    uint64
	runErr  error
	stopped chan struct{}
	closed  bool
	idle    bool
	idleC   chan struct{}
}

func (r *fakeRunner) IdleChanged() <-chan struct{} { return r.idleC }

// setIdle changes what Status says and tells IdleChanged, as a loop does.
func (r *fakeRunner) setIdle(idle bool) {
	r.mu.Lock()
	r.idle = idle
	r.mu.Unlock()
	r.idleC <- struct{}{}
}

func (r *fakeRunner) setRate(kbit uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.rate = kbit
	b, _ := json.Marshal(r.running())
	r.k.mu.Lock()
	r.k.trees[r.base.Interface] = string(b)
	r.k.mu.Unlock()
}

func (r *fakeRunner) running() *plan.Plan {
	p := *r.base
	e := *p.Egress
	e.RateKbit = r.rate
	p.Egress = &e
	return &p
}

func (r *fakeRunner) Run(ctx context.Context) error {
	defer close(r.stopped)
	if r.runErr != nil {
		return r.runErr
	}
	r.setRate(r.base.Egress.RateKbit * 3 / 2)
	<-ctx.Done()
	return nil
}

func (r *fakeRunner) Hold(f func(*plan.Plan) error) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return f(r.running())
}

func (r *fakeRunner) Status() AutorateStatus {
	r.mu.Lock()
	defer r.mu.Unlock()
	return AutorateStatus{Running: true, Idle: r.idle, Upload: &AutorateDir{RateKbit: r.rate, Reason: "increase", LastChange: "increase"}, Reflectors: []AutorateReflector{}}
}

func (r *fakeRunner) Close() error {
	r.mu.Lock()
	r.closed = true
	r.mu.Unlock()
	return nil
}

type fakeStarter struct {
	k       *fakeKernel
	mu      sync.Mutex
	runners []*fakeRunner
	err     error
	runErr  error
	idle    bool // the runners start idle
}

func (s *fakeStarter) start(st *State, mtu int, log *logger.Logger) (AutorateRunner, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return nil, s.err
	}
	r := &fakeRunner{k: s.k, base: st.Owned.Plan, rate: st.Owned.Plan.Egress.RateKbit, runErr: s.runErr, stopped: make(chan struct{}),
		idle: s.idle, idleC: make(chan struct{}, 1)}
	s.runners = append(s.runners, r)
	return r, nil
}

func (s *fakeStarter) n() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.runners)
}

func (s *fakeStarter) runner(i int) *fakeRunner {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.runners[i]
}

func arQueue(up uint64) config.Queue {
	q := queue("wan", "eth0", 0, up)
	q.Autorate.Enabled = true
	return q
}

// The loop starts with the queue; its rate changes are not drift (no
// restore over several checks); a re-apply restarts it on the new tree;
// autorate turned off stops it and removes its status.
func TestDaemonAutorateLifecycle(t *testing.T) {
	k := newFake("eth0")
	fs := &fakeStarter{k: k}
	r := startDaemonWith(t, k, true, func(d *Daemon) {
		d.Autorate, d.Svc.Plan = fs.start, autoratePlan
	}, arQueue(10000))
	eventually(t, "autorate started with the queue", func() bool { return fs.n() == 1 })
	run := fs.runner(0)
	eventually(t, "the loop moved the rate", func() bool { return run.Status().Upload.RateKbit == 15000 })
	checks := k.count(k.matches, "eth0")
	eventually(t, "three drift checks", func() bool { return k.count(k.matches, "eth0") >= checks+3 })
	if n := k.count(k.applies, "eth0"); n != 1 {
		t.Fatalf("%d applies: autorate's rate was taken for drift and restored\n%s", n, r.logs.String())
	}
	if strings.Contains(r.logs.String(), "differs") {
		t.Errorf("drift logged:\n%s", r.logs.String())
	}
	eventually(t, "status file", func() bool {
		st, _ := r.svc.Store.Autorate("eth0")
		return st != nil && st.Running && st.Upload != nil && st.Upload.RateKbit == 15000 && st.Section == "wan"
	})

	// Someone else changes the tree: that is drift, and the restore
	// re-applies the base tree and restarts the loop on it.
	k.tamper("eth0")
	eventually(t, "restored", func() bool { return k.count(k.applies, "eth0") == 2 })
	eventually(t, "a new loop on the restored tree", func() bool { return fs.n() == 2 })
	select {
	case <-run.stopped:
	case <-time.After(time.Second):
		t.Fatal("the first loop still runs after the re-apply")
	}

	// A changed section: re-applied, the loop restarted.
	r.writeConfig(arQueue(20000))
	eventually(t, "re-applied at the new base", func() bool { return k.count(k.applies, "eth0") == 3 })
	eventually(t, "a third loop", func() bool { return fs.n() == 3 })
	if b := fs.runner(2).base.Egress.RateKbit; b != 20000 {
		t.Errorf("the new loop runs on a tree at %d kbit/s, want 20000", b)
	}

	// Autorate off: the loop stops, its status goes.
	r.writeConfig(queue("wan", "eth0", 0, 20000))
	eventually(t, "loop stopped", func() bool {
		select {
		case <-fs.runner(2).stopped:
			return true
		default:
			return false
		}
	})
	eventually(t, "status file removed", func() bool { st, _ := r.svc.Store.Autorate("eth0"); return st == nil })
	if fs.n() != 3 {
		t.Errorf("%d loops started, want 3", fs.n())
	}
}

// A loop that cannot start (no probe socket, or this build has none)
// leaves the queue shaped at its base rate, says so, and the daemon goes on.
func TestDaemonAutorateStartFails(t *testing.T) {
	k := newFake("eth0")
	fs := &fakeStarter{k: k, err: errors.New("reflector: no ICMP socket: operation not permitted")}
	r := startDaemonWith(t, k, true, func(d *Daemon) { d.Autorate = fs.start; d.Svc.Plan = autoratePlan }, arQueue(10000))
	eventually(t, "applied", func() bool { return k.count(k.applies, "eth0") == 1 })
	eventually(t, "logged", func() bool {
		return strings.Contains(r.logs.String(), "autorate not running; the queue keeps its base rates")
	})
	eventually(t, "the status says why", func() bool {
		st, err := r.svc.Store.Autorate("eth0")
		return err == nil && st != nil && !st.Running && st.Fallback && strings.Contains(st.Error, "operation not permitted; shaping at the base rates")
	})
	checks := k.count(k.matches, "eth0")
	eventually(t, "two drift checks", func() bool { return k.count(k.matches, "eth0") >= checks+2 })
	if n := k.count(k.applies, "eth0"); n != 1 {
		t.Errorf("%d applies; the base tree is what runs", n)
	}
}

// A loop that gives up (its probes failed) is reported; the queue stays.
func TestDaemonAutorateRunFails(t *testing.T) {
	k := newFake("eth0")
	fs := &fakeStarter{k: k, runErr: errors.New("autorate eth0: probes failed: reflector: poll: EBADF")}
	r := startDaemonWith(t, k, true, func(d *Daemon) { d.Autorate = fs.start; d.Svc.Plan = autoratePlan }, arQueue(10000))
	eventually(t, "logged", func() bool {
		return strings.Contains(r.logs.String(), "autorate stopped; the queue keeps its base rates")
	})
	eventually(t, "status says why", func() bool {
		st, _ := r.svc.Store.Autorate("eth0")
		return st != nil && st.Fallback && strings.Contains(st.Error, "EBADF")
	})
	eventually(t, "the failed loop's sockets closed", func() bool {
		r := fs.runner(0)
		r.mu.Lock()
		defer r.mu.Unlock()
		return r.closed
	})
	if n := k.count(k.applies, "eth0"); n != 1 {
		t.Errorf("%d applies", n)
	}
}

// An idle link's status file is rewritten every statusIdleEvery (10 s),
// and says so; when load comes back it is rewritten at once, not at the
// next idle write.
func TestDaemonAutorateIdleWrites(t *testing.T) {
	k := newFake("eth0")
	fs := &fakeStarter{k: k, idle: true}
	r := startDaemonWith(t, k, true, func(d *Daemon) {
		d.Autorate, d.Svc.Plan = fs.start, autoratePlan
	}, arQueue(10000))
	status := func() *AutorateStatus { st, _ := r.svc.Store.Autorate("eth0"); return st }
	eventually(t, "an idle status written every 10 s", func() bool {
		st := status()
		return st != nil && st.Idle && st.WriteEveryS == statusIdleEvery.Seconds()
	})
	fs.runner(0).setIdle(false)
	eventually(t, "the status out of idle within 3 s", func() bool {
		st := status()
		return st != nil && !st.Idle && st.WriteEveryS == 1
	})
}

func TestStatusEvery(t *testing.T) {
	for _, tt := range []struct {
		running, idle bool
		want          time.Duration
	}{
		{true, false, time.Second},    // loaded
		{true, true, statusIdleEvery}, // idle
		{false, true, time.Second},    // stopped
		{false, false, time.Second},   // stopped
	} {
		s := AutorateStatus{Running: tt.running, Idle: tt.idle}
		if got := statusEvery(&s); got != tt.want {
			t.Errorf("running %v idle %v: every %v, want %v", tt.running, tt.idle, got, tt.want)
		}
	}
}
