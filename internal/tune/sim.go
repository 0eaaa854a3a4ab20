package tune

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"time"

	"sqm/internal/linklayer"
	"sqm/internal/stats"
)

// SimLink is a simulated access line for testing tune anywhere: a
// bottleneck with a dumb FIFO of BufferPkts packets per direction, framed
// as ATM cells or Ethernet-like with a per-packet overhead, behind a shaper
// that accounts the framing it is configured with. Full-size packets only.
//
// While the shaper sends fewer packets per second than the line can carry,
// the queue sits in the shaper, whose AQM holds it near one packet's
// serialisation plus a small standing queue. Above the line's packet rate,
// the FIFO fills over a ramp of RampFrac (TCP needs a margin above the line
// before the FIFO stays full), up to BufferPkts packets.
//
// Latency samples are the base RTT, the queues of the loaded directions,
// and exponential jitter, drawn from a generator with a fixed seed so runs
// repeat exactly.
type SimLink struct {
	DownKbit, UpKbit int     // line (sync) rate, framing included
	ATM              bool    // ATM cells: 48 payload bytes in 53
	Overhead         int     // per-packet bytes the line adds
	ShaperATM        bool    // how the shaper accounts packets
	ShaperOverhead   int     //
	BufferPkts       int     // FIFO at the line, per direction
	BaseMs           float64 // base RTT
	JitterMs         float64 // mean of the exponential jitter
	RampFrac         float64 // how far above the line the FIFO takes to fill (default 0.02)
	GoodputNoise     float64 // relative standard deviation of goodput (default 0.005)
	Samples          int     // latency probes per measurement (default 200)
	PointSeconds     float64 // simulated time per measurement (default 10)
	// Drift, if set, scales the line rate as a function of the number of
	// measurements made so far: a line that changes during the run.
	Drift func(n int) float64
	Seed  uint64

	shape Shaping
	rng   *rand.Rand
	n     int
	clock time.Time
}

const (
	simMTU = 1500
	simMSS = 1448 // payload of a full-size TCP segment with timestamps
)

// wireBytes is what one full-size packet occupies under the framing.
func wireBytes(atm bool, overhead int) float64 { return frameBytes(simMTU, atm, overhead) }

// frameBytes is what an IP packet of size bytes occupies under the framing.
func frameBytes(size int, atm bool, overhead int) float64 {
	b := float64(size + overhead)
	if atm {
		return math.Ceil(b/48) * 53
	}
	return b
}

func (s *SimLink) lineKbit(d Dir) float64 {
	l := float64(s.DownKbit)
	if d == Up {
		l = float64(s.UpKbit)
	}
	if s.Drift != nil {
		l *= s.Drift(s.n)
	}
	return l
}

// linePPS and shaperPPS are full-size packets per second.
func (s *SimLink) linePPS(d Dir) float64 {
	return s.lineKbit(d) * 1000 / 8 / wireBytes(s.ATM, s.Overhead)
}

func (s *SimLink) shaperPPS(d Dir, rate int) float64 {
	if rate <= 0 {
		return math.Inf(1)
	}
	return float64(rate) * 1000 / 8 / wireBytes(s.ShaperATM, s.ShaperOverhead)
}

func (s *SimLink) ramp() float64 {
	if s.RampFrac > 0 {
		return s.RampFrac
	}
	return 0.02
}

// QueueMs is the (noise-free) queueing delay in direction d with the
// shaper at rate kbit/s (0 = unshaped).
func (s *SimLink) QueueMs(d Dir, rate int) float64 {
	line, sh := s.linePPS(d), s.shaperPPS(d, rate)
	pktMs := 1000 / math.Min(line, sh)
	if sh <= line {
		return 2 + pktMs // the shaper's AQM queue
	}
	fill := math.Min(1, (sh/line-1)/s.ramp())
	return pktMs + fill*float64(s.BufferPkts)*1000/line
}

// GoodputKbit is the noise-free goodput in direction d at rate.
func (s *SimLink) GoodputKbit(d Dir, rate int) float64 {
	return math.Min(s.linePPS(d), s.shaperPPS(d, rate)) * simMSS * 8 / 1000
}

// InducedMs is the noise-free induced latency (p90 loaded minus idle
// median) with direction d loaded alone at rate: the queue plus the p90
// less the median of the exponential jitter.
func (s *SimLink) InducedMs(d Dir, rate int) float64 {
	return s.QueueMs(d, rate) + s.JitterMs*(math.Log(10)-math.Log(2))
}

// Best is the oracle: the highest rate in direction d, to 1 kbit/s, whose
// noise-free induced latency meets target (0 if none). It scans down from
// far above the line, since below the knee induced latency falls as the
// rate rises (a packet serialises faster) and above it rises.
func (s *SimLink) Best(d Dir, target float64) int {
	for rate := 4 * int(s.lineKbit(d)); rate > 0; rate-- {
		if s.InducedMs(d, rate) <= target {
			return rate
		}
	}
	return 0
}

func (s *SimLink) init() {
	if s.rng == nil {
		s.rng = rand.New(rand.NewPCG(s.Seed, s.Seed^0x5eed))
		s.clock = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	}
}

// Now is the simulated clock: each measurement advances it by PointSeconds.
func (s *SimLink) Now() time.Time {
	s.init()
	return s.clock
}

func (s *SimLink) tick() {
	d := s.PointSeconds
	if d <= 0 {
		d = 10
	}
	s.clock = s.clock.Add(time.Duration(d * float64(time.Second)))
	s.n++
}

// Shape implements Measurer.
func (s *SimLink) Shape(_ context.Context, sh Shaping) error {
	if sh.DownKbit < 0 || sh.UpKbit < 0 {
		return fmt.Errorf("sim: negative rate %d/%d", sh.DownKbit, sh.UpKbit)
	}
	s.shape = sh
	return nil
}

// latency is a point's probes, evenly spread over its time; rounded to
// the µs, so golden files stay stable across floating-point differences
// between architectures.
func (s *SimLink) latency(queueMs float64) []stats.Timed {
	n := s.Samples
	if n <= 0 {
		n = 200
	}
	d := s.PointSeconds
	if d <= 0 {
		d = 10
	}
	ts := make([]stats.Timed, n)
	for i := range ts {
		ms := s.BaseMs + queueMs + s.rng.ExpFloat64()*s.JitterMs
		ts[i] = stats.Timed{T: time.Duration(float64(i) / float64(n) * d * float64(time.Second)), RTTMs: math.Round(ms*1000) / 1000}
	}
	return ts
}

// Idle implements Measurer.
func (s *SimLink) Idle(context.Context) (stats.Summary, error) {
	s.init()
	defer s.tick()
	ts := s.latency(0)
	return stats.SummarizeTimed(ts, 0, time.Duration(math.MaxInt64)), nil
}

// Load implements Measurer.
func (s *SimLink) Load(_ context.Context, d Dir) (Measurement, error) {
	s.init()
	defer s.tick()
	var m Measurement
	q := 0.0
	noise := s.GoodputNoise
	if noise == 0 {
		noise = 0.005
	}
	if d == Down || d == Both {
		m.DownKbit = s.GoodputKbit(Down, s.shape.DownKbit) * (1 + noise*s.rng.NormFloat64())
		q += s.QueueMs(Down, s.shape.DownKbit)
	}
	if d == Up || d == Both {
		m.UpKbit = s.GoodputKbit(Up, s.shape.UpKbit) * (1 + noise*s.rng.NormFloat64())
		q += s.QueueMs(Up, s.shape.UpKbit)
	}
	if d != Down && d != Up && d != Both {
		return m, fmt.Errorf("sim: load direction %q", d)
	}
	m.Samples = s.latency(q)
	return m, nil
}

// DetectLinkLayer implements FramingMeasurer: echoes of 60..252 bytes, 10
// each, over the idle line (both directions' serialisation of the size
// under the line's framing, plus the jitter), judged by linklayer.Detect.
func (s *SimLink) DetectLinkLayer(context.Context) (linklayer.Result, error) {
	s.init()
	var samples []linklayer.Sample
	for size := 60; size <= 252; size++ {
		ser := frameBytes(size, s.ATM, s.Overhead) * 8 * (1/float64(s.DownKbit) + 1/float64(s.UpKbit)) // ms
		for range 10 {
			ms := s.BaseMs + ser + s.rng.ExpFloat64()*s.JitterMs
			samples = append(samples, linklayer.Sample{Size: size, RTT: time.Duration(ms * float64(time.Millisecond))})
		}
	}
	return linklayer.Detect(samples, linklayer.Options{})
}

// SetFraming implements FramingMeasurer.
func (s *SimLink) SetFraming(ll string, overhead int) {
	s.ShaperATM, s.ShaperOverhead = ll == "atm", overhead
}
