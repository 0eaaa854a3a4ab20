//go:build !sqm_noautorate

package service

import (
	"context"
	"fmt"
	"time"

	"sqm/internal/autorate"
	"sqm/internal/autorun"
	"sqm/internal/kernel"
	"sqm/internal/logger"
	"sqm/internal/plan"
	"sqm/internal/reflector"
	"sqm/internal/trafficwake"
)

// StartAutorate is the daemon's autorate: internal/autorun's loop on its
// own netlink connection, probing the queue's reflectors (or the built-in
// list) with internal/reflector.
func StartAutorate(st *State, mtu int, log *logger.Logger) (AutorateRunner, error) {
	p := st.Owned.Plan
	if p == nil || p.Autorate == nil {
		return nil, fmt.Errorf("the applied plan has autorate off")
	}
	defaults := make([]string, len(reflector.DefaultReflectors))
	for i, a := range reflector.DefaultReflectors {
		defaults[i] = a.String()
	}
	slots, spares, err := autorun.Targets(p.Autorate, defaults)
	if err != nil {
		return nil, err
	}
	conn, err := kernel.Open()
	if err != nil {
		return nil, err
	}
	logf := func(format string, args ...any) { log.Info(fmt.Sprintf(format, args...), "interface", st.Interface) }
	// The traffic wake-up is an economy, not a need: without it an idle
	// link is checked every autorun.IdleTick.
	var waker *trafficwake.Waker
	idx, err := conn.LinkIndex(st.Interface)
	if err == nil {
		waker, err = trafficwake.Open(idx, trafficwake.MinLen, nil)
	}
	if err != nil {
		logf("autorate %s: no traffic wake-up (%v); an idle link is checked every %v", st.Interface, err, autorun.IdleTick)
	}
	q := st.Queue
	k, err := autorun.NewKernel(conn, &q, p, mtu)
	if err != nil {
		conn.Close()
		waker.Close()
		return nil, err
	}
	prober, err := reflector.New(reflector.Config{Targets: slots, Interval: autorun.ProbeInterval, Logf: logf})
	if err != nil {
		k.Close()
		waker.Close()
		return nil, err
	}
	// One line per rate change, several a second under load: formatted
	// only while some section logs at debug level.
	debugf := func(format string, args ...any) {
		if log.Enabled(context.Background(), logger.LevelDebug) {
			log.Debug(fmt.Sprintf(format, args...), "interface", st.Interface)
		}
	}
	cfg := autorun.Config{Name: st.Interface, Controller: autorun.ControllerConfig(p.Autorate, slots),
		Shapers: k.Shapers(), Prober: prober, Targets: slots, Spares: spares, Logf: logf, Debugf: debugf}
	if waker != nil {
		cfg.Waker = waker
	}
	loop, err := autorun.New(cfg)
	if err != nil {
		prober.Close()
		k.Close()
		waker.Close()
		return nil, err
	}
	return &autorunRunner{loop: loop, k: k, prober: prober, waker: waker}, nil
}

type autorunRunner struct {
	loop   *autorun.Loop
	k      *autorun.Kernel
	prober *reflector.Prober
	waker  *trafficwake.Waker // nil without
	st     autorun.Status
}

func (r *autorunRunner) Run(ctx context.Context) error { return r.loop.Run(ctx) }

func (r *autorunRunner) IdleChanged() <-chan struct{} { return r.loop.IdleChanged() }

func (r *autorunRunner) Hold(f func(*plan.Plan) error) error { return r.k.Hold(f) }

func (r *autorunRunner) Close() error {
	r.prober.Close()
	r.waker.Close()
	return r.k.Close()
}

// Status converts the loop's status to the status file's.
func (r *autorunRunner) Status() AutorateStatus {
	r.loop.Status(&r.st)
	return autorateStatus(&r.st)
}

func autorateStatus(s *autorun.Status) AutorateStatus {
	out := AutorateStatus{Running: s.Running, Idle: s.Idle, Fallback: s.Fallback, Error: s.Err, RateChanges: s.RateChanges,
		SetErrors: s.SetErrors, Ticks: s.Ticks, Reflectors: make([]AutorateReflector, 0, len(s.Reflectors))}
	for d := range s.Dir {
		ds := &s.Dir[d]
		if !ds.Shaped {
			continue
		}
		ad := &AutorateDir{RateKbit: ds.RateBits / 1000, BaseKbit: ds.BaseBits / 1000, MinKbit: ds.MinBits / 1000, MaxKbit: ds.MaxBits / 1000,
			AchievedKbit: ds.AchievedBits / 1000, Load: ds.Load, DelayMs: -1, TargetMs: ms(ds.Target),
			Reason: ds.Reason.String(), LastChange: ds.Changed.String(), LastChangeAgoS: ds.ChangedAgo.Seconds(),
			Decisions: map[string]uint64{}, SetError: ds.LastSetErr}
		if ds.HaveDelay {
			ad.DelayMs = ms(ds.Delay)
		}
		for r, n := range s.Decisions[d] {
			if n > 0 {
				ad.Decisions[autorate.Reason(r).String()] = n
			}
		}
		if autorate.Dir(d) == autorate.Down {
			out.Download = ad
		} else {
			out.Upload = ad
		}
	}
	for _, r := range s.Reflectors {
		ar := AutorateReflector{Target: r.Target, OneWay: r.OneWay, Replied: r.Replied, Lost: r.Lost,
			BaselineMs: [2]float64{ms(r.Baseline[0]), ms(r.Baseline[1])}, RiseMs: [2]float64{ms(r.Rise[0]), ms(r.Rise[1])}}
		if r.Replace != autorate.WhyNone {
			ar.Replace = r.Replace.String()
		}
		out.Reflectors = append(out.Reflectors, ar)
	}
	return out
}

func ms(d time.Duration) float64 { return float64(d) / 1e6 }
