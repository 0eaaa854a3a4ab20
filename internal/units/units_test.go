package units

import (
	"math"
	"strings"
	"testing"
	"time"
)

func TestParseRate(t *testing.T) {
	tests := []struct {
		in   string
		want uint64
	}{
		{"20mbit", 20_000_000},
		{"20Mbit", 20_000_000},
		{"830kbit", 830_000},
		{"1gbit", 1_000_000_000},
		{"100Kbit", 100_000},
		{"1.5mbit", 1_500_000},
		{"1.1mbit", 1_100_000},
		{"8bps", 64}, // bytes per second
		{"8Bps", 64},
		{"1kbps", 8000},
		{"1KBps", 8000},
		{"1kibps", 8192},
		{"1mibps", 8 << 20},
		{"12mibit", 12 << 20},
		{"1kibit", 1024},
		{"1Kibit", 1024},
		{"1gibit", 1 << 30},
		{"1tibit", 1 << 40},
		{"2tbit", 2e12},
		{"1gbps", 8e9},
		{"1tbps", 8e12},
		{"1tibps", 8 << 40},
		{"1000", 1000}, // bare numbers are bits per second
		{"1000bit", 1000},
		{"0", 0},
		{"0bit", 0},
		{".5kbit", 500},
		{"5.kbit", 5000},
		{"1e3kbit", 1_000_000},
		{"1E3", 1000},
		{"25e-1mbit", 2_500_000},
		{"0.5bit", 0},    // truncated, as tc truncates
		{"1.9999bit", 1}, // truncated
		{"18446744073709551615", math.MaxUint64},
		{"18446744073709551615bit", math.MaxUint64},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseRate(tt.in)
			if err != nil {
				t.Fatalf("ParseRate(%q): %v", tt.in, err)
			}
			if got != tt.want {
				t.Errorf("ParseRate(%q) = %d, want %d", tt.in, got, tt.want)
			}
		})
	}
}

func TestParseRateErrors(t *testing.T) {
	tests := []struct {
		in      string
		wantErr string
	}{
		{"", `parse rate "": empty value; expected a rate such as 20mbit`},
		{"mbit", `parse rate "mbit": not a number; expected a rate`},
		{"20k", `parse rate "20k": unknown unit "k"; expected`},
		{"20m", `unknown unit "m"`},
		{"20 mbit", `unknown unit " mbit"`},
		{" 20mbit", `not a number`},
		{"-1mbit", `not a number`},
		{"+1mbit", `not a number`},
		{"0x10", `unknown unit "x10"`},
		{"inf", `not a number`},
		{"nan", `not a number`},
		{"30%", `unknown unit "%"`},
		{"1.2.3", `unknown unit ".3"`},
		{"1e", `unknown unit "e"`},
		{"1ebit", `unknown unit "ebit"`},
		{"18446744073709551616", `too large (at most 18446744073709551615)`},
		{"3000000tbps", `too large`},
		{"1e41", `too large`},
		{"1e99999999999", `too large`},
		{"20mbitx", `unknown unit "mbitx"`},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			_, err := ParseRate(tt.in)
			if err == nil {
				t.Fatalf("ParseRate(%q) succeeded, want error containing %q", tt.in, tt.wantErr)
			}
			if !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("ParseRate(%q) error = %q, want it to contain %q", tt.in, err, tt.wantErr)
			}
		})
	}
}

func TestParseSize(t *testing.T) {
	tests := []struct {
		in   string
		want uint32
	}{
		{"1514", 1514},
		{"1514b", 1514},
		{"1514B", 1514},
		{"64k", 65536},
		{"64K", 65536},
		{"64kb", 65536},
		{"64KB", 65536},
		{"4Mb", 4 << 20}, // megabytes, not megabits
		{"4m", 4 << 20},
		{"4mbit", 4 << 17},
		{"12kbit", 12 * 128},
		{"1g", 1 << 30},
		{"3gb", 3 << 30},
		{"1gbit", 1 << 27},
		{"1.5k", 1536},
		{"0", 0},
		{"4294967295", math.MaxUint32},
		{"2.5", 2},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseSize(tt.in)
			if err != nil {
				t.Fatalf("ParseSize(%q): %v", tt.in, err)
			}
			if got != tt.want {
				t.Errorf("ParseSize(%q) = %d, want %d", tt.in, got, tt.want)
			}
		})
	}
}

func TestParseSizeErrors(t *testing.T) {
	tests := []struct {
		in      string
		wantErr string
	}{
		{"", `parse size "": empty value; expected a size such as 1514`},
		{"4Mbyte", `unknown unit "Mbyte"`},
		{"4kib", `unknown unit "kib"`},
		{"4294967296", `too large (at most 4294967295)`},
		{"4g", `too large`},
		{"k", `not a number`},
		{"-1", `not a number`},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			_, err := ParseSize(tt.in)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("ParseSize(%q) error = %v, want it to contain %q", tt.in, err, tt.wantErr)
			}
		})
	}
}

func TestParseTime(t *testing.T) {
	tests := []struct {
		in   string
		want time.Duration
	}{
		{"5ms", 5 * time.Millisecond},
		{"5MS", 5 * time.Millisecond},
		{"100ms", 100 * time.Millisecond},
		{"16857us", 16857 * time.Microsecond},
		{"1s", time.Second},
		{"1sec", time.Second},
		{"2secs", 2 * time.Second},
		{"2.5ms", 2500 * time.Microsecond},
		{"2.5msec", 2500 * time.Microsecond},
		{"3msecs", 3 * time.Millisecond},
		{"7usec", 7 * time.Microsecond},
		{"7usecs", 7 * time.Microsecond},
		{"5000", 5 * time.Millisecond},  // bare numbers are microseconds
		{"2.5us", 2 * time.Microsecond}, // truncated to whole µs like tc
		{"0", 0},
		{"4294967295us", 4294967295 * time.Microsecond},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseTime(tt.in)
			if err != nil {
				t.Fatalf("ParseTime(%q): %v", tt.in, err)
			}
			if got != tt.want {
				t.Errorf("ParseTime(%q) = %v, want %v", tt.in, got, tt.want)
			}
		})
	}
}

func TestParseTimeErrors(t *testing.T) {
	tests := []struct {
		in      string
		wantErr string
	}{
		{"", `parse time "": empty value; expected a time such as 5ms`},
		{"5ns", `unknown unit "ns"`}, // get_time has no ns
		{"5m", `unknown unit "m"`},
		{"5min", `unknown unit "min"`},
		{"auto", `not a number`},
		{"4295s", `too large (at most 4294967295)`},
		{"-5ms", `not a number`},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			_, err := ParseTime(tt.in)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("ParseTime(%q) error = %v, want it to contain %q", tt.in, err, tt.wantErr)
			}
		})
	}
}

func TestFormatRate(t *testing.T) {
	tests := []struct {
		in   uint64
		want string
	}{
		{20_000_000, "20Mbit"},
		{830_000, "830Kbit"},
		{1_500_000, "1500Kbit"},
		{1_000_000_000, "1Gbit"},
		{2e12, "2Tbit"},
		{64, "64bit"},
		{1500001, "1500001bit"},
		{0, "0bit"},
		{math.MaxUint64, "18446744073709551615bit"},
	}
	for _, tt := range tests {
		if got := FormatRate(tt.in); got != tt.want {
			t.Errorf("FormatRate(%d) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestFormatSize(t *testing.T) {
	tests := []struct {
		in   uint32
		want string
	}{
		{1514, "1514b"},
		{65536, "64Kb"},
		{4 << 20, "4Mb"},
		{1536, "1536b"},
		{0, "0b"},
	}
	for _, tt := range tests {
		if got := FormatSize(tt.in); got != tt.want {
			t.Errorf("FormatSize(%d) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestFormatTime(t *testing.T) {
	tests := []struct {
		in   time.Duration
		want string
	}{
		{5 * time.Millisecond, "5ms"},
		{16857 * time.Microsecond, "16.857ms"},
		{2500 * time.Microsecond, "2.5ms"},
		{1500 * time.Millisecond, "1.5s"},
		{time.Second, "1s"},
		{999 * time.Microsecond, "999us"},
		{1001 * time.Microsecond, "1.001ms"},
		{1000001 * time.Microsecond, "1.000001s"},
		{0, "0us"},
		{1500 * time.Nanosecond, "1us"},
		{-time.Second, "0us"},
	}
	for _, tt := range tests {
		if got := FormatTime(tt.in); got != tt.want {
			t.Errorf("FormatTime(%v) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func FuzzParseRate(f *testing.F) {
	for _, s := range []string{"20mbit", "8bps", "1.5mbit", "12mibit", "1000", "1e3kbit", "0.5bit", "18446744073709551615", "x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, err := ParseRate(s)
		if err != nil {
			if !strings.Contains(err.Error(), "expected a rate") {
				t.Fatalf("ParseRate(%q) error %q does not say what is expected", s, err)
			}
			return
		}
		out := FormatRate(v)
		v2, err := ParseRate(out)
		if err != nil || v2 != v {
			t.Fatalf("ParseRate(%q) = %d, FormatRate = %q, re-parsed %d, %v", s, v, out, v2, err)
		}
	})
}

func FuzzParseSize(f *testing.F) {
	for _, s := range []string{"1514", "64k", "4Mb", "4mbit", "1.5k", "4294967295", "x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, err := ParseSize(s)
		if err != nil {
			if !strings.Contains(err.Error(), "expected a size") {
				t.Fatalf("ParseSize(%q) error %q does not say what is expected", s, err)
			}
			return
		}
		out := FormatSize(v)
		v2, err := ParseSize(out)
		if err != nil || v2 != v {
			t.Fatalf("ParseSize(%q) = %d, FormatSize = %q, re-parsed %d, %v", s, v, out, v2, err)
		}
	})
}

func FuzzParseTime(f *testing.F) {
	for _, s := range []string{"5ms", "16857us", "2.5ms", "1s", "5000", "2.5us", "x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, err := ParseTime(s)
		if err != nil {
			if !strings.Contains(err.Error(), "expected a time") {
				t.Fatalf("ParseTime(%q) error %q does not say what is expected", s, err)
			}
			return
		}
		if v < 0 || v%time.Microsecond != 0 {
			t.Fatalf("ParseTime(%q) = %v, not a whole non-negative number of µs", s, v)
		}
		out := FormatTime(v)
		v2, err := ParseTime(out)
		if err != nil || v2 != v {
			t.Fatalf("ParseTime(%q) = %v, FormatTime = %q, re-parsed %v, %v", s, v, out, v2, err)
		}
	})
}
