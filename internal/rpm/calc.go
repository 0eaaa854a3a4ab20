package rpm

import (
	"math"
	"sort"
)

// Parameters of the draft's algorithm (its section "Test Parameters"). ID is
// 1 s here instead of the draft's 5 s: with MAD = 4 the draft's value needs
// at least 35 s per direction before goodput can even be called stable,
// and this tool runs both directions at once within a user-set time limit
// (default 20 s). Everything else is the draft's default.
const (
	MAD = 4    // intervals in a moving average
	TMP = 95.0 // single-sided trimmed mean: keep the lowest 95 %
	SDT = 0.05 // standard deviation tolerance for stability
	MNP = 16   // most load-generating connections per direction
	MPS = 100  // most probe pairs per second
	PTC = 0.05 // share of the goodput the probes may use
	// Bytes one foreign plus one self probe exchange, the draft's estimate
	// (about 5000 and 1000), used to keep the probes within PTC.
	probePairBytes = 6000
)

// TrimmedMean is the draft's single-sided trimmed mean: the mean of the
// lowest pct percent of the values (at least one value), so a few probes
// that hit a retransmission timeout do not dominate. NaN for no values.
func TrimmedMean(values []float64, pct float64) float64 {
	if len(values) == 0 {
		return math.NaN()
	}
	v := append([]float64(nil), values...)
	sort.Float64s(v)
	keep := int(math.Ceil(float64(len(v)) * pct / 100))
	if keep < 1 {
		keep = 1
	}
	if keep > len(v) {
		keep = len(v)
	}
	var sum float64
	for _, x := range v[:keep] {
		sum += x
	}
	return sum / float64(keep)
}

// Aggregate is the draft's calculation over one set of probes, with its
// parts, so a reader can see which round trip made the number.
type Aggregate struct {
	// Trimmed means (ms) of the foreign probes' TCP handshake, TLS handshake
	// (per round trip: TLS 1.2 takes two) and HTTP request on the new
	// connection, and of the self probes' HTTP request on a
	// load-generating connection. 0 when there was no such probe.
	TCPMs         float64 `json:"tcp_f_ms"`
	TLSMs         float64 `json:"tls_f_ms"`
	HTTPForeignMs float64 `json:"http_f_ms"`
	HTTPSelfMs    float64 `json:"http_l_ms"`
	Foreign       int     `json:"foreign_probes"`
	Self          int     `json:"self_probes"`
	// Foreign RPM = 60000 / mean of the foreign parts (TLS left out for
	// plain http), self RPM = 60000 / http_l, and RPM the mean of the two
	// (draft -04 onwards; earlier revisions averaged the round-trip times
	// instead, which weighs slow probes more).
	ForeignRPM float64 `json:"foreign_rpm"`
	SelfRPM    float64 `json:"self_rpm"`
	RPM        float64 `json:"rpm"`
}

// probeSet collects the four kinds of times of the draft, in ms.
type probeSet struct {
	tcp, tls, httpF, httpL []float64
}

// aggregate applies the draft's formula. With no self probes (idle
// latency) RPM is the foreign RPM; with no foreign probes, the self RPM.
func aggregate(p probeSet, useTLS bool) Aggregate {
	a := Aggregate{Foreign: len(p.httpF), Self: len(p.httpL)}
	tm := func(v []float64) float64 {
		if len(v) == 0 {
			return 0
		}
		return TrimmedMean(v, TMP)
	}
	a.TCPMs, a.TLSMs, a.HTTPForeignMs, a.HTTPSelfMs = tm(p.tcp), tm(p.tls), tm(p.httpF), tm(p.httpL)
	if len(p.httpF) > 0 && len(p.tcp) > 0 {
		rtt := (a.TCPMs + a.HTTPForeignMs) / 2
		if useTLS {
			rtt = (a.TCPMs + a.TLSMs + a.HTTPForeignMs) / 3
		}
		a.ForeignRPM = rpmOf(rtt)
	}
	if len(p.httpL) > 0 {
		a.SelfRPM = rpmOf(a.HTTPSelfMs)
	}
	switch {
	case a.ForeignRPM > 0 && a.SelfRPM > 0:
		a.RPM = (a.ForeignRPM + a.SelfRPM) / 2
	case a.ForeignRPM > 0:
		a.RPM = a.ForeignRPM
	default:
		a.RPM = a.SelfRPM
	}
	return a
}

// rpmOf is 60000/ms, with a floor of 1 µs so a loopback test cannot divide
// by zero.
func rpmOf(ms float64) float64 {
	if ms < 0.001 {
		ms = 0.001
	}
	return 60000 / ms
}

// stable is the draft's stability test: the standard deviation of the last
// MAD values is below SDT of the latest one.
func stable(vals []float64) bool {
	if len(vals) < MAD {
		return false
	}
	last := vals[len(vals)-MAD:]
	var mean float64
	for _, v := range last {
		mean += v
	}
	mean /= float64(len(last))
	var ss float64
	for _, v := range last {
		ss += (v - mean) * (v - mean)
	}
	sd := math.Sqrt(ss / float64(len(last)))
	cur := last[len(last)-1]
	return cur > 0 && sd < SDT*cur
}
