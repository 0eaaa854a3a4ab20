package rpm

import (
	"math"
	"testing"
)

func TestTrimmedMean(t *testing.T) {
	hundred := make([]float64, 100)
	for i := range hundred {
		hundred[i] = float64(i + 1) // 1..100: the top 5 (96..100) go
	}
	for _, tc := range []struct {
		name string
		in   []float64
		want float64
	}{
		{"one value", []float64{7}, 7},
		{"twenty: keeps 19", append([]float64{1000}, make19(10)...), 10},
		{"1..100: mean of 1..95", hundred, 48},
		{"unsorted input", []float64{3, 1, 2}, 2},
	} {
		if got := TrimmedMean(tc.in, TMP); math.Abs(got-tc.want) > 1e-9 {
			t.Errorf("%s: TrimmedMean = %v; want %v", tc.name, got, tc.want)
		}
	}
	if !math.IsNaN(TrimmedMean(nil, TMP)) {
		t.Error("TrimmedMean(nil) is not NaN")
	}
}

func make19(v float64) []float64 {
	s := make([]float64, 19)
	for i := range s {
		s[i] = v
	}
	return s
}

func TestAggregate(t *testing.T) {
	p := probeSet{tcp: []float64{100}, tls: []float64{100}, httpF: []float64{100}, httpL: []float64{300}}
	a := aggregate(p, true)
	// Foreign 60000/100 = 600, self 60000/300 = 200, RPM their mean.
	if a.ForeignRPM != 600 || a.SelfRPM != 200 || a.RPM != 400 {
		t.Errorf("TLS: %+v; want foreign 600, self 200, RPM 400", a)
	}
	// Without TLS the foreign part is the mean of TCP and HTTP only (a
	// zero TLS time must not flatter it).
	p = probeSet{tcp: []float64{50}, httpF: []float64{150}, httpL: []float64{100}}
	if a := aggregate(p, false); a.ForeignRPM != 600 || a.SelfRPM != 600 || a.RPM != 600 {
		t.Errorf("TCP only: %+v; want 600 everywhere", a)
	}
	// Idle: no self probes, RPM is the foreign one.
	p = probeSet{tcp: []float64{10}, tls: []float64{20}, httpF: []float64{30}}
	if a := aggregate(p, true); a.RPM != 3000 || a.SelfRPM != 0 {
		t.Errorf("idle: %+v; want RPM 3000 from foreign probes only", a)
	}
}

func TestStable(t *testing.T) {
	for _, tc := range []struct {
		vals []float64
		want bool
	}{
		{[]float64{100, 100, 100}, false}, // fewer than MAD
		{[]float64{100, 101, 99, 100}, true},
		{[]float64{50, 100, 100, 100, 100}, true}, // only the last MAD count
		{[]float64{80, 100, 120, 100}, false},     // sd 14 > 5
		{[]float64{0, 0, 0, 0}, false},            // nothing measured is not stable
	} {
		if got := stable(tc.vals); got != tc.want {
			t.Errorf("stable(%v) = %v; want %v", tc.vals, got, tc.want)
		}
	}
}
