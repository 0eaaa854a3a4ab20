// Package linklayer tells an ATM line (AAL5 cells of 48 payload bytes in
// 53) from an Ethernet or PTM one by how the round-trip time of an idle
// line grows with packet size, the way Sebastian Moeller's ATM overhead
// detector does: on ATM the delay climbs in steps, one step each time the
// packet plus its per-packet overhead crosses a multiple of 48 bytes, so
// where the steps fall tells the overhead; on other framings the delay is
// a straight line in the size and says nothing about the overhead.
//
// The core (Detect, Suggest) is pure and OS-independent; Probe sends the
// ICMP echoes that feed it.
package linklayer

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"time"
)

// Sample is one answered probe: the IP packet's size in bytes (the same
// both ways for an echo) and its round-trip time.
type Sample struct {
	Size int           `json:"size"`
	RTT  time.Duration `json:"rtt_ns"`
}

// Point is one packet size reduced to a single delay: a low percentile of
// its samples, because queueing on the path only ever adds delay, so the
// low end is what serialisation alone costs.
type Point struct {
	Size    int     `json:"size"`
	DelayUs float64 `json:"delay_us"`
	N       int     `json:"n"`
}

// Verdict values of Result.LinkLayer.
const (
	ATM      = "atm"
	Ethernet = "ethernet" // a straight line: Ethernet, PTM, DOCSIS, fibre
	Unknown  = "unknown"  // the data cannot tell; see Result.Reason
)

// Options tune Detect; the zero value uses the defaults.
type Options struct {
	// Percentile of each size's samples kept as its delay (default 10).
	Percentile float64
	// MinF is the F statistic one model must reach over the other before
	// it is believed: the drop in residual it brings, in units of the
	// residual variance per point, (RSS_other − RSS_it) / (RSS_it/(n−k))
	// (default 20). It grows with the number of sizes, so more data can
	// resolve a smaller step. On pure noise the best of the 48 staircases
	// reaches at most 4.4 over 400 synthetic runs (the line over the best
	// staircase 2.0), but on an Ethernet line in the VM, whose timing noise
	// is neither Gaussian nor independent, 7.8; clear ATM lines there give
	// 40 and more.
	MinF float64
	// OverheadLow is where the window of reported ATM overheads starts
	// (default 6); see Result.Overhead.
	OverheadLow int
}

func (o Options) withDefaults() Options {
	if o.Percentile == 0 {
		o.Percentile = 10
	}
	if o.MinF == 0 {
		o.MinF = 20
	}
	if o.OverheadLow == 0 {
		o.OverheadLow = 6
	}
	return o
}

// Fit is one model's least-squares line delay = A + B*x, where x is the
// size in bytes for the straight line and the bytes of cells on the wire
// (53 per cell) for a staircase.
type Fit struct {
	Overhead int     `json:"overhead,omitempty"` // staircases only
	AUs      float64 `json:"a_us"`
	BUs      float64 `json:"b_us"` // µs per byte on the wire
	RSS      float64 `json:"rss_us2"`
}

// Result is Detect's verdict and the numbers behind it.
type Result struct {
	LinkLayer string `json:"linklayer"`
	// Overhead is the ATM per-packet overhead in bytes (cake's meaning:
	// added to the IP packet before it is cut into cells). Step positions
	// only show it modulo 48: overhead o and o+48 give the same steps, one
	// cell later, and the extra cell hides in the unknown base RTT. The
	// value reported is the one in [OverheadLow, OverheadLow+47]: every
	// real ATM encapsulation carries the 8-byte AAL5 trailer, so less than
	// 6 is implausible, and cake's largest ATM keyword ("conservative")
	// is 48, plus 4 for a VLAN tag; Alternative is the other reading.
	// Zero for non-ATM: the overhead is not measurable that way.
	Overhead    int `json:"overhead"`
	OverheadMod int `json:"overhead_mod48"`
	Alternative int `json:"overhead_alternative,omitempty"`
	// OverheadSpread is how far (bytes, circular mod 48) overheads whose
	// fit is within 10 % of the best one reach: the overhead's uncertainty.
	OverheadSpread int `json:"overhead_spread"`
	// Ratio is the straight line's residual over the best staircase's:
	// well above 1 is ATM, well below 1 a straight line, near 1 unsure.
	Ratio float64 `json:"ratio"`
	// FATM is the F statistic of the best staircase over the line and
	// FLine that of the line over the staircase (see Options.MinF); FOverhead
	// that of the best overhead over the best one more than 4 bytes away.
	FATM      float64 `json:"f_atm"`
	FLine     float64 `json:"f_line"`
	FOverhead float64 `json:"f_overhead"`
	// Margin is the residual of the best staircase more than 4 bytes (mod
	// 48) from the best one over the best's: how clearly the overhead
	// stands out.
	Margin float64 `json:"margin"`
	// StepUs (ATM) is the RTT added per cell and ByteUs (line) per byte;
	// both directions add up in an echo's round trip, so RateBits, derived
	// from them, is 1/(1/down+1/up) of the two line rates, not either one.
	StepUs   float64 `json:"step_us,omitempty"`
	ByteUs   float64 `json:"byte_us"`
	RateBits float64 `json:"rate_bits"`
	// NoiseUs is the residual deviation of the better model: the timing
	// noise left after taking the percentile.
	NoiseUs float64 `json:"noise_us"`
	Sure    bool    `json:"sure"`
	Reason  string  `json:"reason"`
	Line    Fit     `json:"line"`
	Stair   Fit     `json:"stair"`
	Points  []Point `json:"points,omitempty"`
}

// cell is an ATM cell's payload and its size on the wire.
const (
	cellPayload = 48
	cellWire    = 53
)

// Reduce groups samples by size and keeps the percentile p (0..100) of
// each group's RTTs, in µs, sorted by size.
func Reduce(samples []Sample, p float64) []Point {
	by := map[int][]float64{}
	for _, s := range samples {
		if s.RTT <= 0 || s.Size <= 0 {
			continue
		}
		by[s.Size] = append(by[s.Size], float64(s.RTT)/float64(time.Microsecond))
	}
	pts := make([]Point, 0, len(by))
	for size, v := range by {
		slices.Sort(v)
		i := int(math.Floor(p / 100 * float64(len(v)-1)))
		pts = append(pts, Point{Size: size, DelayUs: v[i], N: len(v)})
	}
	slices.SortFunc(pts, func(a, b Point) int { return a.Size - b.Size })
	return pts
}

// fitLine is the least-squares line through (x, y).
func fitLine(x, y []float64) (a, b, rss float64) {
	n := float64(len(x))
	var sx, sy float64
	for i := range x {
		sx += x[i]
		sy += y[i]
	}
	mx, my := sx/n, sy/n
	var sxx, sxy float64
	for i := range x {
		sxx += (x[i] - mx) * (x[i] - mx)
		sxy += (x[i] - mx) * (y[i] - my)
	}
	if sxx > 0 {
		b = sxy / sxx
	}
	a = my - b*mx
	for i := range x {
		r := y[i] - a - b*x[i]
		rss += r * r
	}
	return a, b, rss
}

func cells(size, overhead int) int { return (size + overhead + cellPayload - 1) / cellPayload }

// Detect fits a straight line and, for each overhead 0..47, an ATM
// staircase to the samples, and says which explains them, with what
// overhead and how sure it is. It needs sizes spanning at least two
// cells; an error says what is missing.
func Detect(samples []Sample, o Options) (Result, error) {
	o = o.withDefaults()
	if o.Percentile < 0 || o.Percentile > 100 {
		return Result{}, fmt.Errorf("linklayer: percentile %v outside 0..100", o.Percentile)
	}
	pts := Reduce(samples, o.Percentile)
	if len(pts) < 8 {
		return Result{}, fmt.Errorf("linklayer: %d distinct packet sizes answered; need at least 8 (better 100+), spanning 2 or more cells of 48 bytes", len(pts))
	}
	if span := pts[len(pts)-1].Size - pts[0].Size; span < 2*cellPayload {
		return Result{}, fmt.Errorf("linklayer: sizes %d..%d span %d bytes; need at least %d (two ATM cells) to see the steps", pts[0].Size, pts[len(pts)-1].Size, span, 2*cellPayload)
	}
	x := make([]float64, len(pts))
	y := make([]float64, len(pts))
	for i, p := range pts {
		x[i], y[i] = float64(p.Size), p.DelayUs
	}
	res := Result{Points: pts}
	res.Line.AUs, res.Line.BUs, res.Line.RSS = fitLine(x, y)

	var rss [cellPayload]float64
	var fits [cellPayload]Fit
	best := 0
	for ov := range cellPayload {
		for i, p := range pts {
			x[i] = float64(cellWire * cells(p.Size, ov))
		}
		a, b, r := fitLine(x, y)
		fits[ov] = Fit{Overhead: ov, AUs: a, BUs: b, RSS: r}
		if b <= 0 { // a staircase that falls is no serialisation delay
			r = math.Inf(1)
		}
		rss[ov] = r
		if r < rss[best] {
			best = ov
		}
	}
	res.Stair = fits[best]
	res.OverheadMod = best
	second := math.Inf(1)
	for ov := range cellPayload {
		d := circDist(ov, best)
		if d > 4 && rss[ov] < second {
			second = rss[ov]
		}
		if rss[ov] <= rss[best]*1.1 && d > res.OverheadSpread {
			res.OverheadSpread = d
		}
	}
	res.Margin = ratio(second, rss[best])
	res.Ratio = ratio(res.Line.RSS, rss[best])
	n := float64(len(pts))
	res.FATM = fstat(res.Line.RSS, rss[best], n-3)
	res.FLine = fstat(rss[best], res.Line.RSS, n-2)
	res.FOverhead = fstat(second, rss[best], n-3)
	res.ByteUs = res.Line.BUs

	switch {
	case res.FATM >= o.MinF && res.Stair.BUs > 0:
		res.LinkLayer = ATM
		res.Overhead = best
		if best < o.OverheadLow {
			res.Overhead += cellPayload
		}
		res.Alternative = res.Overhead + cellPayload
		if res.Overhead >= cellPayload {
			res.Alternative = res.Overhead - cellPayload
		}
		res.StepUs = res.Stair.BUs * cellWire
		res.ByteUs = res.Stair.BUs
		res.NoiseUs = math.Sqrt(rss[best] / (n - 3))
		res.Sure = res.FOverhead >= o.MinF
		if res.Sure {
			res.Reason = fmt.Sprintf("delay climbs in 48-byte steps of %.1f µs (F %.0f over a straight line, %.1fx less residual); overhead %d (mod 48: %d) beats any more than 4 bytes away (F %.0f)", res.StepUs, res.FATM, res.Ratio, res.Overhead, best, res.FOverhead)
		} else {
			res.Reason = fmt.Sprintf("delay climbs in 48-byte steps of %.1f µs (F %.0f over a straight line), but overheads up to %d bytes away fit nearly as well (F %.1f, need %.0f): the overhead is not sure", res.StepUs, res.FATM, res.OverheadSpread, res.FOverhead, o.MinF)
		}
	case res.FLine >= o.MinF && res.Line.BUs > 0:
		res.LinkLayer = Ethernet
		res.NoiseUs = math.Sqrt(res.Line.RSS / (n - 2))
		res.Sure = true
		res.Reason = fmt.Sprintf("delay grows in a straight line, %.4f µs per byte (F %.0f over the best ATM staircase). The per-packet overhead of a non-ATM line cannot be seen in idle delays", res.ByteUs, res.FLine)
	default:
		res.LinkLayer = Unknown
		res.NoiseUs = math.Sqrt(math.Min(res.Line.RSS, res.Stair.RSS) / (n - 3))
		res.Reason = fmt.Sprintf("not sure: the straight line and the best ATM staircase fit about equally (F %.1f for ATM, %.1f for a line; need %.0f); a cell's serialisation (%.1f µs at the fitted rate) is lost in %.1f µs of timing noise: send more echoes per size, or the line is too fast to tell this way", res.FATM, res.FLine, o.MinF, math.Max(res.Line.BUs, 0)*cellWire, res.NoiseUs)
	}
	if res.ByteUs > 0 {
		res.RateBits = 8 / res.ByteUs * 1e6
	}
	return res, nil
}

func circDist(a, b int) int {
	d := (a - b + cellPayload) % cellPayload
	return min(d, cellPayload-d)
}

// fstat is (worse − better) / (better/dof): how much better fits, in units
// of its own residual variance per point; capped like ratio.
func fstat(worse, better, dof float64) float64 {
	switch {
	case math.IsInf(worse, 1) && math.IsInf(better, 1):
		return 0
	case math.IsInf(worse, 1):
		return maxRatio
	case math.IsInf(better, 1):
		return -maxRatio
	case better <= 0 && worse <= 0:
		return 0
	case better <= 0:
		return maxRatio
	}
	return math.Max(math.Min((worse-better)/(better/dof), maxRatio), -maxRatio)
}

// maxRatio caps ratios so that a perfect fit (noise-free data) stays a
// finite number JSON can carry.
const maxRatio = 1e9

// ratio is num/den, capped at maxRatio.
func ratio(num, den float64) float64 {
	switch {
	case math.IsInf(num, 1) && math.IsInf(den, 1), num <= 0 && den <= 0:
		return 1
	case math.IsInf(den, 1):
		return 0
	case den <= 0 || num/den > maxRatio:
		return maxRatio
	}
	return num / den
}

// ErrNoSamples is returned by Probe when no echo was answered.
var ErrNoSamples = errors.New("linklayer: no echo was answered")
