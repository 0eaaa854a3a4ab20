// Package trace reads link-capacity traces and turns them into the rate a
// link offers in each fixed interval, so the lab's emulated modem can
// follow a link whose capacity moves (LTE, Starlink, busy cable) and a
// bench can compare what a controller achieved with what the link offered.
//
// Two formats are read; Parse tells them apart by their first data line.
//
// Mahimahi's (github.com/ravinet/mahimahi, traces/): one integer per line,
// a time in milliseconds at which the link may deliver one 1500-byte
// packet; several lines with the same time are several packets in that
// millisecond. Times never decrease, the last one must be above zero and
// is the trace's length: the trace then repeats, shifted by that length
// (so an opportunity at the last time and one at time 0 of the next loop
// both happen, as mahimahi's link does it).
//
// Steps, for traces written by hand: each line is `SECONDS RATE`, the
// capacity from that time on, with the rate in tc's units (20mbit, 830kbit,
// 0 for a stall; see internal/units). The first line starts at 0, times
// increase, and the last line is `SECONDS end`, the trace's length, after
// which it repeats. Blank lines and lines starting with '#' are comments
// in this format only (mahimahi's own reader refuses blank lines, and so
// does this one in its format).
//
// Both become the same thing: a cumulative count of the bits the link can
// carry from time 0, which makes resampling into any interval exact (a
// window's rate is the bits it could carry over its length) and looping a
// matter of arithmetic. The package is pure: no clocks, no I/O beyond the
// reader it is given.
package trace

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"sqm/internal/units"
)

// Format names.
const (
	Mahimahi = "mahimahi"
	Steps    = "steps"
)

// PacketBits is what one mahimahi delivery opportunity carries: a
// 1500-byte packet.
const PacketBits = 1500 * 8

// Bounds on what is read: a trace is data a user hands over, so it gets
// limits. The largest of mahimahi's public traces has about 1.2 million
// lines (Verizon LTE, driving) in about 8 MB; a day is far longer than
// any run.
const (
	MaxBytes  = 64 << 20
	MaxLength = 24 * time.Hour
	maxLine   = 4096
)

// Step is one stretch of a step trace: Bits bit/s from Start on.
type Step struct {
	Start time.Duration
	Bits  uint64
}

// Trace is a parsed capacity trace. It repeats with period Length.
type Trace struct {
	Name   string // where it came from, for reports (the file name)
	Format string // Mahimahi or Steps
	Length time.Duration

	// Mahimahi: the opportunity times in ms, as in the file.
	stamps []uint32
	// Steps: the stretches, Start strictly increasing, the first at 0;
	// stepBits[i] is the cumulative bits up to steps[i].Start.
	steps    []Step
	stepBits []float64
}

// ParseError is a problem at one line of a trace.
type ParseError struct {
	Name string
	Line int // 1-based; 0 for the file as a whole
	Msg  string
}

func (e *ParseError) Error() string {
	if e.Line == 0 {
		return fmt.Sprintf("trace %s: %s", e.Name, e.Msg)
	}
	return fmt.Sprintf("trace %s:%d: %s", e.Name, e.Line, e.Msg)
}

// ReadFile parses the trace in the file at path; its Name is the path's
// base name.
func ReadFile(path string) (*Trace, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("trace: %w", err)
	}
	defer f.Close()
	return Parse(filepath.Base(path), f)
}

// Parse reads one trace in either format from r; name is used in errors
// and reports.
func Parse(name string, r io.Reader) (*Trace, error) {
	data, err := io.ReadAll(io.LimitReader(r, MaxBytes+1))
	if err != nil {
		return nil, fmt.Errorf("trace %s: read: %w", name, err)
	}
	if len(data) > MaxBytes {
		return nil, &ParseError{Name: name, Msg: fmt.Sprintf("more than %d MiB: not a capacity trace this lab reads", MaxBytes>>20)}
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, maxLine), maxLine)
	var lines []string
	for sc.Scan() {
		lines = append(lines, strings.TrimRight(sc.Text(), "\r"))
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return nil, &ParseError{Name: name, Line: len(lines) + 1, Msg: fmt.Sprintf("line longer than %d bytes", maxLine)}
		}
		return nil, fmt.Errorf("trace %s: %w", name, err)
	}
	for _, l := range lines {
		f := strings.Fields(l)
		if len(f) == 0 || strings.HasPrefix(f[0], "#") {
			continue
		}
		if len(f) == 1 {
			return parseMahimahi(name, lines)
		}
		return parseSteps(name, lines)
	}
	return nil, &ParseError{Name: name, Msg: "no data lines: expected mahimahi's one millisecond time per line or `SECONDS RATE` steps ending in `SECONDS end`"}
}

func parseMahimahi(name string, lines []string) (*Trace, error) {
	stamps := make([]uint32, 0, len(lines))
	for i, l := range lines {
		s := strings.TrimSpace(l)
		if s == "" {
			return nil, &ParseError{Name: name, Line: i + 1, Msg: "empty line in a mahimahi trace (one millisecond time per line, as mahimahi requires)"}
		}
		v, err := strconv.ParseUint(s, 10, 32)
		if err != nil {
			return nil, &ParseError{Name: name, Line: i + 1, Msg: fmt.Sprintf("%q is not a time in whole milliseconds (a mahimahi trace has one per line)", s)}
		}
		if n := len(stamps); n > 0 && uint32(v) < stamps[n-1] {
			return nil, &ParseError{Name: name, Line: i + 1, Msg: fmt.Sprintf("time %d ms is before the previous line's %d ms: times must not decrease", v, stamps[n-1])}
		}
		if time.Duration(v)*time.Millisecond > MaxLength {
			return nil, &ParseError{Name: name, Line: i + 1, Msg: fmt.Sprintf("time %d ms is beyond %v, the longest trace read", v, MaxLength)}
		}
		stamps = append(stamps, uint32(v))
	}
	last := stamps[len(stamps)-1]
	if last == 0 {
		return nil, &ParseError{Name: name, Line: len(lines), Msg: "the last time is 0 ms: a trace must last longer than that (its last time is its length)"}
	}
	return &Trace{Name: name, Format: Mahimahi, Length: time.Duration(last) * time.Millisecond, stamps: stamps}, nil
}

func parseSteps(name string, lines []string) (*Trace, error) {
	t := &Trace{Name: name, Format: Steps}
	ended := 0
	for i, l := range lines {
		f := strings.Fields(l)
		if len(f) == 0 || strings.HasPrefix(f[0], "#") {
			continue
		}
		perr := func(format string, args ...any) error {
			return &ParseError{Name: name, Line: i + 1, Msg: fmt.Sprintf(format, args...)}
		}
		if ended > 0 {
			return nil, perr("data after the `end` line %d", ended)
		}
		if len(f) != 2 {
			return nil, perr("%q: expected `SECONDS RATE` (e.g. `4 10mbit`) or `SECONDS end`", strings.TrimSpace(l))
		}
		at, err := units.ParseDuration(f[0])
		if err != nil {
			return nil, perr("time: %v", err)
		}
		if at > MaxLength {
			return nil, perr("time %v is beyond %v, the longest trace read", at, MaxLength)
		}
		if n := len(t.steps); n == 0 && at != 0 {
			return nil, perr("the first step starts at %v: it must start at 0", at)
		} else if n > 0 && at <= t.steps[n-1].Start {
			return nil, perr("time %v is not after the previous step's %v: times must increase", at, t.steps[n-1].Start)
		}
		if f[1] == "end" {
			if len(t.steps) == 0 {
				return nil, perr("`end` before any step")
			}
			t.Length = at
			ended = i + 1
			continue
		}
		bits, err := parseRate(f[1])
		if err != nil {
			return nil, perr("rate: %v", err)
		}
		t.steps = append(t.steps, Step{Start: at, Bits: bits})
	}
	if ended == 0 {
		return nil, &ParseError{Name: name, Line: len(lines), Msg: "no `SECONDS end` line: finish the trace with its length (e.g. `12 end`); it repeats after that"}
	}
	t.stepBits = make([]float64, len(t.steps))
	for i := 1; i < len(t.steps); i++ {
		d := t.steps[i].Start - t.steps[i-1].Start
		t.stepBits[i] = t.stepBits[i-1] + float64(t.steps[i-1].Bits)*d.Seconds()
	}
	return t, nil
}

// parseRate is units.ParseRate, except that a bare number other than 0 is
// refused: in a trace "40" is more likely meant as Mbit/s than as tc's
// 40 bit/s, so the unit must be written.
func parseRate(s string) (uint64, error) {
	bits, err := units.ParseRate(s)
	if err != nil {
		return 0, err
	}
	if bits != 0 && strings.TrimLeft(s, "0123456789.eE") == "" {
		return 0, fmt.Errorf("%q has no unit: write e.g. %smbit or %skbit (or 0 for a stall)", s, s, s)
	}
	if bits > 100_000_000_000 {
		return 0, fmt.Errorf("%q is above 100gbit", s)
	}
	return bits, nil
}

// Steps returns a step trace's stretches (nil for mahimahi).
func (t *Trace) Steps() []Step { return append([]Step(nil), t.steps...) }

// Opportunities is the number of lines of a mahimahi trace (0 for steps).
func (t *Trace) Opportunities() int { return len(t.stamps) }

// periodBits is what one repetition carries.
func (t *Trace) periodBits() float64 {
	if t.Format == Mahimahi {
		return float64(len(t.stamps)) * PacketBits
	}
	n := len(t.steps) - 1
	return t.stepBits[n] + float64(t.steps[n].Bits)*(t.Length-t.steps[n].Start).Seconds()
}

// MeanBits is the trace's mean capacity over one repetition, bit/s.
func (t *Trace) MeanBits() float64 { return t.periodBits() / t.Length.Seconds() }

// Bits is the capacity the looping trace offers in [0, at): what a link
// following it could have carried by time at.
func (t *Trace) Bits(at time.Duration) float64 {
	if at <= 0 {
		return 0
	}
	q := int64(at / t.Length)
	r := at % t.Length
	if t.Format == Mahimahi {
		// Opportunities before r in this repetition; every earlier
		// repetition delivered all of its lines, except that the lines
		// at the very end of the previous one (time == Length) fall at
		// exactly at when r is 0, and [0, at) excludes them.
		n := sort.Search(len(t.stamps), func(i int) bool {
			return time.Duration(t.stamps[i])*time.Millisecond >= r
		})
		total := q*int64(len(t.stamps)) + int64(n)
		if r == 0 && q > 0 {
			last := t.stamps[len(t.stamps)-1]
			m := len(t.stamps) - sort.Search(len(t.stamps), func(i int) bool { return t.stamps[i] >= last })
			total -= int64(m)
		}
		return float64(total) * PacketBits
	}
	i := sort.Search(len(t.steps), func(i int) bool { return t.steps[i].Start > r }) - 1
	in := t.stepBits[i] + float64(t.steps[i].Bits)*(r-t.steps[i].Start).Seconds()
	return float64(q)*t.periodBits() + in
}

// Resample returns the mean capacity in bit/s of each interval
// [k*interval, (k+1)*interval) of the looping trace, for as many intervals
// as cover total; the last one, if total is not a multiple of interval, is
// the mean over its shorter stretch.
func (t *Trace) Resample(interval, total time.Duration) ([]uint64, error) {
	if interval <= 0 {
		return nil, fmt.Errorf("trace %s: resample interval %v: give a positive interval", t.Name, interval)
	}
	if total <= 0 || total > MaxLength {
		return nil, fmt.Errorf("trace %s: resample over %v: give a positive time up to %v", t.Name, total, MaxLength)
	}
	n := int((total + interval - 1) / interval)
	if n > 10_000_000 {
		return nil, fmt.Errorf("trace %s: %v in %v intervals is more than 10 million of them: give a longer interval", t.Name, total, interval)
	}
	out := make([]uint64, n)
	prev := 0.0
	for k := range out {
		a := time.Duration(k) * interval
		b := min(a+interval, total)
		cur := t.Bits(b)
		out[k] = uint64(math.Round((cur - prev) / (b - a).Seconds()))
		prev = cur
	}
	return out, nil
}
