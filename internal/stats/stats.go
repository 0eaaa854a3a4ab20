// Package stats turns latency samples into the summary people compare
// between tools: min, percentiles, mean, max and loss, plus the two verdicts
// used for bufferbloat (the DSLReports letter grade on induced latency and
// the RPM responsiveness band). It is pure arithmetic: no I/O, no clocks.
package stats

import (
	"math"
	"sort"
	"time"
)

// Summary describes one set of round-trip samples. Durations are in
// milliseconds because that is how every tool people compare with prints
// them. Count is the number of answered probes; Sent includes lost ones.
// With no answered probe all latency fields are zero and LossPct says why.
type Summary struct {
	MinMs    float64 `json:"min_ms"`
	P10Ms    float64 `json:"p10_ms"`
	MedianMs float64 `json:"median_ms"`
	MeanMs   float64 `json:"mean_ms"`
	P90Ms    float64 `json:"p90_ms"`
	P99Ms    float64 `json:"p99_ms"`
	MaxMs    float64 `json:"max_ms"`
	Count    int     `json:"count"`
	Sent     int     `json:"sent"`
	LossPct  float64 `json:"loss_pct"`
}

// Summarize computes a Summary of the answered samples rtts (ms) out of sent
// probes. sent smaller than len(rtts) is treated as len(rtts). rtts is not
// modified.
func Summarize(rtts []float64, sent int) Summary {
	if sent < len(rtts) {
		sent = len(rtts)
	}
	s := Summary{Count: len(rtts), Sent: sent}
	if sent > 0 {
		s.LossPct = 100 * float64(sent-len(rtts)) / float64(sent)
	}
	if len(rtts) == 0 {
		return s
	}
	v := append([]float64(nil), rtts...)
	sort.Float64s(v)
	var sum float64
	for _, x := range v {
		sum += x
	}
	s.MinMs = v[0]
	s.MaxMs = v[len(v)-1]
	s.MeanMs = sum / float64(len(v))
	s.P10Ms = Percentile(v, 10)
	s.MedianMs = Percentile(v, 50)
	s.P90Ms = Percentile(v, 90)
	s.P99Ms = Percentile(v, 99)
	return s
}

// Percentile returns the p-th percentile (0..100) of sorted values by linear
// interpolation between closest ranks (Hyndman & Fan type 7, numpy's
// default), so results match what people get from numpy or R. It is a real
// percentile, unlike betterspeedtest's "10pct" which is always the second
// smallest sample. sorted must be in ascending order; empty input gives NaN.
func Percentile(sorted []float64, p float64) float64 {
	n := len(sorted)
	if n == 0 {
		return math.NaN()
	}
	if p <= 0 {
		return sorted[0]
	}
	if p >= 100 {
		return sorted[n-1]
	}
	h := (float64(n) - 1) * p / 100
	lo := math.Floor(h)
	i := int(lo)
	if i+1 >= n {
		return sorted[n-1]
	}
	return sorted[i] + (h-lo)*(sorted[i+1]-sorted[i])
}

// Grade is the DSLReports bufferbloat grade for an induced latency (loaded
// minus idle) in ms: A+ < 5, A < 30, B < 60, C < 200, D < 400, F otherwise.
// Negative induced latency (noise on an idle link) counts as A+.
func Grade(inducedMs float64) string {
	switch {
	case math.IsNaN(inducedMs):
		return "?"
	case inducedMs < 5:
		return "A+"
	case inducedMs < 30:
		return "A"
	case inducedMs < 60:
		return "B"
	case inducedMs < 200:
		return "C"
	case inducedMs < 400:
		return "D"
	}
	return "F"
}

// RPM is round trips per minute for a round-trip time in ms (60000/rtt), the
// responsiveness metric of draft-ietf-ippm-responsiveness. A non-positive
// rtt gives 0 (unknown).
func RPM(rttMs float64) float64 {
	if !(rttMs > 0) {
		return 0
	}
	return 60000 / rttMs
}

// RPMBand names the responsiveness band of the IETF draft: Poor < 300,
// Fair < 1000, Good < 6000, Excellent otherwise; "" for an unknown (0) RPM.
func RPMBand(rpm float64) string {
	switch {
	case !(rpm > 0):
		return ""
	case rpm < 300:
		return "Poor"
	case rpm < 1000:
		return "Fair"
	case rpm < 6000:
		return "Good"
	}
	return "Excellent"
}

// Timed is one probe of a load: when it was sent, counted from the start
// of the load, and its round trip (RTTMs is 0 and Lost set if it never
// came back).
type Timed struct {
	T     time.Duration
	RTTMs float64
	Lost  bool
}

// SummarizeTimed is Summarize over the probes of ts sent in [from, to).
func SummarizeTimed(ts []Timed, from, to time.Duration) Summary {
	var rtts []float64
	sent := 0
	for _, s := range ts {
		if s.T < from || s.T >= to {
			continue
		}
		sent++
		if !s.Lost {
			rtts = append(rtts, s.RTTMs)
		}
	}
	return Summarize(rtts, sent)
}
