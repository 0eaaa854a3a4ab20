package service

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"sqm/internal/json"
	"sqm/internal/logger"
	"sqm/internal/plan"
)

// The daemon runs autorate (issue 26) for every queue it shapes with
// autorate on: one loop per interface, started once the queue's tree is
// applied, stopped before anything else touches that tree (a re-apply,
// a restore, a stop) and started afresh on the tree applied then. The
// loop itself is internal/autorun's; this file is its lifecycle, the
// drift check's view of it, and its status file.

// AutorateRunner is one queue's autorate as the daemon runs it.
type AutorateRunner interface {
	// Run runs the loop until ctx ends, then puts the base rates back;
	// an error says the loop gave up (the queue is at its base rates).
	Run(ctx context.Context) error
	// Hold runs f with the plan the kernel holds now (the applied plan at
	// the rates autorate set) while no rate changes.
	Hold(f func(running *plan.Plan) error) error
	// Status is the loop's state for `sqm status` and the metrics.
	Status() AutorateStatus
	// IdleChanged receives when the loop goes idle or comes back from it:
	// the status file is rewritten then, not at its next idle write. Nil
	// for a runner that never says.
	IdleChanged() <-chan struct{}
	// Close releases the loop's sockets after Run returned.
	Close() error
}

// AutorateStarter makes the runner of st's queue, whose applied plan
// (st.Owned.Plan) runs on an interface of MTU mtu. ErrAutorateOmitted
// (this build has no autorate) and any other error leave the queue at its
// base rates, which is what was applied.
type AutorateStarter func(st *State, mtu int, log *logger.Logger) (AutorateRunner, error)

// ErrAutorateOmitted: this package was built without autorate (the router
// package, over its size budget with it; sqm-full has it).
var ErrAutorateOmitted = errors.New("autorate is not built into this sqm package (sqm-full has it)")

// AutorateStatus is one interface's autorate, as the daemon writes it to
// IFACE.autorate.json in the state directory every second (and `sqm
// status` shows it; docs/status-json.md).
type AutorateStatus struct {
	Interface string    `json:"interface"`
	Section   string    `json:"section"`
	PID       int       `json:"pid"`
	UpdatedAt time.Time `json:"updated_at"`
	// WriteEveryS is how often the daemon rewrites the file now (seconds;
	// it writes rarely while the link is idle), from which `sqm status`
	// tells a file left by a daemon that died.
	WriteEveryS float64 `json:"write_every_s,omitempty"`
	// Running: the loop is ticking. Fallback: no reflector answered for
	// a while, or the probes failed: the queue is at its base rates.
	Running  bool   `json:"running"`
	Idle     bool   `json:"idle"`
	Fallback bool   `json:"fallback"`
	Error    string `json:"error,omitempty"`
	// Download and Upload are nil for a direction autorate does not move.
	Download    *AutorateDir        `json:"download,omitempty"`
	Upload      *AutorateDir        `json:"upload,omitempty"`
	Reflectors  []AutorateReflector `json:"reflectors"`
	RateChanges uint64              `json:"rate_changes"`
	SetErrors   uint64              `json:"set_errors"`
	Ticks       uint64              `json:"ticks"`
}

// AutorateDir is one direction's rate and the controller's view.
type AutorateDir struct {
	RateKbit     uint64  `json:"rate_kbit"`
	BaseKbit     uint64  `json:"base_kbit"`
	MinKbit      uint64  `json:"min_kbit"`
	MaxKbit      uint64  `json:"max_kbit"`
	AchievedKbit uint64  `json:"achieved_kbit"`
	Load         float64 `json:"load"`
	// DelayMs is the delay rise over the baseline the controller acted
	// on (-1: no fresh reflector); TargetMs its target.
	DelayMs  float64 `json:"delay_ms"`
	TargetMs float64 `json:"target_ms"`
	// Reason is the last tick's decision, LastChange the reason of the
	// last rate change, LastChangeAgoS how long ago it was.
	Reason         string            `json:"reason"`
	LastChange     string            `json:"last_change"`
	LastChangeAgoS float64           `json:"last_change_ago_s"`
	Decisions      map[string]uint64 `json:"decisions"`
	SetError       string            `json:"set_error,omitempty"`
}

// AutorateReflector is one probe slot.
type AutorateReflector struct {
	Target string `json:"target"`
	OneWay bool   `json:"one_way"`
	// Replied: it answered at least once. The delays are the baseline
	// and the latest rise, down and up (one-way) or round trip (down).
	Replied    bool       `json:"replied"`
	BaselineMs [2]float64 `json:"baseline_ms"`
	RiseMs     [2]float64 `json:"rise_ms"`
	Lost       int        `json:"lost"`
	Replace    string     `json:"replace,omitempty"`
}

func (s *Store) autoratePath(iface string) string {
	return filepath.Join(s.Dir, iface+".autorate.json")
}

// Autorate returns the daemon's autorate status of iface; nil when there
// is none (autorate off, or no daemon ran it).
func (s *Store) Autorate(iface string) (*AutorateStatus, error) {
	if err := checkIfaceName(iface); err != nil {
		return nil, fmt.Errorf("state: %w", err)
	}
	b, err := os.ReadFile(s.autoratePath(iface))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("state: %w", err)
	}
	var st AutorateStatus
	if err := json.Unmarshal(b, &st); err != nil {
		return nil, fmt.Errorf("state: %s is corrupt: %w", s.autoratePath(iface), err)
	}
	return &st, nil
}

func (s *Store) saveAutorate(st *AutorateStatus) error {
	if err := checkIfaceName(st.Interface); err != nil {
		return fmt.Errorf("state: %w", err)
	}
	// Compact and not synced: it is rewritten each second under load.
	b, err := json.Marshal(st)
	if err != nil {
		return fmt.Errorf("state: encode %s: %w", s.autoratePath(st.Interface), err)
	}
	return s.writeFile(s.autoratePath(st.Interface), append(b, '\n'), false)
}

func (s *Store) removeAutorate(iface string) {
	if checkIfaceName(iface) == nil {
		os.Remove(s.autoratePath(iface))
	}
}

// autorates are the daemon's running loops, by interface.
type autorates struct {
	start AutorateStarter
	store *Store
	log   *logger.Logger
	mtu   func(iface string) (int, error)

	mu   sync.Mutex
	runs map[string]*autorateRun
}

type autorateRun struct {
	applied time.Time
	plan    json.RawMessage // the applied plan (State.Plan)
	section string
	r       AutorateRunner // nil: it did not start (err says why)
	err     string
	cancel  context.CancelFunc
	done    chan struct{}
}

// sync makes the loops match states: one per state with autorate on,
// restarted when the state is a new apply, stopped for states gone.
func (a *autorates) sync(states []*State) {
	want := map[string]*State{}
	for _, st := range states {
		if st.Owned.Plan != nil && st.Owned.Plan.Autorate != nil {
			want[st.Interface] = st
		}
	}
	a.mu.Lock()
	var stop []*autorateRun
	for iface, run := range a.runs {
		if st, ok := want[iface]; !ok || !st.AppliedAt.Equal(run.applied) {
			stop = append(stop, run)
			delete(a.runs, iface)
		}
	}
	a.mu.Unlock()
	for _, run := range stop {
		run.stop() // it writes its last status as it ends
	}
	// Status files of queues no longer autorated (stopped, autorate
	// turned off, or left by an earlier daemon) go.
	names, _ := filepath.Glob(filepath.Join(a.store.Dir, "*.autorate.json"))
	for _, n := range names {
		if iface := strings.TrimSuffix(filepath.Base(n), ".autorate.json"); want[iface] == nil {
			a.store.removeAutorate(iface)
		}
	}
	for iface, st := range want {
		a.mu.Lock()
		_, running := a.runs[iface]
		a.mu.Unlock()
		if !running {
			a.launch(st)
		}
	}
}

// launch starts st's loop; a failure is logged and recorded, and the
// queue keeps the base rates it was applied with.
func (a *autorates) launch(st *State) {
	run := &autorateRun{applied: st.AppliedAt, plan: st.Plan, section: st.Section, done: make(chan struct{})}
	mtu, err := a.mtu(st.Interface)
	if err == nil {
		run.r, err = a.start(st, mtu, a.log)
	}
	a.mu.Lock()
	if a.runs == nil {
		a.runs = map[string]*autorateRun{}
	}
	a.runs[st.Interface] = run
	a.mu.Unlock()
	if err != nil {
		run.err = err.Error() + "; shaping at the base rates"
		close(run.done)
		a.log.Error("autorate not running; the queue keeps its base rates", "interface", st.Interface, "section", st.Section, "err", err)
		a.store.saveAutorate(&AutorateStatus{Interface: st.Interface, Section: st.Section, PID: os.Getpid(), UpdatedAt: time.Now().UTC(),
			Fallback: true, Error: run.err, Reflectors: []AutorateReflector{}})
		return
	}
	a.log.Info("autorate started", "interface", st.Interface, "section", st.Section)
	ctx, cancel := context.WithCancel(context.Background())
	run.cancel = cancel
	go func() {
		defer close(run.done)
		// The status file is written once a second (every
		// statusIdleEvery while the link is idle, and at once when
		// it goes idle or comes back), not at each rate change: `sqm
		// status` compares the tree at the rate the kernel runs
		// (AutorateDrift), and under load the writes at each change
		// (four a second) were a third of the daemon's CPU.
		every := time.Second
		tk := time.NewTicker(every)
		defer tk.Stop()
		errc := make(chan error, 1)
		go func() { errc <- run.r.Run(ctx) }()
		write := func() {
			s := run.r.Status()
			if d := statusEvery(&s); d != every {
				every = d
				tk.Reset(d)
			}
			s.Interface, s.Section, s.PID, s.UpdatedAt, s.WriteEveryS = st.Interface, st.Section, os.Getpid(), time.Now().UTC(), every.Seconds()
			if run.err != "" {
				s.Error, s.Fallback = run.err, true
			}
			if err := a.store.saveAutorate(&s); err != nil {
				a.log.Debug("cannot write the autorate status", "interface", st.Interface, "err", err)
			}
		}
		for {
			select {
			case <-tk.C:
				write()
			case <-run.r.IdleChanged():
				write()
			case err := <-errc:
				if err != nil && ctx.Err() == nil {
					run.err = err.Error() + "; shaping at the base rates"
					a.log.Error("autorate stopped; the queue keeps its base rates", "interface", st.Interface, "err", err)
				}
				write()
				run.r.Close()
				return
			}
		}
	}()
}

// statusIdleEvery is how often an idle link's status file is rewritten:
// nothing in it moves then but its time and the rare idle probes'
// delays. At 2.5 s the writes (the JSON encoding above all) were a
// seventh of an idle daemon's CPU in the lab's VM.
const statusIdleEvery = 10 * time.Second

// statusEvery is how often the status file is written after s: once a
// second, or every statusIdleEvery while the loop runs on an idle link.
func statusEvery(s *AutorateStatus) time.Duration {
	if s.Running && s.Idle {
		return statusIdleEvery
	}
	return time.Second
}

func (run *autorateRun) stop() {
	if run.cancel != nil {
		run.cancel()
	}
	<-run.done
}

// stopAll ends every loop (the daemon exits): the queues go back to
// their base rates, and their status files go with the daemon.
func (a *autorates) stopAll() {
	a.mu.Lock()
	runs := a.runs
	a.runs = nil
	a.mu.Unlock()
	for iface, run := range runs {
		run.stop()
		a.store.removeAutorate(iface)
	}
}

// stopIface ends iface's loop before something else changes its tree;
// sync starts it again on what was applied.
func (a *autorates) stopIface(iface string) {
	a.mu.Lock()
	run := a.runs[iface]
	delete(a.runs, iface)
	a.mu.Unlock()
	if run != nil {
		run.stop()
	}
}

// runner is iface's running loop and the plan it was started on; nil
// when none runs.
func (a *autorates) runner(iface string) (AutorateRunner, json.RawMessage) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if run := a.runs[iface]; run != nil && run.r != nil {
		select {
		case <-run.done:
			return nil, nil
		default:
		}
		return run.r, run.plan
	}
	return nil, nil
}

// autorateKernel is the daemon's Kernel with its autorate loops in view:
// Matches compares an autorate queue's tree with the plan at the rates
// autorate set (so they are not drift, and a reload that changed nothing
// keeps the loop), Apply and Remove stop the interface's loop first (it
// must not change rates under them; sync starts it on the new tree).
type autorateKernel struct {
	Kernel
	a *autorates
}

func (k autorateKernel) Matches(p *plan.Plan) (bool, string, error) {
	r, applied := k.a.runner(p.Interface)
	if r == nil {
		return k.Kernel.Matches(p)
	}
	// Only if p is the plan the loop runs do autorate's rates stand for
	// p's; a section that changed is compared as it is.
	if b, err := json.Marshal(p); err != nil || !samePlan(b, applied) {
		return k.Kernel.Matches(p)
	}
	var ok bool
	var diff string
	var err error
	if herr := r.Hold(func(running *plan.Plan) error {
		ok, diff, err = k.Kernel.Matches(running)
		return nil
	}); herr != nil {
		return false, "", herr
	}
	return ok, diff, err
}

func (k autorateKernel) Apply(p *plan.Plan, prev *Owned, opts ApplyOptions) (*Result, error) {
	k.a.stopIface(p.Interface)
	return k.Kernel.Apply(p, prev, opts)
}

func (k autorateKernel) Remove(o *Owned) error {
	k.a.stopIface(o.Interface)
	return k.Kernel.Remove(o)
}

// AutorateDriftKernel is what AutorateDrift needs from the kernel.
type AutorateDriftKernel interface {
	DriftKernel
	// ShaperRate is the rate dev's shaper runs at now, bits/s.
	ShaperRate(dev string) (uint64, error)
}

// AutorateDrift is Drift for a queue the daemon autorates (ar its status
// file). The loop changes each shaper's rate in place, so the kernel's
// tree is compared with the plan at the rate the kernel runs, as long as
// that rate is within the direction's autorate range; a rate outside it
// is drift. The kernel owns the running rate: the status file, written
// once a second, may be a few changes behind. A rate someone else set
// within the range is not told from autorate's.
func AutorateDrift(k AutorateDriftKernel, planner PlanFunc, st *State, ar *AutorateStatus) string {
	return drift(k, planner, st, func(p *plan.Plan, mtu int) string {
		for _, ingress := range []bool{false, true} {
			d, t := ar.Upload, p.Egress
			if ingress {
				d, t = ar.Download, nil
				if p.Ingress != nil {
					t = p.Ingress.Shaper
				}
			}
			if d == nil || t == nil {
				continue
			}
			bits, err := k.ShaperRate(t.Device)
			if err != nil {
				return err.Error()
			}
			if bits == 0 {
				continue // no shaper at the root: Matches says what is there
			}
			kbit := bits / 1000
			if kbit < d.MinKbit || kbit > d.MaxKbit {
				return fmt.Sprintf("%s: %s rate %d kbit/s is outside autorate's %d..%d", t.Device, dirWord(ingress), kbit, d.MinKbit, d.MaxKbit)
			}
			if kbit == t.RateKbit {
				continue
			}
			nt, err := plan.Rerate(&st.Queue, plan.Env{MTU: mtu}, ingress, kbit)
			if err != nil {
				return err.Error()
			}
			if ingress {
				in := *p.Ingress
				in.Shaper = nt
				p.Ingress = &in
			} else {
				p.Egress = nt
			}
		}
		return ""
	})
}

func dirWord(ingress bool) string {
	if ingress {
		return "download"
	}
	return "upload"
}
