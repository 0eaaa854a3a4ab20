package stats

import (
	"math"
	"testing"
)

func TestPercentile(t *testing.T) {
	v := []float64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	tests := []struct {
		p, want float64
	}{
		{0, 1}, {10, 1.9}, {50, 5.5}, {90, 9.1}, {99, 9.91}, {100, 10},
	}
	for _, tt := range tests {
		if got := Percentile(v, tt.p); math.Abs(got-tt.want) > 1e-9 {
			t.Errorf("Percentile(1..10, %v) = %v, want %v", tt.p, got, tt.want)
		}
	}
	if got := Percentile([]float64{7}, 10); got != 7 {
		t.Errorf("Percentile([7], 10) = %v, want 7", got)
	}
	if got := Percentile(nil, 50); !math.IsNaN(got) {
		t.Errorf("Percentile(nil) = %v, want NaN", got)
	}
}

// The 10th percentile must not be betterspeedtest's "second smallest".
func TestSummarizeP10IsReal(t *testing.T) {
	var v []float64
	for i := 100; i >= 1; i-- { // unsorted input
		v = append(v, float64(i))
	}
	s := Summarize(v, 110)
	if s.P10Ms < 10 || s.P10Ms > 11 {
		t.Errorf("p10 of 1..100 = %v, want about 10.9", s.P10Ms)
	}
	if s.MinMs != 1 || s.MaxMs != 100 || s.MedianMs != 50.5 || s.MeanMs != 50.5 {
		t.Errorf("summary = %+v", s)
	}
	if s.Count != 100 || s.Sent != 110 || math.Abs(s.LossPct-100.0/11) > 1e-9 {
		t.Errorf("count/sent/loss = %d/%d/%v", s.Count, s.Sent, s.LossPct)
	}
	if v[0] != 100 {
		t.Error("Summarize sorted its input in place")
	}
}

func TestSummarizeEmpty(t *testing.T) {
	s := Summarize(nil, 4)
	if s.Count != 0 || s.LossPct != 100 || s.MedianMs != 0 {
		t.Errorf("Summarize(nil, 4) = %+v", s)
	}
	if s := Summarize(nil, 0); s.LossPct != 0 {
		t.Errorf("Summarize(nil, 0).LossPct = %v", s.LossPct)
	}
}

func TestGrade(t *testing.T) {
	tests := []struct {
		ms   float64
		want string
	}{
		{-3, "A+"}, {0, "A+"}, {4.99, "A+"}, {5, "A"}, {29.9, "A"}, {30, "B"},
		{59, "B"}, {60, "C"}, {199, "C"}, {200, "D"}, {399, "D"}, {400, "F"}, {5000, "F"},
		{math.NaN(), "?"},
	}
	for _, tt := range tests {
		if got := Grade(tt.ms); got != tt.want {
			t.Errorf("Grade(%v) = %q, want %q", tt.ms, got, tt.want)
		}
	}
}

func TestRPM(t *testing.T) {
	tests := []struct {
		rtt      float64
		rpm      float64
		wantBand string
	}{
		{0, 0, ""}, {-1, 0, ""}, {300, 200, "Poor"}, {200, 300, "Fair"}, {100, 600, "Fair"},
		{60, 1000, "Good"}, {20, 3000, "Good"}, {10, 6000, "Excellent"}, {1, 60000, "Excellent"},
	}
	for _, tt := range tests {
		got := RPM(tt.rtt)
		if math.Abs(got-tt.rpm) > 1e-9 {
			t.Errorf("RPM(%v) = %v, want %v", tt.rtt, got, tt.rpm)
		}
		if b := RPMBand(got); b != tt.wantBand {
			t.Errorf("RPMBand(%v) = %q, want %q", got, b, tt.wantBand)
		}
	}
}
