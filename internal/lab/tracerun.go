package lab

import (
	"context"
	"fmt"
	"io"
	"math"
	"net"
	"sort"
	"sync"
	"time"

	"github.com/florianl/go-tc"

	"sqm/internal/bloat"
	"sqm/internal/config"
	"sqm/internal/netns"
	"sqm/internal/plan"
	"sqm/internal/plot"
	"sqm/internal/stats"
	"sqm/internal/trace"
)

// Traces make a lab run follow capacity traces: the modem's rate in each
// direction with a trace moves every Interval to the trace's mean capacity
// over that interval (see tracemodem.go for how), the other direction
// keeps the link's fixed rate.
type Traces struct {
	Down, Up *trace.Trace
	// Interval is how often the modem's rate changes; 0 means 100 ms.
	Interval time.Duration
	// Controller, if set, moves sqm's shaping rates during the run; nil
	// keeps the fixed shaping of Options.Shaping.
	Controller Controller
	// NoLoad runs the trace without the rrul load, for Options.Duration
	// after the idle lead: the ground-truth probes alone cross the link,
	// so the report is what a controller does and costs on an idle link
	// (its utilisation is 0).
	NoLoad bool
	// GroundTruthEvery is how often the ground-truth probes go each way;
	// 0 means every 10 ms under load, 100 ms without. At 10 ms they carry
	// about 85 kbit/s each way, which with the load test's own idle
	// probes keeps a controller's idle threshold (100 kbit/s) from ever
	// being met in the idle lead.
	GroundTruthEvery time.Duration
}

// DefaultTraceInterval is the modem's step: fine enough for cellular
// traces' scheduling bursts to average out, coarse enough that tbf's
// refilled bucket at each change (traceBurst) stays 5 % of the rate.
const DefaultTraceInterval = 100 * time.Millisecond

// Controller moves sqm's shaping rates while a trace runs: sqm's autorate,
// or another tool run the same way so that runs compare. The lab starts
// it once the shaping is applied and stops it after the load.
type Controller interface {
	// Name is what the report calls it.
	Name() string
	// Start begins controlling the shaping env describes and returns; the
	// controller runs until Stop. ctx ends with the run.
	Start(ctx context.Context, env ControlEnv) error
	// Stop ends the controller and says what it did. CPUSeconds must come
	// from the kernel's accounting of the controller's own threads or
	// processes (getrusage of a child, /proc/PID/stat, per-thread
	// /proc/self/task/TID/stat for one in this process), not from its own
	// estimate.
	Stop() (ControlStats, error)
}

// ControlEnv is what a controller is started with.
type ControlEnv struct {
	Router *netns.NS // the router namespace; the shaper lives there
	WAN    string    // the shaped WAN device (egress: upload)
	IFB    string    // the IFB carrying the download shaping; "" if ingress is policed
	Queue  *config.Queue
	Plan   *plan.Plan
	// Reflectors are addresses in the server namespace that answer
	// probes: an 'sqm server' (bloat) on DefaultPort, ICMP echo.
	Reflectors []string
}

// ControlStats is a controller's account of a run.
type ControlStats struct {
	RateChanges int
	CPUSeconds  float64
	MaxRSSKB    int64 // the process's peak resident set (wait4), 0 if unknown
}

// fixedController is the shaping Options.Shaping applied, left alone.
type fixedController struct{}

func (fixedController) Name() string                            { return "fixed" }
func (fixedController) Start(context.Context, ControlEnv) error { return nil }
func (fixedController) Stop() (ControlStats, error)             { return ControlStats{}, nil }

// TraceReport is `sqm lab --trace-down/--trace-up --json`: the output
// contract of issue 26 (link, trace, controller), plus the shaping, the
// per-second series and the load test's own result.
type TraceReport struct {
	Link       LinkReport       `json:"link"`
	Trace      TraceInfoPair    `json:"trace"`
	Controller ControllerReport `json:"controller"`
	Shaping    ShapingReport    `json:"shaping"`
	// IntervalS is the modem's rate step; ModemChanges how many rate
	// changes it made, ModemLateMs the latest one against its schedule.
	IntervalS    float64 `json:"interval_s"`
	ModemChanges int     `json:"modem_changes"`
	ModemLateMs  float64 `json:"modem_late_ms"`
	// DurationS is the trace run's load time.
	DurationS float64       `json:"duration_s"`
	Series    TraceSeries   `json:"series"`
	Load      *bloat.Result `json:"load"`

	// the probes, for tests: trace time 0 on the prober's clock and each
	// direction's records
	probeOff           time.Duration
	probeDown, probeUp []owdRec
	modemLog           []modemChange
	modemSamples       []modemSample // the down modem's, one per follower tick
	rateLog            []rateChange  // the shaping rates as the kernel had them, each change
	t0                 time.Time     // the trace's start
}

// TraceInfoPair is the trace of each direction.
type TraceInfoPair struct {
	Down TraceInfo `json:"down"`
	Up   TraceInfo `json:"up"`
}

// TraceInfo describes one direction's capacity: a trace (File its name,
// Seconds its length before it repeats) or, with File empty, the link's
// fixed rate.
type TraceInfo struct {
	File     string  `json:"file"`
	Format   string  `json:"format"` // mahimahi, steps or fixed
	Seconds  float64 `json:"seconds"`
	MeanMbps float64 `json:"mean_mbps"`
}

// ControllerReport is how the shaping did on the trace.
type ControllerReport struct {
	Name string `json:"name"`
	// InducedOWDMs is the ground-truth one-way delay above the line's
	// base, over the probes sent during the load (lost ones left out).
	InducedOWDMs struct {
		Down Percentiles `json:"down"`
		Up   Percentiles `json:"up"`
	} `json:"induced_owd_ms"`
	// Utilisation is goodput over the trace's capacity, over the load.
	Utilisation struct {
		Down float64 `json:"down"`
		Up   float64 `json:"up"`
	} `json:"utilisation"`
	RateChanges int     `json:"rate_changes"`
	CPUSeconds  float64 `json:"cpu_seconds"`
	// MaxRSSKB is the controller process's peak resident set, kB (wait4;
	// with cake-autorate, the largest of its processes).
	MaxRSSKB int64 `json:"max_rss_kb,omitempty"`
	// BaseOWDMs is the idle one-way delay each way (the median before
	// the load), ProbeLossPct the probes lost during the load.
	BaseOWDMs struct {
		Down float64 `json:"down"`
		Up   float64 `json:"up"`
	} `json:"base_owd_ms"`
	ProbeLossPct struct {
		Down float64 `json:"down"`
		Up   float64 `json:"up"`
	} `json:"probe_loss_pct"`
}

// Percentiles of a delay, ms.
type Percentiles struct {
	P50 float64 `json:"p50"`
	P95 float64 `json:"p95"`
	P99 float64 `json:"p99"`
	Max float64 `json:"max"`
}

// TraceSeries is the run second by second from the trace's start, for
// plots: capacity (the trace's mean in that second), sqm's shaping rate
// as the kernel reported it, goodput, and the induced one-way delay of
// the probes sent in that second (median and max; 0 when none of them
// arrived, which Probes* says: the number that did).
type TraceSeries struct {
	TS               []float64 `json:"t_s"`
	CapacityDownMbps []float64 `json:"capacity_down_mbps"`
	CapacityUpMbps   []float64 `json:"capacity_up_mbps"`
	RateDownMbps     []float64 `json:"rate_down_mbps"`
	RateUpMbps       []float64 `json:"rate_up_mbps"`
	GoodputDownMbps  []float64 `json:"goodput_down_mbps"`
	GoodputUpMbps    []float64 `json:"goodput_up_mbps"`
	InducedDownMs    []float64 `json:"induced_down_ms"`
	InducedUpMs      []float64 `json:"induced_up_ms"`
	InducedDownMaxMs []float64 `json:"induced_down_max_ms"`
	InducedUpMaxMs   []float64 `json:"induced_up_max_ms"`
	ProbesDown       []int     `json:"probes_down"`
	ProbesUp         []int     `json:"probes_up"`
}

// traceDirs is the per-direction state of a trace run; index 0 is down.
type traceDir struct {
	tr    *trace.Trace // nil: fixed
	rates []uint64     // per interval over the run (trace dirs)
	tm    *traceModem
}

// RunTrace builds the lab with the modem following tr, shapes it the way
// o.Shaping says, starts tr.Controller (if any), loads both directions at
// once for o.Duration (rrul: 4 TCP streams each way) while the ground-truth
// probes run, and tears everything down.
func RunTrace(ctx context.Context, o Options, tr Traces) (rep *TraceReport, err error) {
	if tr.Down == nil && tr.Up == nil {
		return nil, fmt.Errorf("lab: a trace run needs --trace-down or --trace-up")
	}
	if tr.Interval == 0 {
		tr.Interval = DefaultTraceInterval
	}
	if tr.Interval < 10*time.Millisecond || tr.Interval > 10*time.Second {
		return nil, fmt.Errorf("lab: trace interval %v: give 10ms to 10s", tr.Interval)
	}
	ctl := tr.Controller
	if ctl == nil {
		ctl = fixedController{}
	}
	dirs := [2]traceDir{{tr: tr.Down}, {tr: tr.Up}}
	for i := range dirs {
		if d := &dirs[i]; d.tr != nil {
			if d.rates, err = d.tr.Resample(tr.Interval, o.Duration); err != nil {
				return nil, fmt.Errorf("lab: %w", err)
			}
		}
	}
	link, err := o.Link.Resolve()
	if err != nil {
		return nil, err
	}
	md, mu := link.Modems()
	for i, m := range []Modem{md, mu} {
		if dirs[i].tr != nil || m.ICMPAhead {
			if _, err := m.tbf(m.RateBits); err != nil {
				return nil, fmt.Errorf("lab: %w", err)
			}
		}
	}
	o.traces = &dirs
	if o.Idle == 0 {
		o.Idle = 3 * time.Second
	}
	r, err := setup(ctx, &o)
	if err != nil {
		return nil, err
	}
	defer func() {
		if cerr := r.teardown(&o); cerr != nil && err == nil {
			err = cerr
		}
	}()
	t, q := r.t, r.q
	rep = &TraceReport{Link: r.link, IntervalS: tr.Interval.Seconds(), DurationS: o.Duration.Seconds()}
	for i, d := range dirs {
		info := TraceInfo{Format: "fixed", MeanMbps: float64([]uint64{o.Link.DownBits, o.Link.UpBits}[i]) / 1e6}
		if d.tr != nil {
			info = TraceInfo{File: d.tr.Name, Format: d.tr.Format, Seconds: d.tr.Length.Seconds(), MeanMbps: d.tr.MeanBits() / 1e6}
		}
		*[]*TraceInfo{&rep.Trace.Down, &rep.Trace.Up}[i] = info
	}

	if pq, ok := ctl.(interface{ prepareQueue(*config.Queue) }); ok {
		pq.prepareQueue(q) // sqm's autorate: the plan carries the autorate ranges
	}
	var undo func() error
	if rep.Shaping, undo, err = r.shape(&o); err != nil {
		return nil, err
	}
	defer func() {
		if uerr := undo(); uerr != nil && err == nil {
			err = uerr
		}
	}()
	p := rep.Shaping.Plan
	ifb := ""
	if p.Ingress != nil {
		ifb = p.Ingress.IFB
	}

	every := owdEvery
	if tr.NoLoad {
		every = owdIdleEvery
	}
	if tr.GroundTruthEvery > 0 {
		every = tr.GroundTruthEvery
	}
	prober, err := t.startOWD(ctx, every)
	if err != nil {
		return nil, err
	}
	proberStopped := false
	defer func() {
		if !proberStopped {
			prober.stop(0)
		}
	}()

	env := ControlEnv{Router: t.router, WAN: wanDev, IFB: ifb, Queue: q, Plan: p, Reflectors: []string{serverIP}}
	if err := ctl.Start(ctx, env); err != nil {
		return nil, fmt.Errorf("lab: start controller %s: %w", ctl.Name(), err)
	}
	ctlStopped := false
	defer func() {
		if !ctlStopped {
			_, _ = ctl.Stop()
		}
	}()

	f, err := t.newFollower(&dirs, tr.Interval, o.Duration)
	if err != nil {
		return nil, err
	}
	defer f.close()
	rr, err := t.newRootRater(wanDev, ifb)
	if err != nil {
		return nil, fmt.Errorf("lab: read the shaping rates: %w", err)
	}
	defer rr.close()
	smp := &rateSampler{r: rr, q: q}

	var once sync.Once
	var t0 time.Time
	runCtx, stopRun := context.WithCancel(ctx)
	defer stopRun()
	begin := func(at time.Time) {
		once.Do(func() {
			t0 = at
			f.started = true
			go f.run(runCtx, t0)
			smp.done = make(chan struct{})
			go smp.run(runCtx, t0, o.Duration)
		})
	}
	load := "rrul load"
	if tr.NoLoad {
		load = "no load"
	}
	o.progress("following the traces for %v (%s, ground-truth probes every %v each way)", o.Duration, load, every)
	var res *bloat.Result
	if tr.NoLoad {
		res, err = idleRun(ctx, o, begin)
	} else {
		res, err = bloat.Run(ctx, bloat.Options{
			Addr: serverIP, Mode: bloat.ModeRRUL, Duration: o.Duration, Idle: o.Idle, Enter: t.client.Do,
			Progress: func(pr bloat.Progress) {
				// The first tick of the load phase: the load began
				// (Elapsed - Idle) ago, and so does the trace.
				if pr.Phase == "load" {
					begin(time.Now().Add(-(pr.Elapsed - o.Idle)))
				}
			},
		})
	}
	stopRun()
	f.wait()
	smp.wait()
	ctlStopped = true
	cs, cerr := ctl.Stop()
	downRecs, upRecs := prober.stop(time.Second)
	proberStopped = true
	if err != nil {
		return nil, fmt.Errorf("lab: trace run load: %w", err)
	}
	if cerr != nil {
		return nil, fmt.Errorf("lab: controller %s: %w", ctl.Name(), cerr)
	}
	if t0.IsZero() {
		return nil, fmt.Errorf("lab: the load test never reported its load phase")
	}
	if f.err != nil {
		return nil, f.err
	}
	rep.Load = res
	rep.ModemChanges, rep.ModemLateMs, rep.modemLog, rep.modemSamples = f.changes, float64(f.late)/1e6, f.log, f.samples
	rep.Link.Modem.After = t.status(t.isp, ispDown, ispUp)
	devs := []string{wanDev}
	if ifb != "" {
		devs = append(devs, ifb)
	}
	rep.Shaping.Status = t.status(t.router, devs...)
	rep.Controller = ControllerReport{Name: ctl.Name(), RateChanges: cs.RateChanges, CPUSeconds: cs.CPUSeconds, MaxRSSKB: cs.MaxRSSKB}
	rep.probeOff, rep.probeDown, rep.probeUp = t0.Sub(prober.epoch), downRecs, upRecs
	rep.t0 = t0
	if err := rep.compute(&dirs, o, res, rep.probeOff, downRecs, upRecs, smp); err != nil {
		return nil, err
	}
	return rep, nil
}

// traceModems installs the modem of each direction: a trace modem where
// dirs has a trace (at its first interval's rate, or its mean if that is a
// stall, so the idle lead measures the base delay), the fixed netem
// elsewhere.
func (t *topology) traceModems(dirs *[2]traceDir, down, up Modem) error {
	return t.isp.Do(func() error {
		conn, err := tc.Open(&tc.Config{})
		if err != nil {
			return fmt.Errorf("lab: open tc netlink socket in %s: %w", t.isp.Name(), err)
		}
		defer conn.Close()
		for i, d := range []struct {
			dev, peer string
			m         Modem
		}{{ispDown, "10.77.2.2", down}, {ispUp, serverIP, up}} {
			ifi, err := net.InterfaceByName(d.dev)
			if err != nil {
				return fmt.Errorf("lab: find %s in %s: %w", d.dev, t.isp.Name(), err)
			}
			td := &dirs[i]
			if td.tr == nil {
				apply := applyModem
				if d.m.ICMPAhead {
					// ICMP ahead needs tbf to carry the rate of
					// both queues: a trace modem that never changes
					apply = applyTraceModem
				}
				if err := apply(conn, uint32(ifi.Index), d.m); err != nil {
					return fmt.Errorf("lab: emulate the modem on %s in %s: %w", d.dev, t.isp.Name(), err)
				}
				continue
			}
			m := d.m
			m.RateBits = td.rates[0]
			if m.RateBits == 0 {
				m.RateBits = uint64(td.tr.MeanBits())
			}
			if err := applyTraceModem(conn, uint32(ifi.Index), m); err != nil {
				return fmt.Errorf("lab: emulate the trace modem on %s in %s: %w", d.dev, t.isp.Name(), err)
			}
			// The kick goes to the discard port of the host behind the
			// veth; it answers with an ICMP error at most, which costs
			// nothing and is not a probe of anyone's.
			kick, err := net.DialUDP("udp4", nil, &net.UDPAddr{IP: net.ParseIP(d.peer), Port: 9})
			if err != nil {
				return fmt.Errorf("lab: kick socket in %s: %w", t.isp.Name(), err)
			}
			td.tm = &traceModem{dev: d.dev, ifindex: uint32(ifi.Index), m: m, kick: kick}
		}
		return nil
	})
}

// follower changes the trace modems' rates on schedule.
type follower struct {
	conn     *tc.Tc
	dirs     *[2]traceDir
	interval time.Duration
	n        int
	done     chan struct{}
	started  bool
	// results, read after wait
	changes int
	late    time.Duration
	err     error
	log     []modemChange
	samples []modemSample
}

// modemSample is the down modem's tbf counters read at one of the
// follower's ticks: what the test judges the modem by (bytes sent over a
// step while its queue was backlogged), since the load tester's per-second
// goodput is the client's reads, which the VM's timing bunches (a second
// read 153 % of a capacity the modem cannot exceed by more than a bucket).
type modemSample struct {
	at, took time.Duration // since the trace's start, before the read; the read's length
	bytes    uint64        // sent, as the skb lengths tbf counts (no overhead)
	packets  uint32
	qlen     uint32 // tbf's queue (its netem child's packets)
}

// modemChange is one rate change of a trace modem, with the packets its
// tbf had sent just before it and just after it: after one change and
// before the next is what crossed the modem at that rate, the kernel's
// count (a stall's must be at most the one packet its full bucket lets
// go).
type modemChange struct {
	dir                   int // 0 down, 1 up
	at                    time.Duration
	bits                  uint64
	sentBefore, sentAfter uint32
}

// sent reads the packets the tbf of tm has sent (0 if it cannot be read).
func (f *follower) sent(tm *traceModem) uint32 {
	if st := f.stats(tm); st != nil {
		return st.Packets
	}
	return 0
}

// stats reads the counters of the tbf of tm (nil if they cannot be read).
func (f *follower) stats(tm *traceModem) *tc.Stats {
	qs, err := f.conn.Qdisc().Get()
	if err != nil {
		return nil
	}
	for _, q := range qs {
		if q.Ifindex == tm.ifindex && q.Kind == "tbf" && q.Stats != nil {
			return q.Stats
		}
	}
	return nil
}

// sample appends the down modem's counters, read now, to f.samples.
func (f *follower) sample(t0 time.Time) {
	d := &f.dirs[0]
	if d.tm == nil {
		return
	}
	before := time.Now()
	st := f.stats(d.tm)
	if st == nil {
		return
	}
	f.samples = append(f.samples, modemSample{at: before.Sub(t0), took: time.Since(before), bytes: st.Bytes, packets: st.Packets, qlen: st.Qlen})
}

func (t *topology) newFollower(dirs *[2]traceDir, interval, d time.Duration) (*follower, error) {
	f := &follower{dirs: dirs, interval: interval, n: int((d + interval - 1) / interval), done: make(chan struct{})}
	err := t.isp.Do(func() error {
		var err error
		f.conn, err = tc.Open(&tc.Config{})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("lab: open tc netlink socket in %s: %w", t.isp.Name(), err)
	}
	return f, nil
}

// run applies interval k's rates at t0 + k*interval (intervals already
// past when it starts are skipped to the current one) until the last.
func (f *follower) run(ctx context.Context, t0 time.Time) {
	defer close(f.done)
	for k := 0; k < f.n; k++ {
		at := t0.Add(time.Duration(k) * f.interval)
		if next := at.Add(f.interval); k+1 < f.n && time.Now().After(next) {
			continue // already past: catch up
		}
		if w := time.Until(at); w > 0 {
			select {
			case <-ctx.Done():
				return
			case <-time.After(w):
			}
		}
		if l := time.Since(at); l > f.late && k > 0 {
			f.late = l
		}
		for i := range f.dirs {
			d := &f.dirs[i]
			if d.tm == nil || d.tm.m.RateBits == d.rates[k] {
				continue
			}
			c := modemChange{dir: i, at: time.Duration(k) * f.interval, bits: d.rates[k], sentBefore: f.sent(d.tm)}
			if err := d.tm.setRate(f.conn, d.rates[k]); err != nil {
				f.err = fmt.Errorf("lab: %w", err)
				return
			}
			c.sentAfter = f.sent(d.tm)
			f.log = append(f.log, c)
			f.changes++
		}
		f.sample(t0)
	}
}

func (f *follower) wait() {
	if f.started {
		<-f.done
	}
}

func (f *follower) close() {
	f.conn.Close()
	for _, d := range f.dirs {
		if d.tm != nil && d.tm.kick != nil {
			d.tm.kick.Close()
		}
	}
}

// rateSampler reads sqm's shaping rates from the kernel every
// rateSampleEvery: the root qdisc's configured rate (cake's bandwidth,
// tbf's rate) on the WAN device (up) and the IFB (down); htb's is its
// classes', and the configured rate stands for it. The per-second series
// takes each second's middle sample; log keeps every change, whoever made
// it (sqm's daemon, cake-autorate's tc), so tests can time them.
type rateSampler struct {
	r        *rootRater
	q        *config.Queue
	mu       sync.Mutex
	down, up []float64 // Mbit/s per second; NaN: not read
	log      []rateChange
	done     chan struct{}
}

// rateChange is a shaping rate seen first at at. dir is 0 for the
// download, 1 for the upload (autorate.Down, Up: this file is also in
// the build without autorate).
type rateChange struct {
	at   time.Time
	dir  int
	bits uint64
}

// rateSampleEvery is the kernel read's period: the controllers' ticks
// are 100-200 ms.
const rateSampleEvery = 100 * time.Millisecond

// run samples until d after t0; the caller makes s.done first.
func (s *rateSampler) run(ctx context.Context, t0 time.Time, d time.Duration) {
	defer close(s.done)
	perSec := int(time.Second / rateSampleEvery)
	n := int((d+time.Second-1)/time.Second) * perSec
	last := [2]uint64{s.q.Download * 1000, s.q.Upload * 1000}
	for i := 0; i < n; i++ {
		if w := time.Until(t0.Add(time.Duration(i) * rateSampleEvery)); w > 0 {
			select {
			case <-ctx.Done():
				return
			case <-time.After(w):
			}
		}
		now := [2]uint64{s.q.Download * 1000, s.q.Upload * 1000}
		if r, err := s.r.rates(); err == nil {
			for d := range now {
				if r[d] != 0 {
					now[d] = r[d]
				}
			}
		}
		at := time.Now()
		s.mu.Lock()
		for d := range now {
			if now[d] != last[d] {
				s.log = append(s.log, rateChange{at: at, dir: d, bits: now[d]})
				last[d] = now[d]
			}
		}
		// mid-second, so a change at the second's start is seen
		if i%perSec == perSec/2 {
			s.down, s.up = append(s.down, float64(now[0])/1e6), append(s.up, float64(now[1])/1e6)
		}
		s.mu.Unlock()
	}
}

func (s *rateSampler) wait() {
	if s.done != nil {
		<-s.done
	}
}

// compute fills the controller figures and the series. off is the
// trace's start on the prober's clock.
func (rep *TraceReport) compute(dirs *[2]traceDir, o Options, res *bloat.Result, off time.Duration, downRecs, upRecs []owdRec, smp *rateSampler) error {
	n := int((o.Duration + time.Second - 1) / time.Second)
	s := &rep.Series
	capa := [2][]float64{}
	for i, d := range dirs {
		capa[i] = make([]float64, n)
		if d.tr == nil {
			for k := range capa[i] {
				capa[i][k] = float64([]uint64{o.Link.DownBits, o.Link.UpBits}[i]) / 1e6
			}
			continue
		}
		rs, err := d.tr.Resample(time.Second, o.Duration)
		if err != nil {
			return fmt.Errorf("lab: %w", err)
		}
		for k, r := range rs {
			capa[i][k] = float64(r) / 1e6
		}
	}
	s.CapacityDownMbps, s.CapacityUpMbps = capa[0], capa[1]
	s.TS = make([]float64, n)
	for k := range s.TS {
		s.TS[k] = float64(k)
	}
	// Goodput: each sample of the tester's series is the mean over the
	// span since the previous one, as it was really taken (Series.AtS;
	// late and bunched samples on a starved VM are why), spread over the
	// seconds that span covers.
	good := [2][]float64{make([]float64, n), make([]float64, n)}
	t0 := rep.loadT0(res)
	for i := range res.Series.TS {
		from, to := sampleSpan(res, i)
		spread(good[0], from-t0, to-t0, res.Series.DownloadMbps[i]*(to-from))
		spread(good[1], from-t0, to-t0, res.Series.UploadMbps[i]*(to-from))
	}
	s.GoodputDownMbps, s.GoodputUpMbps = good[0], good[1]
	var util [2]float64
	for i := range good {
		var g, c float64
		for k := range good[i] {
			g += good[i][k]
			c += capa[i][k] * math.Min(1, o.Duration.Seconds()-float64(k))
		}
		if c > 0 {
			util[i] = g / c
		}
	}
	rep.Controller.Utilisation.Down, rep.Controller.Utilisation.Up = util[0], util[1]

	smp.mu.Lock()
	s.RateDownMbps, s.RateUpMbps = pad(smp.down, n), pad(smp.up, n)
	rep.rateLog = smp.log
	smp.mu.Unlock()

	for i, recs := range [][]owdRec{downRecs, upRecs} {
		var idle []float64
		for _, r := range recs {
			if r.got > 0 && r.sent < off-500*time.Millisecond {
				idle = append(idle, float64(r.got-r.sent)/1e6)
			}
		}
		if len(idle) < 20 {
			return fmt.Errorf("lab: only %d ground-truth probes %s arrived before the load: cannot tell the line's base delay", len(idle), []string{"down", "up"}[i])
		}
		sort.Float64s(idle)
		base := stats.Percentile(idle, 50)
		var loaded []float64
		lost, sent := 0, 0
		per := make([][]float64, n)
		end := off + o.Duration
		for _, r := range recs {
			if r.sent < off || r.sent >= end {
				continue
			}
			sent++
			if r.got == 0 {
				lost++
				continue
			}
			v := float64(r.got-r.sent)/1e6 - base
			loaded = append(loaded, v)
			if k := int((r.sent - off) / time.Second); k < n {
				per[k] = append(per[k], v)
			}
		}
		sort.Float64s(loaded)
		pc := Percentiles{P50: -1, P95: -1, P99: -1, Max: -1}
		if len(loaded) > 0 {
			pc = Percentiles{P50: stats.Percentile(loaded, 50), P95: stats.Percentile(loaded, 95),
				P99: stats.Percentile(loaded, 99), Max: loaded[len(loaded)-1]}
		}
		med, mx, cnt := make([]float64, n), make([]float64, n), make([]int, n)
		for k, v := range per {
			cnt[k] = len(v)
			if len(v) > 0 {
				sort.Float64s(v)
				med[k], mx[k] = stats.Percentile(v, 50), v[len(v)-1]
			}
		}
		loss := 0.0
		if sent > 0 {
			loss = 100 * float64(lost) / float64(sent)
		}
		if i == 0 {
			rep.Controller.InducedOWDMs.Down, rep.Controller.BaseOWDMs.Down, rep.Controller.ProbeLossPct.Down = pc, base, loss
			s.InducedDownMs, s.InducedDownMaxMs, s.ProbesDown = med, mx, cnt
		} else {
			rep.Controller.InducedOWDMs.Up, rep.Controller.BaseOWDMs.Up, rep.Controller.ProbeLossPct.Up = pc, base, loss
			s.InducedUpMs, s.InducedUpMaxMs, s.ProbesUp = med, mx, cnt
		}
	}
	return nil
}

// loadT0 is the trace's start in seconds on the tester's series clock.
func (rep *TraceReport) loadT0(res *bloat.Result) float64 {
	for _, p := range res.Phases {
		if p.Name == "load" {
			return p.StartS
		}
	}
	return res.IdleS
}

// idleRun is a trace run's time without load: o.Idle, then the trace for
// o.Duration (begin starts it). Its result has the phases' times and no
// samples, so goodput is 0.
func idleRun(ctx context.Context, o Options, begin func(time.Time)) (*bloat.Result, error) {
	wait := func(d time.Duration) error {
		select {
		case <-time.After(d):
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if err := wait(o.Idle); err != nil {
		return nil, err
	}
	begin(time.Now())
	if err := wait(o.Duration); err != nil {
		return nil, err
	}
	return &bloat.Result{IdleS: o.Idle.Seconds(), Phases: []bloat.Phase{{Name: "load", StartS: o.Idle.Seconds(), EndS: (o.Idle + o.Duration).Seconds()}}}, nil
}

// sampleSpan is the stretch of the tester's clock that sample i of its
// series covers, in seconds.
func sampleSpan(res *bloat.Result, i int) (from, to float64) {
	if len(res.Series.AtS) == len(res.Series.TS) {
		if i == 0 {
			return res.Series.AtS[0], res.Series.AtS[0]
		}
		return res.Series.AtS[i-1], res.Series.AtS[i]
	}
	return res.Series.TS[i] - res.StepS, res.Series.TS[i]
}

// spread adds amount, spread evenly over [from, to), to the one-second
// bins it overlaps (bin k is [k, k+1)).
func spread(bins []float64, from, to, amount float64) {
	if !(to > from) {
		return
	}
	for k := max(0, int(math.Floor(from))); k < len(bins) && float64(k) < to; k++ {
		lo, hi := math.Max(from, float64(k)), math.Min(to, float64(k+1))
		if hi > lo {
			bins[k] += amount * (hi - lo) / (to - from)
		}
	}
}

func pad(v []float64, n int) []float64 {
	out := make([]float64, n)
	for i := range out {
		out[i] = -1
		if i < len(v) {
			out[i] = v[i]
		}
	}
	return out
}

// Autorate, when set, makes sqm's autorate controller for `sqm lab
// --autorate` (autorate.go); nil in a build without it (-tags
// sqm_noautorate), where the flag is refused rather than run with
// something else.
var Autorate func() Controller

// WriteText prints what a trace run measured.
func (rep *TraceReport) WriteText(w io.Writer) error {
	c := rep.Controller
	for i, ti := range []TraceInfo{rep.Trace.Down, rep.Trace.Up} {
		dir := []string{"down", "up"}[i]
		if ti.File == "" {
			fmt.Fprintf(w, "Capacity %-4s fixed %.2f Mbit/s\n", dir, ti.MeanMbps)
		} else {
			fmt.Fprintf(w, "Capacity %-4s %s (%s, %.1f s, looping), mean %.2f Mbit/s\n", dir, ti.File, ti.Format, ti.Seconds, ti.MeanMbps)
		}
	}
	fmt.Fprintf(w, "Shaping: %s; controller %s (%d rate changes, %.2f CPU s)\n", rep.Shaping.Text(), c.Name, c.RateChanges, c.CPUSeconds)
	fmt.Fprintf(w, "Run: %.0f s rrul load; modem rate step %.0f ms, %d changes, at most %.1f ms late\n",
		rep.DurationS, rep.IntervalS*1000, rep.ModemChanges, rep.ModemLateMs)
	fmt.Fprintf(w, "%-5s %9s %9s %9s %9s %10s %8s %8s\n", "", "p50 ms", "p95 ms", "p99 ms", "max ms", "util", "base ms", "loss %")
	for i, p := range []Percentiles{c.InducedOWDMs.Down, c.InducedOWDMs.Up} {
		u := []float64{c.Utilisation.Down, c.Utilisation.Up}[i]
		b := []float64{c.BaseOWDMs.Down, c.BaseOWDMs.Up}[i]
		l := []float64{c.ProbeLossPct.Down, c.ProbeLossPct.Up}[i]
		fmt.Fprintf(w, "%-5s %9.1f %9.1f %9.1f %9.1f %9.0f%% %8.1f %8.1f\n", []string{"down", "up"}[i], p.P50, p.P95, p.P99, p.Max, 100*u, b, l)
	}
	fmt.Fprintln(w, "(induced one-way delay of ground-truth probes above the idle base; utilisation = goodput / trace capacity)")
	return nil
}

// WritePlot draws the run over time to path (.svg or .png): per direction
// capacity, shaping rate and goodput, and the induced one-way delay
// (median and max of each second's probes).
func (rep *TraceReport) WritePlot(path string) error {
	s := rep.Series
	x := make([]float64, len(s.TS))
	for i, t := range s.TS {
		x[i] = t + 0.5 // each value is its second's
	}
	name := func(ti TraceInfo) string {
		if ti.File == "" {
			return fmt.Sprintf("fixed %.1f Mbit/s", ti.MeanMbps)
		}
		return ti.File
	}
	tl := &plot.Timeline{
		Title: fmt.Sprintf("sqm lab on a trace: controller %s", rep.Controller.Name),
		Subtitle: fmt.Sprintf("down %s, up %s; sqm %s/%s, %s down / %s up to start", name(rep.Trace.Down), name(rep.Trace.Up),
			rep.Shaping.Script, rep.Shaping.Qdisc, FormatRate(rep.Shaping.DownloadKbit*1000), FormatRate(rep.Shaping.UploadKbit*1000)),
	}
	// gaps (NaN) where a second has no rate read or no probe arrived
	gaps := func(v []float64, ok func(k int) bool) []float64 {
		out := make([]float64, len(v))
		for k := range v {
			out[k] = v[k]
			if !ok(k) {
				out[k] = math.NaN()
			}
		}
		return out
	}
	for _, d := range []struct {
		dir                    string
		capa, rate, good, m, x []float64
		probes                 []int
	}{
		{"Download", s.CapacityDownMbps, s.RateDownMbps, s.GoodputDownMbps, s.InducedDownMs, s.InducedDownMaxMs, s.ProbesDown},
		{"Upload", s.CapacityUpMbps, s.RateUpMbps, s.GoodputUpMbps, s.InducedUpMs, s.InducedUpMaxMs, s.ProbesUp},
	} {
		rate := d.rate
		d.rate = gaps(rate, func(k int) bool { return rate[k] >= 0 })
		probed := func(k int) bool { return k < len(d.probes) && d.probes[k] > 0 }
		d.m, d.x = gaps(d.m, probed), gaps(d.x, probed)
		tl.Panels = append(tl.Panels,
			plot.TimelinePanel{YLabel: d.dir + " (Mbit/s)", Lines: []plot.TimelineLine{
				{Name: "capacity", X: x, Y: d.capa}, {Name: "shaping rate", X: x, Y: d.rate}, {Name: "goodput", X: x, Y: d.good}}},
			plot.TimelinePanel{YLabel: d.dir + " induced OWD (ms)", Lines: []plot.TimelineLine{
				{Name: "median", X: x, Y: d.m}, {Name: "max", X: x, Y: d.x}}})
	}
	if err := plot.SaveTimeline(path, tl); err != nil {
		return fmt.Errorf("lab: %w", err)
	}
	return nil
}
