// Package units parses and formats the rate, size and time values that tc(8)
// accepts on its command line, so that values users copy from tc examples,
// sqm-scripts' *qdisc_opts and our own flags mean exactly what tc would make
// of them. It owns no state and imports nothing outside the standard library.
//
// # Semantics (iproute2 tc/tc_util.c get_rate64, get_size; lib/utils.c get_time)
//
// Rates (bits per second; suffixes are case-insensitive, as tc uses strcasecmp):
//
//	(none), bit            1 bit/s          bps     8 bit/s  (BYTES per second)
//	kbit                1000 bit/s          kbps    8000 bit/s
//	mbit                10^6 bit/s          mbps    8*10^6 bit/s
//	gbit                10^9 bit/s          gbps    8*10^9 bit/s
//	tbit               10^12 bit/s          tbps    8*10^12 bit/s
//	kibit               1024 bit/s          kibps   8*1024 bit/s
//	mibit             1024^2 bit/s          mibps   8*1024^2 bit/s
//	gibit             1024^3 bit/s          gibps   8*1024^3 bit/s
//	tibit             1024^4 bit/s          tibps   8*1024^4 bit/s
//
// So "20mbit" = "20Mbit" = 20 000 000 bit/s, "8bps" = 64 bit/s, and a bare
// "1000" is 1000 bit/s. There is no "k" or "m" shorthand for rates.
//
// Sizes (bytes; case-insensitive):
//
//	(none), b       1 byte
//	k, kb        1024 bytes             kbit      128 bytes  (1024 bits)
//	m, mb      1024^2 bytes             mbit   131072 bytes  (1024^2 bits)
//	g, gb      1024^3 bytes             gbit  1024^3/8 bytes
//
// So "64k" = 65536, "4Mb" = 4194304 (megaBYTES), "4mbit" = 524288. Sizes are
// limited to 32 bits, like tc's unsigned int.
//
// Times (microseconds; case-insensitive): (none) or us/usec/usecs = 1 µs,
// ms/msec/msecs = 1000 µs, s/sec/secs = 10^6 µs. A bare "5000" is 5 ms.
// Times are limited to 32 bits of microseconds (about 71 minutes), like
// tc's get_time, and fractions of a microsecond are dropped as tc drops them.
//
// # Deliberate differences from tc
//
// tc reads the number with strtod and converts through a double; we read it
// as an exact decimal (digits, an optional fraction, an optional e-exponent),
// so "1.1mbit" is exactly 1 100 000 and huge values fail instead of rounding.
// Signs, hex numbers, "inf", "nan", spaces and percentages are rejected: none
// of them means a sensible rate, size or time (tc's "30%" rates need the
// link speed and are left to callers). Fractional results are truncated
// toward zero, as tc's conversion to an integer does.
package units

import (
	"fmt"
	"math"
	"math/bits"
	"strings"
	"time"
)

// unit is one accepted suffix and its integer scale in the base unit.
type unit struct {
	name  string
	scale uint64
}

// rateUnits follows tc's suffixes[] table; the scale is in bits per second.
// The tables are static data, read only: built by a function on each
// call they cost code and an equality function each (docs/testing.md,
// "Package sizes").
var rateUnits = []unit{
	{"", 1},
	{"bit", 1},
	{"kibit", 1 << 10},
	{"kbit", 1e3},
	{"mibit", 1 << 20},
	{"mbit", 1e6},
	{"gibit", 1 << 30},
	{"gbit", 1e9},
	{"tibit", 1 << 40},
	{"tbit", 1e12},
	{"bps", 8},
	{"kibps", 8 << 10},
	{"kbps", 8e3},
	{"mibps", 8 << 20},
	{"mbps", 8e6},
	{"gibps", 8 << 30},
	{"gbps", 8e9},
	{"tibps", 8 << 40},
	{"tbps", 8e12},
}

// sizeUnits follows tc's get_size; the scale is in bytes.
var sizeUnits = []unit{
	{"", 1},
	{"b", 1},
	{"k", 1 << 10},
	{"kb", 1 << 10},
	{"kbit", 1 << 10 / 8},
	{"m", 1 << 20},
	{"mb", 1 << 20},
	{"mbit", 1 << 20 / 8},
	{"g", 1 << 30},
	{"gb", 1 << 30},
	{"gbit", 1 << 30 / 8},
}

// timeUnits follows tc's get_time; the scale is in microseconds.
var timeUnits = []unit{
	{"", 1},
	{"us", 1},
	{"usec", 1},
	{"usecs", 1},
	{"ms", 1e3},
	{"msec", 1e3},
	{"msecs", 1e3},
	{"s", 1e6},
	{"sec", 1e6},
	{"secs", 1e6},
}

const (
	rateExpect = "a rate such as 20mbit, 830kbit, 1.5gbit, 8bps (bytes/s) or 1000 (bit/s)"
	sizeExpect = "a size such as 1514, 64k, 4mb (bytes) or 12kbit"
	timeExpect = "a time such as 5ms, 16857us, 2.5ms, 1s or 5000 (µs)"
)

// ParseRate parses a tc rate and returns it in bits per second. tc itself
// hands the kernel bytes per second (the result divided by 8, truncated).
func ParseRate(s string) (uint64, error) {
	v, err := parse(s, rateUnits, math.MaxUint64)
	if err != nil {
		return 0, fmt.Errorf("parse rate %q: %w; expected %s", s, err, rateExpect)
	}
	return v, nil
}

// ParseSize parses a tc size and returns it in bytes.
func ParseSize(s string) (uint32, error) {
	v, err := parse(s, sizeUnits, math.MaxUint32)
	if err != nil {
		return 0, fmt.Errorf("parse size %q: %w; expected %s", s, err, sizeExpect)
	}
	return uint32(v), nil
}

// ParseTime parses a tc time. The result is a whole number of microseconds,
// the resolution tc and the kernel's AQM parameters use.
func ParseTime(s string) (time.Duration, error) {
	v, err := parse(s, timeUnits, math.MaxUint32)
	if err != nil {
		return 0, fmt.Errorf("parse time %q: %w; expected %s", s, err, timeExpect)
	}
	return time.Duration(v) * time.Microsecond, nil
}

// FormatRate renders bits per second the way tc prints rates ("20Mbit",
// "830Kbit", "1500Kbit"), but always exactly: the largest 1000-based unit
// that divides the value, so ParseRate(FormatRate(r)) == r.
func FormatRate(bps uint64) string {
	for _, u := range [...]struct {
		name  string
		scale uint64
	}{{"Tbit", 1e12}, {"Gbit", 1e9}, {"Mbit", 1e6}, {"Kbit", 1e3}} {
		if bps != 0 && bps%u.scale == 0 {
			return fmt.Sprintf("%d%s", bps/u.scale, u.name)
		}
	}
	return fmt.Sprintf("%dbit", bps)
}

// FormatSize renders bytes the way tc prints sizes ("1514b", "64Kb", "4Mb"),
// but exactly: ParseSize(FormatSize(n)) == n.
func FormatSize(n uint32) string {
	switch {
	case n != 0 && n%(1<<20) == 0:
		return fmt.Sprintf("%dMb", n>>20)
	case n != 0 && n%(1<<10) == 0:
		return fmt.Sprintf("%dKb", n>>10)
	}
	return fmt.Sprintf("%db", n)
}

// FormatTime renders a duration in tc's units ("5ms", "16.857ms", "1.5s",
// "999us"), exactly to the microsecond; anything finer is truncated, as
// ParseTime would. tc has no negative times, so negative durations render
// as "0us".
func FormatTime(d time.Duration) string {
	if d < 0 {
		d = 0
	}
	us := uint64(d / time.Microsecond)
	switch {
	case us >= 1e6:
		return decimal(us, 1e6, 6) + "s"
	case us >= 1e3:
		return decimal(us, 1e3, 3) + "ms"
	}
	return fmt.Sprintf("%dus", us)
}

// decimal renders v/div with up to places fraction digits, without
// trailing zeros.
func decimal(v, div uint64, places int) string {
	s := fmt.Sprintf("%d", v/div)
	frac := v % div
	if frac == 0 {
		return s
	}
	f := fmt.Sprintf("%0*d", places, frac)
	return s + "." + strings.TrimRight(f, "0")
}

// parse reads an exact decimal number followed by one of units (matched
// case-insensitively) and returns floor(number*scale), failing above max.
func parse(s string, units []unit, max uint64) (uint64, error) {
	if s == "" {
		return 0, fmt.Errorf("empty value")
	}
	digits, exp10, rest, err := scanNumber(s)
	if err != nil {
		return 0, err
	}
	var scale uint64
	found := false
	for _, u := range units {
		if strings.EqualFold(rest, u.name) {
			scale, found = u.scale, true
			break
		}
	}
	if !found {
		return 0, fmt.Errorf("unknown unit %q", rest)
	}
	return scaled(digits, exp10, scale, max)
}

// scanNumber reads digits[.digits][e[+-]digits] from the start of s and
// returns the digits (integer and fraction part together), the power of
// ten to apply to them, and the unparsed rest.
func scanNumber(s string) (digits string, exp10 int, rest string, err error) {
	i := 0
	for i < len(s) && isDigit(s[i]) {
		i++
	}
	d := s[:i]
	fracDigits := 0
	if i < len(s) && s[i] == '.' {
		i++
		j := i
		for i < len(s) && isDigit(s[i]) {
			i++
		}
		d += s[j:i]
		fracDigits = i - j
	}
	if d == "" {
		return "", 0, "", fmt.Errorf("not a number")
	}
	exp := 0
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		// Only an exponent if digits follow; otherwise the 'e' starts a
		// (bad) unit, as with strtod.
		j := i + 1
		neg := false
		if j < len(s) && (s[j] == '+' || s[j] == '-') {
			neg = s[j] == '-'
			j++
		}
		if j < len(s) && isDigit(s[j]) {
			for j < len(s) && isDigit(s[j]) {
				if exp < 100000 {
					exp = exp*10 + int(s[j]-'0')
				}
				j++
			}
			if neg {
				exp = -exp
			}
			i = j
		}
	}
	return d, exp - fracDigits, s[i:], nil
}

// scaled is floor(digits * 10^exp10 * scale), exactly, or an error above
// max. It is long multiplication on the decimal digits with 128-bit
// steps (math/bits) rather than math/big, which costs the router binary
// 0.1 MB for this one function.
func scaled(digits string, exp10 int, scale, max uint64) (uint64, error) {
	tooLarge := fmt.Errorf("too large (at most %d)", max)
	digits = strings.TrimLeft(digits, "0")
	if digits == "" || scale == 0 {
		return 0, nil
	}
	// The integer part and the fraction part of digits * 10^exp10.
	intPart, frac, shift, zeros := digits, "", 0, 0
	switch {
	case exp10 > 0:
		if len(digits)+exp10 > 20 { // at least 10^20 > MaxUint64
			return 0, tooLarge
		}
		zeros = exp10 // after intPart's digits
	case exp10 < 0 && -exp10 >= len(digits):
		intPart, frac, shift = "", digits, -exp10-len(digits)
	case exp10 < 0:
		intPart, frac = digits[:len(digits)+exp10], digits[len(digits)+exp10:]
	}
	var n uint64
	for i := 0; i < len(intPart)+zeros; i++ {
		var d uint64
		if i < len(intPart) {
			d = uint64(intPart[i] - '0')
		}
		hi, lo := bits.Mul64(n, 10)
		lo, c := bits.Add64(lo, d, 0)
		if hi != 0 || c != 0 {
			return 0, tooLarge
		}
		n = lo
	}
	hi, v := bits.Mul64(n, scale)
	if hi != 0 {
		return 0, tooLarge
	}
	// floor(0.frac * scale / 10^shift), from the last digit: for an integer
	// a, floor((a + x) / 10) = floor((a + floor(x)) / 10), so each step can
	// keep only the integer part. Each step's sum is below 10*scale, so its
	// high word is below 10 (div10's condition).
	var q uint64
	for i := len(frac) - 1; i >= 0; i-- {
		hi, lo := bits.Mul64(uint64(frac[i]-'0'), scale)
		lo, c := bits.Add64(lo, q, 0)
		q = div10(hi+c, lo)
	}
	for ; shift > 0 && q > 0; shift-- {
		q /= 10
	}
	v, c := bits.Add64(v, q, 0)
	if c != 0 || v > max {
		return 0, tooLarge
	}
	return v, nil
}

// div10 is (hi<<64 | lo) / 10 for hi < 10, by long division in 32-bit
// limbs: bits.Div64 is 1.4 KB of code on mipsle for this one use.
func div10(hi, lo uint64) uint64 {
	x := hi<<32 | lo>>32 // < 10<<32: the quotient fits 32 bits
	q1, r := x/10, x%10
	x = r<<32 | lo&0xffffffff
	return q1<<32 | x/10
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }
