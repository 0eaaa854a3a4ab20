package linklayer

import (
	"math"
	"math/rand/v2"
	"time"
)

// model is a synthetic idle line: echo RTTs of an ATM or straight-line
// framing with both directions' serialisation, timing jitter and the odd
// queueing spike, to check the detector against a known truth.
type model struct {
	atm           bool
	overhead      int
	downBits      float64
	upBits        float64
	base          time.Duration
	jitterUs      float64 // mean of exponential jitter added to every sample
	spikeP        float64 // probability of a queueing spike
	spikeUs       float64 // its mean size
	lo, hi, perSz int     // sizes lo..hi, perSz samples each
	seed1, seed2  uint64
}

// wire is the bytes the line spends on an IP packet of size bytes.
func (m model) wire(size int) float64 {
	l := size + m.overhead
	if m.atm {
		return float64(cells(size, m.overhead) * cellWire)
	}
	return float64(l)
}

func (m model) samples() []Sample {
	r := rand.New(rand.NewPCG(m.seed1, m.seed2))
	var out []Sample
	for sz := m.lo; sz <= m.hi; sz++ {
		ser := m.wire(sz) * 8 * (1/m.downBits + 1/m.upBits) * 1e6 // µs
		for range m.perSz {
			us := float64(m.base/time.Microsecond) + ser + r.ExpFloat64()*m.jitterUs
			if r.Float64() < m.spikeP {
				us += r.ExpFloat64() * m.spikeUs
			}
			out = append(out, Sample{Size: sz, RTT: time.Duration(math.Round(us * 1000))})
		}
	}
	r.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	return out
}
