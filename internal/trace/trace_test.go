package trace

import (
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite the golden files")

func parse(t *testing.T, s string) *Trace {
	t.Helper()
	tr, err := Parse("test", strings.NewReader(s))
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		name, in string
		line     int
		want     string
	}{
		{"empty", "", 0, "no data lines"},
		{"comments only", "# x\n\n", 0, "no data lines"},
		{"mahimahi not a number", "0\n1\nx\n", 3, `"x" is not a time in whole milliseconds`},
		{"mahimahi negative", "0\n-1\n", 2, "not a time"},
		{"mahimahi decreasing", "5\n4\n", 2, "before the previous line's 5 ms"},
		{"mahimahi empty line", "0\n\n3\n", 2, "empty line"},
		{"mahimahi zero length", "0\n0\n", 2, "last time is 0 ms"},
		{"mahimahi too long", "0\n86400001\n", 2, "beyond 24h0m0s"},
		{"mahimahi fraction", "1.5\n", 1, "whole milliseconds"},
		{"steps no end", "0 10mbit\n4 2mbit\n", 2, "no `SECONDS end` line"},
		{"steps not at 0", "# c\n1 10mbit\n4 end\n", 2, "must start at 0"},
		{"steps not increasing", "0 10mbit\n4 2mbit\n4 3mbit\n8 end\n", 3, "not after the previous step's 4s"},
		{"steps end not after", "0 10mbit\n4 2mbit\n3 end\n", 3, "not after"},
		{"steps bare rate", "0 40\n4 end\n", 1, `"40" has no unit`},
		{"steps bad rate", "0 fast\n4 end\n", 1, "rate: parse rate"},
		{"steps bad time", "0 1mbit\nsoon 2mbit\n4 end\n", 2, "time: parse duration"},
		{"steps three fields", "0 1mbit 2\n4 end\n", 1, "expected `SECONDS RATE`"},
		{"steps after end", "0 1mbit\n4 end\n5 2mbit\n", 3, "after the `end` line 2"},
		{"steps end first", "0 end\n", 1, "`end` before any step"},
		{"steps huge rate", "0 1tbit\n1 end\n", 1, "above 100gbit"},
		{"long line", strings.Repeat("1", 5000) + "\n", 1, "longer than 4096"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse("f.trace", strings.NewReader(tt.in))
			if err == nil {
				t.Fatalf("Parse(%q) succeeded", tt.in)
			}
			var pe *ParseError
			if !errors.As(err, &pe) {
				t.Fatalf("error %v is not a *ParseError", err)
			}
			if pe.Line != tt.line || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q (line %d); want line %d and %q", err, pe.Line, tt.line, tt.want)
			}
			if tt.line > 0 && !strings.Contains(err.Error(), fmt.Sprintf("f.trace:%d:", tt.line)) {
				t.Errorf("error %q does not name f.trace:%d", err, tt.line)
			}
		})
	}
}

func TestParseTooBig(t *testing.T) {
	r := strings.NewReader(strings.Repeat("1\n", MaxBytes/2+1))
	if _, err := Parse("big", r); err == nil || !strings.Contains(err.Error(), "more than 64 MiB") {
		t.Errorf("err = %v, want the size limit", err)
	}
}

// TestMahimahiLoop checks the loop as mahimahi's link runs it: after the
// last line the schedule starts again shifted by the last time, so a
// line at the last time and one at 0 both deliver.
func TestMahimahiLoop(t *testing.T) {
	tr := parse(t, "0\n0\n5\n10\n")
	if tr.Format != Mahimahi || tr.Length != 10*time.Millisecond || tr.Opportunities() != 4 {
		t.Fatalf("got %s, %v, %d", tr.Format, tr.Length, tr.Opportunities())
	}
	ms := time.Millisecond
	for _, c := range []struct {
		at   time.Duration
		pkts float64
	}{
		{0, 0}, {1 * ms, 2}, {5 * ms, 2}, {6 * ms, 3}, {10 * ms, 3},
		// time 10 delivers the last line and the next loop's two lines at 0
		{10*ms + 1, 6}, {16 * ms, 7}, {20 * ms, 7}, {20*ms + 1, 10},
		{1000 * ms, 100*4 - 1},
	} {
		if got := tr.Bits(c.at) / PacketBits; got != c.pkts {
			t.Errorf("Bits(%v) = %v packets, want %v", c.at, got, c.pkts)
		}
	}
	if got, want := tr.MeanBits(), 4*PacketBits/0.010; math.Abs(got-want) > 1e-6 {
		t.Errorf("MeanBits = %v, want %v", got, want)
	}
}

func TestStepsLoop(t *testing.T) {
	tr := parse(t, "# steps\n0 10mbit\n\n2 0\n3 4mbit\n4 end\n")
	if tr.Format != Steps || tr.Length != 4*time.Second || len(tr.Steps()) != 3 {
		t.Fatalf("got %s, %v, %v", tr.Format, tr.Length, tr.Steps())
	}
	for _, c := range []struct {
		at   time.Duration
		bits float64
	}{
		{0, 0}, {time.Second, 10e6}, {2 * time.Second, 20e6}, {3 * time.Second, 20e6},
		{3500 * time.Millisecond, 22e6}, {4 * time.Second, 24e6}, {5 * time.Second, 34e6},
		{8 * time.Second, 48e6},
	} {
		if got := tr.Bits(c.at); math.Abs(got-c.bits) > 1 {
			t.Errorf("Bits(%v) = %v, want %v", c.at, got, c.bits)
		}
	}
	if got := tr.MeanBits(); got != 6e6 {
		t.Errorf("MeanBits = %v, want 6e6", got)
	}
}

func TestResample(t *testing.T) {
	tr := parse(t, "0 10mbit\n2 0\n3 4mbit\n4 end\n")
	got, err := tr.Resample(500*time.Millisecond, 4500*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	want := []uint64{10e6, 10e6, 10e6, 10e6, 0, 0, 4e6, 4e6, 10e6}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("Resample = %v, want %v", got, want)
	}
	// A window straddling a step gets the time-weighted mean, and a
	// short last window its own mean.
	got, _ = tr.Resample(3*time.Second, 4*time.Second)
	if want := []uint64{6666667, 4e6}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("Resample(3s) = %v, want %v", got, want)
	}
	// mahimahi: one packet per ms is 12 Mbit/s; the loop starts again at
	// 4+1 ms, so no millisecond gets two
	m := parse(t, "1\n2\n3\n4\n")
	got, _ = m.Resample(time.Millisecond, 8*time.Millisecond)
	if want := []uint64{0, 12e6, 12e6, 12e6, 12e6, 12e6, 12e6, 12e6}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("mahimahi Resample = %v, want %v", got, want)
	}
	for _, bad := range []struct{ i, n time.Duration }{{0, time.Second}, {time.Second, 0}, {time.Nanosecond, time.Hour}} {
		if _, err := tr.Resample(bad.i, bad.n); err == nil {
			t.Errorf("Resample(%v, %v) succeeded", bad.i, bad.n)
		}
	}
}

// TestGolden resamples the shipped traces into 1 s intervals over two
// repetitions: the golden files are what the lab makes of them.
func TestGolden(t *testing.T) {
	files, _ := filepath.Glob("testdata/*.steps")
	mahi, _ := filepath.Glob("testdata/*.mahi")
	files = append(files, mahi...)
	if len(files) < 6 {
		t.Fatalf("testdata has %d traces", len(files))
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			tr, err := ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			step := time.Second
			if tr.Length < 10*time.Second {
				step = 250 * time.Millisecond
			}
			rs, err := tr.Resample(step, 2*tr.Length)
			if err != nil {
				t.Fatal(err)
			}
			var b strings.Builder
			fmt.Fprintf(&b, "%s %s length %v mean %.3f Mbit/s\n", tr.Name, tr.Format, tr.Length, tr.MeanBits()/1e6)
			for i, r := range rs {
				fmt.Fprintf(&b, "%7.2f %8.3f\n", (time.Duration(i) * step).Seconds(), float64(r)/1e6)
			}
			golden := f + ".golden"
			if *update {
				if err := os.WriteFile(golden, []byte(b.String()), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (go test -update writes it)", err)
			}
			if b.String() != string(want) {
				t.Errorf("resampled %s differs from %s:\n%s", f, golden, b.String())
			}
		})
	}
}

// TestPublicMahimahi reads mahimahi's own traces when
// MAHIMAHI_TRACES=DIR names a directory holding them (they are not part
// of this tree), checking each parses and its resampled mean matches its
// line count.
func TestPublicMahimahi(t *testing.T) {
	dir := os.Getenv("MAHIMAHI_TRACES")
	if dir == "" {
		t.Skip("MAHIMAHI_TRACES=DIR (a directory with mahimahi's traces/*.up and *.down) is not set")
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*.[ud][po]*"))
	if len(files) == 0 {
		t.Fatalf("no *.up or *.down files in %s", dir)
	}
	for _, f := range files {
		if st, err := os.Stat(f); err == nil && st.Size() == 0 {
			t.Logf("%s: empty (not fetched?), skipped", f)
			continue
		}
		tr, err := ReadFile(f)
		if err != nil {
			t.Errorf("%v", err)
			continue
		}
		rs, err := tr.Resample(100*time.Millisecond, tr.Length)
		if err != nil {
			t.Fatal(err)
		}
		var sum float64
		for _, r := range rs {
			sum += float64(r) * 0.1
		}
		// [0, Length) leaves out the lines at exactly Length (they fall
		// into the next repetition's first window); each window's rate is
		// rounded to a bit/s.
		t.Logf("%s: %d lines, %v, mean %.2f Mbit/s", tr.Name, tr.Opportunities(), tr.Length, tr.MeanBits()/1e6)
		if d := math.Abs(sum - float64(tr.Opportunities())*PacketBits); tr.Length%(100*time.Millisecond) == 0 && d > 20*PacketBits {
			t.Errorf("%s: one repetition resampled carries %.0f bits, its %d lines %d", tr.Name, sum, tr.Opportunities(), tr.Opportunities()*PacketBits)
		}
	}
}

func FuzzParse(f *testing.F) {
	seeds, _ := filepath.Glob("testdata/*.steps")
	for _, s := range seeds {
		b, _ := os.ReadFile(s)
		f.Add(b)
	}
	f.Add([]byte("0\n0\n5\n10\n"))
	f.Add([]byte("3\n"))
	f.Add([]byte("0 1mbit\n0.5 0\n1 end\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		tr, err := Parse("fuzz", strings.NewReader(string(data)))
		if err != nil {
			return
		}
		if tr.Length <= 0 || tr.Length > MaxLength {
			t.Fatalf("length %v", tr.Length)
		}
		mean := tr.MeanBits()
		if math.IsNaN(mean) || mean < 0 {
			t.Fatalf("mean %v", mean)
		}
		// Bits never decreases and one repetition carries mean*length.
		prev := -1.0
		for _, at := range []time.Duration{0, 1, tr.Length / 3, tr.Length / 2, tr.Length - 1, tr.Length, tr.Length + 1, 2 * tr.Length} {
			b := tr.Bits(at)
			if b < prev {
				t.Fatalf("Bits(%v) = %v < %v", at, b, prev)
			}
			prev = b
		}
		want := mean * tr.Length.Seconds()
		if got := tr.Bits(tr.Length + 1); tr.Format == Steps && math.Abs(got-want) > 1e-6*want+PacketBits {
			t.Fatalf("one repetition carries %v bits, mean says %v", got, want)
		}
		iv := max(tr.Length/7, time.Millisecond)
		if _, err := tr.Resample(iv, 2*tr.Length); err != nil && 2*tr.Length <= MaxLength {
			t.Fatalf("Resample: %v", err)
		}
	})
}
