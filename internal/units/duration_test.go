package units

import (
	"flag"
	"strings"
	"testing"
	"time"
)

func TestParseDuration(t *testing.T) {
	tests := []struct {
		in   string
		want time.Duration
	}{
		{"10", 10 * time.Second}, // bare numbers are seconds, as flent -l and iperf3 -t
		{"0", 0},
		{"2.5", 2500 * time.Millisecond},
		{".5", 500 * time.Millisecond},
		{"5.", 5 * time.Second},
		{"0.001", time.Millisecond},
		{"600", 10 * time.Minute},
		{"10s", 10 * time.Second},
		{"1m30s", 90 * time.Second},
		{"250ms", 250 * time.Millisecond},
		{"2h", 2 * time.Hour},
		{"1.5m", 90 * time.Second},
		{"0s", 0},
	}
	for _, tt := range tests {
		got, err := ParseDuration(tt.in)
		if err != nil || got != tt.want {
			t.Errorf("ParseDuration(%q) = %v, %v; want %v", tt.in, got, err, tt.want)
		}
	}
}

func TestParseDurationErrors(t *testing.T) {
	for _, in := range []string{
		"", "-1", "-1s", "+5", "1e3", "10 s", " 10", "ten", "10x", "1..2", ".", "s",
		"99999999999999999999", "inf", "NaN",
	} {
		d, err := ParseDuration(in)
		if err == nil {
			t.Errorf("ParseDuration(%q) = %v, want an error", in, d)
			continue
		}
		if !strings.Contains(err.Error(), "expected a duration such as 10 (seconds)") {
			t.Errorf("ParseDuration(%q) error %q does not say what is expected", in, err)
		}
	}
}

func TestDurationFlag(t *testing.T) {
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	fs.SetOutput(new(strings.Builder))
	d := DurationFlag(fs, "duration", 20*time.Second, "load time")
	var e time.Duration
	DurationVar(fs, &e, "every", time.Second, "interval")
	if *d != 20*time.Second || e != time.Second {
		t.Fatalf("defaults: %v, %v", *d, e)
	}
	if err := fs.Parse([]string{"--duration", "10", "--every=0"}); err != nil {
		t.Fatal(err)
	}
	if *d != 10*time.Second || e != 0 {
		t.Errorf("parsed %v, %v; want 10s, 0s", *d, e)
	}
	if g := fs.Lookup("duration").Value.(flag.Getter).Get(); g != any(10*time.Second) {
		t.Errorf("Get() = %#v, want a time.Duration of 10s", g)
	}
	if s := fs.Lookup("duration").Value.String(); s != "10s" {
		t.Errorf("String() = %q", s)
	}
	if err := fs.Parse([]string{"--duration", "10 minutes"}); err == nil {
		t.Error("a bad value parsed")
	}
}
