// Package tune finds the shaper rates that keep latency under load below a
// target at the most throughput, the procedure seed 004's author ran by
// hand: measure the idle path, the unshaped line per direction, then a
// coarse sweep of shaper rates and a bisection around the knee where
// latency breaks, a repeated reference point to notice that the line
// itself changed, and a check with both directions loaded at once.
//
// The package never touches the kernel or the network: everything goes
// through a Measurer, so the procedure is tested against a simulated link
// (SimLink) and driven for real by the CLI and the lab.
package tune

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sort"
	"strings"
	"time"

	"sqm/internal/linklayer"
	"sqm/internal/stats"
)

// Dir is the direction a point loads.
type Dir string

const (
	Down Dir = "down"
	Up   Dir = "up"
	Both Dir = "both"
)

// Shaping is what the shaper is set to, in kbit/s per direction; 0 means
// no shaping in that direction (the line alone).
type Shaping struct {
	DownKbit int
	UpKbit   int
}

// Measurement is one point under load: goodput per direction (0 for an
// unloaded direction) and the latency probes sent during the load, timed
// from its start (tune sets the start burst apart from them, see
// Options.MaxWarmup).
type Measurement struct {
	DownKbit float64
	UpKbit   float64
	Samples  []stats.Timed
}

// Measurer is how tune changes the shaper and measures. Implementations
// hold the link: a real one shapes an interface and runs a bloat test
// against a server, the simulated one computes.
type Measurer interface {
	// Shape sets the shaper to s; a 0 rate lifts shaping in its direction.
	Shape(ctx context.Context, s Shaping) error
	// Idle measures round-trip latency with no load.
	Idle(ctx context.Context) (stats.Summary, error)
	// Load measures with load in dir (Down, Up or Both).
	Load(ctx context.Context, dir Dir) (Measurement, error)
}

// FramingMeasurer is a Measurer that can also find the line's framing
// (ICMP echoes of many sizes on the idle line, internal/linklayer) and
// shape with a framing other than the one it was configured with. Tune
// uses it when Options.Detect is set.
type FramingMeasurer interface {
	Measurer
	// DetectLinkLayer probes the idle line; the shaping is lifted then.
	DetectLinkLayer(ctx context.Context) (linklayer.Result, error)
	// SetFraming makes every later Shape account packets as sqm's
	// linklayer (none, ethernet, atm) with overhead bytes each.
	SetFraming(linklayer string, overhead int)
}

// Profiles name induced-latency targets (ms) by what the line is for. The
// bands follow the bufferbloat grades: gaming keeps queueing to about a
// frame at 100 Hz, balanced inside grade A (< 30 ms), throughput inside B.
var Profiles = map[string]float64{
	"gaming":     10,
	"balanced":   30,
	"throughput": 60,
}

// DefaultProfile is the profile used when neither a profile nor a target
// is given.
const DefaultProfile = "balanced"

// Options steer a run. The zero value of each field means its default.
type Options struct {
	// TargetMs is the highest induced latency (loaded p90 minus idle
	// median) accepted; if 0, Profile's target.
	TargetMs float64
	Profile  string
	// Linklayer and Overhead are the configured framing (sqm's linklayer
	// none, ethernet or atm, and bytes per packet): what the shaper
	// accounts unless Detect replaces them.
	Linklayer string
	Overhead  int
	// Detect finds the framing first, on the idle line, and shapes with
	// what it finds (see Framing); the Measurer must then be a
	// FramingMeasurer.
	Detect bool
	// Coarse are the rates of the coarse sweep as fractions of the
	// unshaped goodput, ascending. Shaper rates count framing that goodput
	// does not, so the knee lies above 1 (about 1.06 for Ethernet, 1.2 for
	// ATM with large overhead).
	Coarse []float64
	// Resolution ends the bisection when the gap between the highest
	// passing and the lowest failing rate is at most this fraction.
	Resolution float64
	// ChangedPct is how far (percent) the reference point's goodput may
	// move between its two measurements before the line counts as changed.
	ChangedPct float64
	// MinKbit is the lowest rate tried.
	MinKbit int
	// MaxWarmup bounds the start of each point's load that is set aside
	// as its start burst (default: half the load). The start of a load is
	// an event of its own: TCP's slow start overshoots a shaper that sits
	// behind the bottleneck (a download shaper on an IFB) into the modem's
	// FIFO, which then drains at the line rate less the shaper's, for a
	// second on a fast line and several on a slow one with a deep FIFO.
	// A minute-long test hardly sees it in its p90; a point of a few
	// seconds would mostly measure it. The burst ends at the first probe,
	// at least minWarmup into the load, whose round trip is back within
	// the target of the idle median; a point whose latency never comes
	// back is judged by the rest of its load after MaxWarmup, and misses.
	MaxWarmup time.Duration
	// Budget is how long the run may take (default DefaultBudget; negative:
	// no bound). The points that make the answer (idle, unshaped, coarse
	// sweep, reference, the first both-loaded check) always run; a point
	// that only refines it (bisection, measuring a choice below the
	// highest pass, the search for a lower pair with both loaded) is
	// skipped when it and the required points still to come would end past
	// the budget, each counted as long as the longest point so far, and
	// tune keeps the side known to pass, with a note.
	Budget time.Duration
	// Progress, if set, gets one line per step.
	Progress func(string)
	// OnStep, if set, is told where the run is as each step begins: for a
	// progress display (the web page's), which cannot parse lines.
	OnStep func(Step)
	// Now is the clock for Seconds (default time.Now).
	Now func() time.Time
}

// Step is where a run is: the phase ("idle", "linklayer", or the role of
// the point being measured), that point's direction and shaping, and how
// far along the run is. Expected is an estimate (the points a direction
// takes depend on where its knee lies and on the budget), never below
// Done+1 while the run goes on.
type Step struct {
	Phase    string
	Dir      Dir // "" for idle and linklayer
	DownKbit int // the shaping being measured; 0 unshaped
	UpKbit   int
	Done     int // points measured so far
	Expected int
	Elapsed  time.Duration
	Budget   time.Duration // negative: none
}

// typicalDirPoints is about how many points one direction takes: the
// unshaped point, some five of the coarse sweep up to the knee, four of
// bisection to the resolution, and the reference point again (the lab's
// runs took 25 to 35 points for both directions and the check with both
// loaded).
const typicalDirPoints = 11

// DefaultBudget bounds a run to what a user waits for at a prompt: on the
// lab's links a full run measured 200-325 s, the longest on slow ATM
// lines whose both-loaded search found nothing to improve.
const DefaultBudget = 5 * time.Minute

// maxCoarse is how far above the unshaped goodput the sweep goes on when
// every coarse rate passed.
const maxCoarse = 3.0

// DefaultCoarse is the coarse sweep, as fractions of unshaped goodput.
var DefaultCoarse = []float64{0.8, 0.9, 1.0, 1.1, 1.2, 1.3, 1.45}

// Target resolves the induced-latency target of o.
func (o Options) Target() (float64, error) {
	if o.TargetMs < 0 || math.IsNaN(o.TargetMs) || math.IsInf(o.TargetMs, 0) {
		return 0, fmt.Errorf("tune: target %v ms: give a positive number of milliseconds", o.TargetMs)
	}
	if o.TargetMs > 0 {
		return o.TargetMs, nil
	}
	p := o.Profile
	if p == "" {
		p = DefaultProfile
	}
	t, ok := Profiles[p]
	if !ok {
		return 0, fmt.Errorf("tune: unknown profile %q (gaming, balanced or throughput)", p)
	}
	return t, nil
}

// Roles of points.
const (
	RoleUnshaped  = "unshaped"  // shaping lifted: the line's capacity and its own bloat
	RoleSweep     = "sweep"     // coarse sweep
	RoleBisect    = "bisect"    // bisection around the knee
	RoleReference = "reference" // the reference point measured again
	RoleValidate  = "validate"  // both directions loaded at the chosen rates
)

// Point is one measured rate. It is an element of the "points" array of
// the tune JSON object.
type Point struct {
	Role string `json:"role"`
	Dir  Dir    `json:"dir"` // the loaded direction(s)
	// Shaper setting, kbit/s; 0 = unshaped in that direction.
	DownKbit int `json:"down_kbit"`
	UpKbit   int `json:"up_kbit"`
	// Goodput measured, kbit/s.
	GoodputDownKbit float64       `json:"goodput_down_kbit"`
	GoodputUpKbit   float64       `json:"goodput_up_kbit"`
	Latency         stats.Summary `json:"latency"`
	// InducedMs is loaded p90 minus idle median: the p90 (not the median)
	// because a shaper that is slightly too fast shows first in the tail.
	// Latency and InducedMs are of the load after its start burst, which
	// lasted WarmupS seconds; StartInducedMs is the burst's induced p90.
	InducedMs      float64 `json:"induced_ms"`
	WarmupS        float64 `json:"warmup_s"`
	SteadyS        float64 `json:"steady_s"` // the load after the burst, which InducedMs covers
	StartInducedMs float64 `json:"start_induced_ms,omitempty"`
	Grade          string  `json:"grade"`
	// Pass says whether InducedMs plus the noise margin is under the target.
	Pass bool `json:"pass"`
	// Stale marks a point measured before the line changed; the choice
	// ignores it.
	Stale bool `json:"stale,omitempty"`
}

// Rate is the shaper rate of the point's loaded direction (0 unshaped).
func (p Point) Rate() int {
	if p.Dir == Up {
		return p.UpKbit
	}
	return p.DownKbit
}

// Goodput is the goodput of the point's loaded direction.
func (p Point) Goodput() float64 {
	if p.Dir == Up {
		return p.GoodputUpKbit
	}
	return p.GoodputDownKbit
}

// Result is the "tune" JSON object of the output contract (issue 12):
// download_kbit, upload_kbit, linklayer, overhead, target_ms, seconds and
// points are fixed names; the rest is added detail.
type Result struct {
	DownloadKbit int     `json:"download_kbit"`
	UploadKbit   int     `json:"upload_kbit"`
	Linklayer    string  `json:"linklayer"`
	Overhead     int     `json:"overhead"`
	TargetMs     float64 `json:"target_ms"`
	Seconds      float64 `json:"seconds"`
	Points       []Point `json:"points"`

	Profile string        `json:"profile,omitempty"`
	Idle    stats.Summary `json:"idle"`
	// Unshaped goodput per direction, kbit/s.
	CapacityDownKbit float64 `json:"capacity_down_kbit"`
	CapacityUpKbit   float64 `json:"capacity_up_kbit"`
	// Noise margins (ms) added to induced latency before comparing with
	// the target, from the reference point's two measurements.
	MarginDownMs float64 `json:"margin_down_ms"`
	MarginUpMs   float64 `json:"margin_up_ms"`
	// LineChanged says the reference point moved more than the noise allows
	// between its measurements: the line changed during the run.
	LineChanged bool `json:"line_changed"`
	// The choice per direction loaded alone, before the check with both
	// loaded lowered it (equal to the choice if it did not).
	AloneDownKbit int `json:"alone_down_kbit"`
	AloneUpKbit   int `json:"alone_up_kbit"`
	// LinklayerSource says where Linklayer and Overhead came from:
	// "configured", or "detected" (the detector's verdict is then in
	// Detection, its per-size delays left out).
	LinklayerSource string            `json:"linklayer_source"`
	Detection       *linklayer.Result `json:"linklayer_detection,omitempty"`
	Notes           []string          `json:"notes,omitempty"`
}

// ErrNoRate is returned (wrapped) when even the lowest rate tried misses
// the target in a direction.
var ErrNoRate = errors.New("no rate meets the target")

// minMarginMs is the smallest noise margin: the induced latency of two
// measurements of the same point rarely agrees better than this.
const minMarginMs = 0.5

type runner struct {
	m      Measurer
	o      Options
	target float64
	res    *Result
	// start is when the run began; longest the longest shaped point so far
	// and longestUnshaped the longest unshaped one (they drain deep queues
	// and take longer than the rest).
	start                    time.Time
	longest, longestUnshaped time.Duration
	// reserved is the time the required points still to come will take,
	// as estimated at the last checkpoint (see reserve).
	reserved time.Duration
	// outOfTime is set once a refining point was skipped for the budget.
	outOfTime bool
	// finished are the directions whose rate is chosen (for Step's estimate).
	finished map[Dir]bool
}

// reserve estimates the required points still to come while d's knee is
// refined: d's reference point unless measured (refDone), the upload's
// unshaped point, coarse sweep and reference if d is the download, and
// the first both-loaded check. The upload's sweep may run past the coarse
// steps when nothing misses; the budget then is overrun by those points.
func (r *runner) reserve(d Dir, refDone bool) {
	n := 1
	if !refDone {
		n++
	}
	var t time.Duration
	if d == Down {
		n += 1 + len(r.o.Coarse)
		t = max(r.longestUnshaped, r.longest)
	}
	r.reserved = t + time.Duration(n)*r.longest
}

// afford says whether a refining point, for what, fits in the budget; the
// first time one does not, a note says what was left undone.
func (r *runner) afford(what string) bool {
	if r.o.Budget < 0 {
		return true
	}
	elapsed := r.o.Now().Sub(r.start)
	if elapsed+r.longest+r.reserved <= r.o.Budget {
		return true
	}
	if !r.outOfTime {
		r.outOfTime = true
		r.note("time budget of %v: at %.0f s another point (up to %.0f s) and the required ones still to come (about %.0f s) would end past it; %s stopped there, keeping the side that passed",
			r.o.Budget, elapsed.Seconds(), r.longest.Seconds(), r.reserved.Seconds(), what)
	}
	return false
}

// step tells OnStep that a step begins.
func (r *runner) step(phase string, d Dir, s Shaping) {
	if r.o.OnStep == nil {
		return
	}
	done := len(r.res.Points)
	left := 1 // the check with both loaded, or the next point of its search
	for _, dir := range []Dir{Down, Up} {
		if r.finished[dir] {
			continue
		}
		n := 0
		for _, p := range r.res.Points {
			if p.Dir == dir && !p.Stale {
				n++
			}
		}
		left += max(1, typicalDirPoints-n)
	}
	r.o.OnStep(Step{Phase: phase, Dir: d, DownKbit: s.DownKbit, UpKbit: s.UpKbit, Done: done, Expected: done + left,
		Elapsed: r.o.Now().Sub(r.start), Budget: r.o.Budget})
}

func (r *runner) progress(format string, args ...any) {
	if r.o.Progress != nil {
		r.o.Progress(fmt.Sprintf(format, args...))
	}
}

func (r *runner) note(format string, args ...any) {
	s := fmt.Sprintf(format, args...)
	r.res.Notes = append(r.res.Notes, s)
	r.progress("note: %s", s)
}

// measure sets s, loads dir and records the point.
func (r *runner) measure(ctx context.Context, role string, dir Dir, s Shaping) (Point, error) {
	t0 := r.o.Now()
	defer func() {
		if role == RoleUnshaped {
			r.longestUnshaped = max(r.longestUnshaped, r.o.Now().Sub(t0))
		} else {
			r.longest = max(r.longest, r.o.Now().Sub(t0))
		}
	}()
	r.step(role, dir, s)
	if err := r.m.Shape(ctx, s); err != nil {
		return Point{}, fmt.Errorf("tune: shape %d/%d kbit/s: %w", s.DownKbit, s.UpKbit, err)
	}
	m, err := r.m.Load(ctx, dir)
	if err != nil {
		return Point{}, fmt.Errorf("tune: measure %s at %d/%d kbit/s: %w", dir, s.DownKbit, s.UpKbit, err)
	}
	start, steady, w, end := r.split(m.Samples)
	if steady.Count == 0 {
		return Point{}, fmt.Errorf("tune: measure %s at %d/%d kbit/s: no latency probe was answered under load after its first %v", dir, s.DownKbit, s.UpKbit, w)
	}
	p := Point{Role: role, Dir: dir, DownKbit: s.DownKbit, UpKbit: s.UpKbit,
		GoodputDownKbit: round1(m.DownKbit), GoodputUpKbit: round1(m.UpKbit), Latency: steady}
	p.InducedMs = round2(steady.P90Ms - r.res.Idle.MedianMs)
	p.WarmupS = round2(w.Seconds())
	p.SteadyS = round2((end - w).Seconds())
	if start.Count > 0 {
		p.StartInducedMs = round2(start.P90Ms - r.res.Idle.MedianMs)
	}
	p.Grade = stats.Grade(p.InducedMs)
	p.Pass = p.InducedMs+r.margin(dir) <= r.target
	r.res.Points = append(r.res.Points, p)
	rate := "unshaped"
	if p.Rate() > 0 || dir == Both {
		rate = fmt.Sprintf("%d kbit/s", p.Rate())
		if dir == Both {
			rate = fmt.Sprintf("%d/%d kbit/s", s.DownKbit, s.UpKbit)
		}
	}
	verdict := "over target"
	if p.Pass {
		verdict = "ok"
	}
	good := fmt.Sprintf("%.0f", p.Goodput())
	if dir == Both {
		good = fmt.Sprintf("%.0f/%.0f", p.GoodputDownKbit, p.GoodputUpKbit)
	}
	r.progress("%-9s %-4s %-16s goodput %9s kbit/s  p90 %7.1f ms  induced %7.1f ms  %s", role, dir, rate, good, p.Latency.P90Ms, p.InducedMs, verdict)
	return p, nil
}

// minWarmup is the least of a load set aside as its start: the first
// round trips of slow start, before the queue it builds shows.
const minWarmup = time.Second

// split sets a point's start burst apart from the rest of its load (see
// Options.MaxWarmup) and says where it ended (w) and where the load did.
func (r *runner) split(ss []stats.Timed) (start, steady stats.Summary, w, end time.Duration) {
	for _, s := range ss {
		end = max(end, s.T)
	}
	maxW := r.o.MaxWarmup
	if maxW <= 0 {
		maxW = end / 2
	}
	w = maxW
	back := r.res.Idle.MedianMs + r.target
	for _, s := range ss {
		if s.T >= minWarmup && s.T < w && !s.Lost && s.RTTMs <= back {
			w = s.T
		}
	}
	return stats.SummarizeTimed(ss, 0, w), stats.SummarizeTimed(ss, w, end+1), w, end
}

func (r *runner) margin(d Dir) float64 {
	switch d {
	case Down:
		return r.res.MarginDownMs
	case Up:
		return r.res.MarginUpMs
	}
	return max(r.res.MarginDownMs, r.res.MarginUpMs)
}

func (r *runner) setMargin(d Dir, v float64) {
	if d == Down {
		r.res.MarginDownMs = v
	} else {
		r.res.MarginUpMs = v
	}
}

func shaping(d Dir, rate int) Shaping {
	if d == Up {
		return Shaping{UpKbit: rate}
	}
	return Shaping{DownKbit: rate}
}

// Run tunes both directions and returns the result. The shaper is left at
// whatever was measured last; restoring the user's shaping is the caller's
// job (it knows what that was). On error the partial result is returned
// with it, so a caller can still show what was measured.
func Run(ctx context.Context, m Measurer, o Options) (*Result, error) {
	target, err := o.Target()
	if err != nil {
		return nil, err
	}
	if o.Coarse == nil {
		o.Coarse = DefaultCoarse
	}
	if len(o.Coarse) == 0 || !sort.Float64sAreSorted(o.Coarse) || o.Coarse[0] <= 0 {
		return nil, fmt.Errorf("tune: coarse sweep %v: give positive ascending fractions", o.Coarse)
	}
	if o.Resolution <= 0 {
		o.Resolution = 0.01
	}
	if o.ChangedPct <= 0 {
		o.ChangedPct = 5
	}
	if o.MinKbit <= 0 {
		o.MinKbit = 64
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Budget == 0 {
		o.Budget = DefaultBudget
	}
	start := o.Now()
	fm, canDetect := m.(FramingMeasurer)
	if o.Detect && !canDetect {
		return nil, errors.New("tune: link-layer detection asked for, but this link cannot probe it")
	}
	res := &Result{Linklayer: o.Linklayer, Overhead: o.Overhead, LinklayerSource: "configured", TargetMs: target, Points: []Point{}}
	if o.TargetMs == 0 {
		res.Profile = o.Profile
		if res.Profile == "" {
			res.Profile = DefaultProfile
		}
	}
	r := &runner{m: m, o: o, target: target, res: res, start: start, finished: map[Dir]bool{}}
	defer func() { res.Seconds = math.Round(o.Now().Sub(start).Seconds()*10) / 10 }()

	if err := m.Shape(ctx, Shaping{}); err != nil {
		return res, fmt.Errorf("tune: lift shaping: %w", err)
	}
	if o.Detect {
		r.step("linklayer", "", Shaping{})
		if err := r.detect(ctx, fm); err != nil {
			return res, err
		}
	}
	r.step("idle", "", Shaping{})
	if res.Idle, err = m.Idle(ctx); err != nil {
		return res, fmt.Errorf("tune: idle baseline: %w", err)
	}
	if res.Idle.Count == 0 {
		return res, errors.New("tune: idle baseline: no probe was answered")
	}
	r.progress("idle      median %.1f ms, p90 %.1f ms (%d probes)", res.Idle.MedianMs, res.Idle.P90Ms, res.Idle.Count)

	chosen := map[Dir]int{}
	for _, d := range []Dir{Down, Up} {
		rate, err := r.direction(ctx, d)
		if err != nil {
			return res, err
		}
		chosen[d] = rate
		r.finished[d] = true
	}
	res.DownloadKbit, res.UploadKbit = chosen[Down], chosen[Up]
	res.AloneDownKbit, res.AloneUpKbit = chosen[Down], chosen[Up]
	if err := r.validate(ctx); err != nil {
		return res, err
	}
	return res, nil
}

// detect probes the idle line's framing and sets the shaper's from it.
func (r *runner) detect(ctx context.Context, fm FramingMeasurer) error {
	r.progress("linklayer probing the idle line with echoes of many sizes")
	det, err := fm.DetectLinkLayer(ctx)
	if err != nil {
		return fmt.Errorf("tune: link-layer detection: %w", err)
	}
	f := Framing(det, r.o.Linklayer, r.o.Overhead)
	det.Points = nil // the per-size delays are the detector's evidence, not tune's
	r.res.Detection = &det
	r.res.Linklayer, r.res.Overhead, r.res.LinklayerSource = f.Linklayer, f.Overhead, f.Source
	sure := "sure"
	if !det.Sure {
		sure = "not sure"
	}
	r.progress("linklayer %s (%s): shaping as %s, overhead %d (%s)", det.LinkLayer, sure, f.Linklayer, f.Overhead, f.Source)
	if f.Note != "" {
		r.note("%s", f.Note)
	}
	fm.SetFraming(f.Linklayer, f.Overhead)
	return nil
}

// FramingChoice is what Framing decided the shaper accounts, and why when
// the verdict overrode or could not settle the configuration: the user
// reads it in the notes.
type FramingChoice struct {
	Linklayer string // sqm's linklayer: none, ethernet or atm
	Overhead  int
	Source    string // "detected" or "configured"
	Note      string // why, when the verdict and the configuration disagree or the verdict is unsure
}

// Framing decides what the shaper accounts, from the detector's verdict
// and the configured linklayer and overhead. ATM is taken with the
// overhead measured; a straight line keeps the configured overhead (idle
// delays cannot show a non-ATM overhead), but not a configured ATM; an
// unknown verdict keeps the configuration.
func Framing(det linklayer.Result, ll string, overhead int) FramingChoice {
	switch det.LinkLayer {
	case linklayer.ATM:
		f := FramingChoice{Linklayer: "atm", Overhead: det.Overhead, Source: "detected"}
		if !det.Sure {
			f.Note = fmt.Sprintf("link layer: ATM, but the overhead is not sure (overheads up to %d bytes from %d fit nearly as well); check it with 'sqm tune --linklayer' on a quieter line", det.OverheadSpread, det.Overhead)
		}
		if ll == "atm" && overhead != det.Overhead {
			f.Note = strings.TrimSpace(f.Note + fmt.Sprintf(" link layer: configured atm overhead %d, measured %d (mod 48 the steps show %d); shaping with the measured one", overhead, det.Overhead, det.OverheadMod))
		}
		return f
	case linklayer.Ethernet:
		f := FramingChoice{Linklayer: ll, Overhead: overhead, Source: "detected"}
		if ll == "atm" {
			f.Linklayer = "ethernet"
			f.Note = fmt.Sprintf("link layer: configured atm, but the line shows no ATM cells; shaping as ethernet with the configured overhead %d", overhead)
		}
		return f
	}
	return FramingChoice{Linklayer: ll, Overhead: overhead, Source: "configured",
		Note: "link layer: detection could not tell (" + det.Reason + "); shaping with the configured framing"}
}

// direction measures one direction and returns the chosen rate. If the
// reference point shows that the line changed, the direction is measured
// once more from the start (the earlier points marked stale); a second
// change is reported and the second measurement kept.
func (r *runner) direction(ctx context.Context, d Dir) (int, error) {
	for attempt := 1; ; attempt++ {
		rate, changed, err := r.attempt(ctx, d)
		if err != nil || !changed || attempt == 2 {
			return rate, err
		}
		for i := range r.res.Points {
			if r.res.Points[i].Dir == d {
				r.res.Points[i].Stale = true
			}
		}
		r.setMargin(d, 0)
		r.progress("again     %s: measuring this direction once more", d)
	}
}

// attempt is one pass over direction d: the chosen rate and whether the
// line changed meanwhile.
func (r *runner) attempt(ctx context.Context, d Dir) (int, bool, error) {
	un, err := r.measure(ctx, RoleUnshaped, d, Shaping{})
	if err != nil {
		return 0, false, err
	}
	capKbit := un.Goodput()
	if d == Down {
		r.res.CapacityDownKbit = capKbit
	} else {
		r.res.CapacityUpKbit = capKbit
	}
	if capKbit <= 0 {
		return 0, false, fmt.Errorf("tune: %s: the unshaped line moved no data; is the server reachable?", d)
	}
	at := func(f float64) int { return max(r.o.MinKbit, int(math.Round(capKbit*f))) }

	// Coarse sweep, ascending, until a rate over the target follows one
	// under it.
	var ref Point
	haveRef, missed := false, false
	for _, f := range r.o.Coarse {
		p, err := r.measure(ctx, RoleSweep, d, shaping(d, at(f)))
		if err != nil {
			return 0, false, err
		}
		if !p.Pass && haveRef {
			missed = true
			break
		}
		if p.Pass {
			ref, haveRef = p, true
		}
	}
	// Every coarse rate passed: the unshaped goodput understated the line
	// (on a slow, bloated uplink TCP does not reach the line's rate within
	// one point: 324 kbit/s of a 512 kbit/s ATM line's 437 in the lab), or
	// nothing here bloats. Go on up in steps of a seventh until a rate
	// misses, up to maxCoarse times the unshaped goodput.
	for f := r.o.Coarse[len(r.o.Coarse)-1] * 8 / 7; haveRef && !missed && f <= maxCoarse; f *= 8.0 / 7 {
		p, err := r.measure(ctx, RoleSweep, d, shaping(d, at(f)))
		if err != nil {
			return 0, false, err
		}
		if !p.Pass {
			missed = true
			break
		}
		ref = p
	}
	// Even the lowest coarse rate misses: go down until one passes.
	if !haveRef {
		for rate := at(r.o.Coarse[0]) / 2; ; rate /= 2 {
			if rate < r.o.MinKbit {
				return 0, false, fmt.Errorf("tune: %s: %w (%.0f ms) down to %d kbit/s; the latency may not come from this link's queue", d, ErrNoRate, r.target, r.o.MinKbit)
			}
			p, err := r.measure(ctx, RoleSweep, d, shaping(d, rate))
			if err != nil {
				return 0, false, err
			}
			if p.Pass {
				ref, haveRef = p, true
				break
			}
		}
	}
	r.reserve(d, false)
	if err := r.bisect(ctx, d); err != nil {
		return 0, false, err
	}

	// The reference point again: the highest passing coarse rate, the one
	// nearest the knee from below, where a change of the line shows in
	// goodput and the spread of two measurements is the noise of induced
	// latency near the choice.
	again, err := r.measure(ctx, RoleReference, d, shaping(d, ref.Rate()))
	if err != nil {
		return 0, false, err
	}
	g0, g1 := ref.Goodput(), again.Goodput()
	switch {
	case g0 > 0 && math.Abs(g1-g0)/g0*100 > r.o.ChangedPct:
		r.res.LineChanged = true
		r.note("%s: the line changed during the run: at %d kbit/s goodput was %.0f then %.0f kbit/s", d, ref.Rate(), g0, g1)
		return 0, true, nil
	case again.InducedMs > r.target && again.InducedMs > 2*ref.InducedMs+minMarginMs:
		// Same goodput, latency now well over the target: the line's rate
		// fell below the reference while the shaper still fills it. (A
		// repeat just over the target is noise, which the margin absorbs.)
		r.res.LineChanged = true
		r.note("%s: the line changed during the run: at %d kbit/s induced latency was %.1f then %.1f ms", d, ref.Rate(), ref.InducedMs, again.InducedMs)
		return 0, true, nil
	}
	r.reserve(d, true)
	r.setMargin(d, round2(max(minMarginMs, math.Abs(again.InducedMs-ref.InducedMs))))
	// With the margin known, passes are re-judged and the knee narrowed
	// again if the margin moved it.
	r.rejudge()
	if err := r.bisect(ctx, d); err != nil {
		return 0, false, err
	}
	if lo, hi := r.bracket(d); lo > 0 && hi == 0 {
		r.note("%s: every rate tried passed, up to %d kbit/s (%.0f %% of the unshaped goodput): no bloat this run could provoke; the highest rate tried is chosen", d, lo, 100*float64(lo)/capKbit)
	}
	rate, ok := r.choice(d)
	// A choice kept below the highest pass was not measured: measure it,
	// so the curve shows it and a miss there (it would become the knee)
	// is not chosen.
	for range 2 {
		if lo, _ := r.bracket(d); !ok || rate >= lo || r.passedAt(d, rate) || !r.afford("measuring the choice") {
			break
		}
		if _, err := r.measure(ctx, RoleBisect, d, shaping(d, rate)); err != nil {
			return 0, false, err
		}
		rate, ok = r.choice(d)
	}
	if !ok {
		return 0, false, fmt.Errorf("tune: %s: %w (%.0f ms) with the noise margin %.1f ms", d, ErrNoRate, r.target, r.margin(d))
	}
	r.progress("chosen    %-4s %d kbit/s", d, rate)
	return rate, false, nil
}

// passedAt says a current point of d at rate passed.
func (r *runner) passedAt(d Dir, rate int) bool {
	for _, p := range r.res.Points {
		if p.Dir == d && !p.Stale && p.Rate() == rate && p.Pass {
			return true
		}
	}
	return false
}

func (r *runner) rejudge() {
	for i := range r.res.Points {
		p := &r.res.Points[i]
		p.Pass = p.InducedMs+r.margin(p.Dir) <= r.target
	}
}

// bracket is the knee of d as measured so far: hi is the lowest failing
// rate above the lowest passing one, lo the highest passing rate below hi
// (0 when none). Failures below the lowest pass are ignored: on a slow
// line a low rate can miss the target by serialisation time alone, with
// passing rates above it.
func (r *runner) bracket(d Dir) (lo, hi int) {
	first := 0
	for _, p := range r.res.Points {
		if p.Dir == d && !p.Stale && p.Rate() > 0 && p.Pass && (first == 0 || p.Rate() < first) {
			first = p.Rate()
		}
	}
	if first == 0 {
		return 0, 0
	}
	for _, p := range r.res.Points {
		if p.Dir == d && !p.Stale && p.Rate() > first && !p.Pass && (hi == 0 || p.Rate() < hi) {
			hi = p.Rate()
		}
	}
	for _, p := range r.res.Points {
		if p.Dir == d && !p.Stale && p.Rate() > 0 && p.Pass && (hi == 0 || p.Rate() < hi) && p.Rate() > lo {
			lo = p.Rate()
		}
	}
	return lo, hi
}

// choice is the highest passing rate below the knee, less the excess a
// point cannot see. A shaper faster than the line R fills the modem's
// FIFO at the excess: over a point's steady part of L seconds the queue
// grows by excess × L, which stays under the target T while the excess is
// below T/L. So a rate that passed may be up to T/L above the line
// (lo < R(1+T/L)), and the queue goes on growing after the point ends:
// the ADSL upload in the lab passed at 871 kbit/s on an 864 line (54 ms,
// 3 s of steady load, 60 ms target), then reached 145 ms in a 30 s test.
// Only lo/(1+T/L) is sure to be under the line. When nothing missed there
// is no knee to be near, and the highest pass stands.
func (r *runner) choice(d Dir) (int, bool) {
	lo, hi := r.bracket(d)
	if lo > 0 && hi > 0 {
		l := 0.0
		for _, p := range r.res.Points {
			if p.Dir == d && !p.Stale && p.Rate() == lo && p.Pass && (l == 0 || p.SteadyS < l) {
				l = p.SteadyS
			}
		}
		if l > 0 {
			lo = int(float64(lo) / (1 + r.target/1000/l))
		}
	}
	return lo, lo > 0
}

// bisect halves the gap between the highest passing and lowest failing
// rate of d until it is within the resolution.
func (r *runner) bisect(ctx context.Context, d Dir) error {
	for {
		lo, hi := r.bracket(d)
		if lo == 0 || hi == 0 || float64(hi-lo) <= r.o.Resolution*float64(lo) || hi-lo <= 1 {
			return nil
		}
		if !r.afford(fmt.Sprintf("narrowing the %s knee between %d and %d kbit/s", d, lo, hi)) {
			return nil
		}
		if _, err := r.measure(ctx, RoleBisect, d, shaping(d, (lo+hi)/2)); err != nil {
			return err
		}
	}
}

// validate loads both directions at the chosen rates. A shaper keeps a
// queue of its own in each direction and, loaded at once, both add up in
// the round trip; on a slow upload the download's ACKs also compete with
// the upload's data. When the pair misses the target, the direction that
// dominates is found by lowering each alone by a fifth; the better of the
// two, if it passes, is then narrowed by bisection on that direction's
// factor, leaving the other direction's rate as it was. If neither does,
// both are lowered together, bisecting a common factor down to
// minValidate. If even that misses, or a lower pair stops lowering the
// latency by more than the noise, the latency is not the shapers' to
// remove: the per-direction choice is kept and the user told. Out of
// budget, the search stops with the pair measured so far that passed with
// the most goodput, or the per-direction choice if none passed.
func (r *runner) validate(ctx context.Context) error {
	d0, u0 := r.res.AloneDownKbit, r.res.AloneUpKbit
	at := func(fd, fu float64) Shaping {
		return Shaping{DownKbit: int(math.Round(float64(d0) * fd)), UpKbit: int(math.Round(float64(u0) * fu))}
	}
	p, err := r.measure(ctx, RoleValidate, Both, at(1, 1))
	if err != nil || p.Pass {
		return err
	}
	r.reserved = 0
	const search = "the search for a pair that passes with both directions loaded"
	// keepBest ends the search early, out of time: the pair that passed
	// and carried the most, if one did, else the per-direction choice.
	keepBest := func() error {
		var best *Point
		for i := range r.res.Points {
			q := &r.res.Points[i]
			if q.Role == RoleValidate && q.Pass && (best == nil || q.GoodputDownKbit+q.GoodputUpKbit > best.GoodputDownKbit+best.GoodputUpKbit) {
				best = q
			}
		}
		if best == nil {
			r.note("with both directions loaded induced latency is %.1f ms at %d/%d kbit/s, with the %.1f ms noise margin over the %.0f ms target; no lower pair that passes was found in the time: the rates chosen for each direction alone are kept",
				p.InducedMs, d0, u0, r.margin(Both), r.target)
			return nil
		}
		r.res.DownloadKbit, r.res.UploadKbit = best.DownKbit, best.UpKbit
		r.note("with both directions loaded %d/%d kbit/s induced %.1f ms, with the %.1f ms noise margin over the %.0f ms target; of the pairs measured in the time, %d/%d kbit/s passed with the most goodput",
			d0, u0, p.InducedMs, r.margin(Both), r.target, best.DownKbit, best.UpKbit)
		return nil
	}
	var pd, pu Point
	for _, q := range []struct {
		pt     *Point
		fd, fu float64
	}{{&pd, validateStep, 1}, {&pu, 1, validateStep}} {
		if !r.afford(search) {
			return keepBest()
		}
		if *q.pt, err = r.measure(ctx, RoleValidate, Both, at(q.fd, q.fu)); err != nil {
			return err
		}
	}
	// scale(f) is the pair searched: one direction lowered, or both.
	var scale func(f float64) Shaping
	var lo float64
	var what string
	switch {
	case pd.Pass && (!pu.Pass || pd.InducedMs <= pu.InducedMs):
		scale, lo, what = func(f float64) Shaping { return at(f, 1) }, validateStep, "download lowered"
	case pu.Pass:
		scale, lo, what = func(f float64) Shaping { return at(1, f) }, validateStep, "upload lowered"
	default:
		scale, what = func(f float64) Shaping { return at(f, f) }, "both lowered"
		prev := p
		for _, f := range []float64{validateStep, (validateStep + minValidate) / 2, minValidate} {
			if !r.afford(search) {
				return keepBest()
			}
			q, err := r.measure(ctx, RoleValidate, Both, scale(f))
			if err != nil {
				return err
			}
			if q.Pass {
				lo = f
				break
			}
			if f == minValidate || q.InducedMs >= prev.InducedMs-r.margin(Both) {
				r.note("with both directions loaded induced latency is %.1f ms at %d/%d kbit/s and %.1f ms at %.0f %% of both, with the %.1f ms noise margin over the %.0f ms target: it does not come from the shapers' queues; the rates chosen for each direction alone are kept",
					p.InducedMs, d0, u0, q.InducedMs, 100*f, r.margin(Both), r.target)
				return nil
			}
			prev = q
		}
	}
	hi := 1.0
	for (hi-lo)/hi > 2*r.o.Resolution && r.afford(search) {
		mid := (lo + hi) / 2
		m, err := r.measure(ctx, RoleValidate, Both, scale(mid))
		if err != nil {
			return err
		}
		if m.Pass {
			lo = mid
		} else {
			hi = mid
		}
	}
	s := scale(lo)
	r.res.DownloadKbit, r.res.UploadKbit = s.DownKbit, s.UpKbit
	r.note("with both directions loaded %d/%d kbit/s induced %.1f ms, with the %.1f ms noise margin over the %.0f ms target; %s to %d/%d kbit/s",
		d0, u0, p.InducedMs, r.margin(Both), r.target, what, s.DownKbit, s.UpKbit)
	return nil
}

// validateStep is the first cut tried per direction when both loaded miss
// the target, and minValidate the lowest common factor tried.
const (
	validateStep = 0.8
	minValidate  = 0.4
)

func round1(v float64) float64 { return math.Round(v*10) / 10 }
func round2(v float64) float64 { return math.Round(v*100) / 100 }
