//go:build !sqm_noautorate

package lab

import (
	"context"
	"errors"
	"sync"
	"time"

	"sqm/internal/autorate"
	"sqm/internal/autorun"
	"sqm/internal/config"
	"sqm/internal/kernel"
	"sqm/internal/reflector"
)

func init() {
	Autorate = func() Controller { return &sqmAutorate{} }
}

// sqmAutorate is sqm's autorate in the lab: the same loop the daemon runs
// (internal/autorun), in this process, on the router namespace's shaper,
// probing the lab's server (its sqm server's sessionless echo and the
// kernel's ICMP timestamp replies) through the emulated modem. It never
// sees the ground-truth probes (owd.go), which are the lab's own.
type sqmAutorate struct {
	loop   *autorun.Loop
	k      *autorun.Kernel
	prober *reflector.Prober
	cancel context.CancelFunc
	done   chan error

	mu      sync.Mutex
	changes []rateChange // every rate set, for tests
	debugf  func(format string, args ...any)
	// queue, if set, edits the lab's queue after autorate is turned on
	// (a test's autorate options).
	queue func(*config.Queue)
	last  autorun.Status
}

// rateChange is one rate the loop set on the shaper.
type rateChange struct {
	at   time.Time
	dir  autorate.Dir
	bits uint64
}

func (a *sqmAutorate) Name() string { return "sqm-autorate" }

// prepareQueue turns autorate on for the lab's queue (RunTrace calls it
// before shaping), leaving a config file's own autorate options as they
// are: the ranges default to config's (base/4 .. 2 x base).
func (a *sqmAutorate) prepareQueue(q *config.Queue) {
	q.Autorate.Enabled = true
	if a.queue != nil {
		a.queue(q)
	}
}

func (a *sqmAutorate) Start(ctx context.Context, env ControlEnv) error {
	if env.Plan.Autorate == nil {
		return errors.New("the plan has autorate off")
	}
	var hosts []string
	for _, r := range env.Reflectors {
		hosts = append(hosts, "sqm://"+r, "icmp://"+r)
	}
	slots, spares, err := autorun.Targets(env.Plan.Autorate, hosts)
	if err != nil {
		return err
	}
	err = env.Router.Do(func() error {
		conn, err := kernel.Open()
		if err != nil {
			return err
		}
		mtu, err := conn.LinkMTU(env.WAN)
		if err == nil {
			a.k, err = autorun.NewKernel(conn, env.Queue, env.Plan, mtu)
		}
		if err != nil {
			conn.Close()
		}
		return err
	})
	if err != nil {
		return err
	}
	a.prober, err = reflector.New(reflector.Config{Targets: slots, Interval: autorun.ProbeInterval, Enter: env.Router.Do})
	if err != nil {
		a.k.Close()
		return err
	}
	sh := a.k.Shapers()
	for d := range sh {
		if sh[d] != nil {
			sh[d] = &recordShaper{Shaper: sh[d], a: a, dir: autorate.Dir(d)}
		}
	}
	a.loop, err = autorun.New(autorun.Config{Name: env.WAN, Controller: autorun.ControllerConfig(env.Plan.Autorate, slots),
		Shapers: sh, Prober: a.prober, Targets: slots, Spares: spares, Debugf: a.debugf, Logf: a.debugf, AccountCPU: true})
	if err != nil {
		a.prober.Close()
		a.k.Close()
		return err
	}
	ctx, a.cancel = context.WithCancel(ctx)
	a.done = make(chan error, 1)
	go func() { a.done <- a.loop.Run(ctx) }()
	return nil
}

func (a *sqmAutorate) Stop() (ControlStats, error) {
	if a.loop == nil {
		return ControlStats{}, nil
	}
	a.cancel()
	err := <-a.done
	a.prober.Close()
	a.k.Close()
	var st autorun.Status
	a.loop.Status(&st)
	a.last = st
	a.loop = nil
	if err != nil {
		return ControlStats{}, err
	}
	return ControlStats{RateChanges: int(st.RateChanges), CPUSeconds: st.CPUSeconds}, nil
}

func (a *sqmAutorate) log() []rateChange {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]rateChange(nil), a.changes...)
}

// recordShaper logs each rate set, with its time.
type recordShaper struct {
	autorun.Shaper
	a   *sqmAutorate
	dir autorate.Dir
}

func (r *recordShaper) SetRate(bits uint64) (uint64, error) {
	got, err := r.Shaper.SetRate(bits)
	if err == nil {
		r.a.mu.Lock()
		r.a.changes = append(r.a.changes, rateChange{at: time.Now(), dir: r.dir, bits: got})
		r.a.mu.Unlock()
	}
	return got, err
}
