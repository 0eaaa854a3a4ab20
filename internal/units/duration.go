package units

import (
	"flag"
	"fmt"
	"math"
	"strconv"
	"time"
)

// durationExpect is what ParseDuration accepts, for error messages.
const durationExpect = "a duration such as 10 (seconds), 2.5, 90s, 1m30s or 250ms"

// ParseDuration parses a command-line duration: either Go's notation
// ("1m30s", "250ms", "2h") or a bare decimal number of seconds ("10",
// "2.5"). Bare seconds are what flent's -l, iperf3's -t and UCI options
// such as check_interval take, so `sqm lab --duration 10` means what a
// user of those tools expects. (tc's times, where a bare number is
// microseconds, are ParseTime's business, not this.) Negative durations
// are refused: no sqm flag has a use for one.
func ParseDuration(s string) (time.Duration, error) {
	if s == "" {
		return 0, fmt.Errorf("parse duration: empty value; expected %s", durationExpect)
	}
	if isBareNumber(s) {
		f, err := strconv.ParseFloat(s, 64)
		if err != nil || f*float64(time.Second) > math.MaxInt64 {
			return 0, fmt.Errorf("parse duration %q: too large; expected %s", s, durationExpect)
		}
		return time.Duration(math.Round(f * float64(time.Second))), nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("parse duration %q: not a number of seconds or a Go duration; expected %s", s, durationExpect)
	}
	if d < 0 {
		return 0, fmt.Errorf("parse duration %q: negative; expected %s", s, durationExpect)
	}
	return d, nil
}

// isBareNumber reports whether s is digits with at most one decimal point
// and at least one digit: no sign, exponent or unit.
func isBareNumber(s string) bool {
	digits, dots := 0, 0
	for i := 0; i < len(s); i++ {
		switch {
		case isDigit(s[i]):
			digits++
		case s[i] == '.':
			dots++
		default:
			return false
		}
	}
	return digits > 0 && dots <= 1
}

// durationValue is a flag.Value (and flag.Getter, whose Get returns a
// time.Duration) that parses with ParseDuration.
type durationValue time.Duration

func (d *durationValue) Set(s string) error {
	v, err := ParseDuration(s)
	if err != nil {
		return err
	}
	*d = durationValue(v)
	return nil
}

func (d *durationValue) String() string { return time.Duration(*d).String() }
func (d *durationValue) Get() any       { return time.Duration(*d) }

// DurationVar defines a duration flag that also takes bare seconds; it is
// flag.FlagSet.DurationVar with ParseDuration's syntax. Every sqm command
// that takes a duration uses it, so they all accept the same spellings.
func DurationVar(fs *flag.FlagSet, p *time.Duration, name string, value time.Duration, usage string) {
	*p = value
	fs.Var((*durationValue)(p), name, usage)
}

// DurationFlag is DurationVar returning a new variable, like
// flag.FlagSet.Duration.
func DurationFlag(fs *flag.FlagSet, name string, value time.Duration, usage string) *time.Duration {
	p := new(time.Duration)
	DurationVar(fs, p, name, value, usage)
	return p
}
