package plan

import (
	"math"
	"strconv"
	"strings"
	"time"
)

// The parsers below read values the way tc(8) does (iproute2 utils.c
// get_rate64, get_size, get_time, get_unsigned), because iqdisc_opts and
// eqdisc_opts are written in tc syntax and sqm-scripts passed them to tc
// unchanged. They are private on purpose: the config engineer's
// internal/units package was not committed when the planner was written;
// switch to it once it parses exactly this syntax.

// rateSuffixes maps tc's rate units to bits per second. tc compares them
// case-insensitively, so "KBps" and "kbps" are the same (bytes).
var rateSuffixes = []struct {
	name  string
	scale float64
}{
	{"bit", 1}, {"kibit", 1024}, {"kbit", 1000}, {"mibit", 1024 * 1024}, {"mbit", 1000000},
	{"gibit", 1024 * 1024 * 1024}, {"gbit", 1000000000}, {"tibit", 1024 * 1024 * 1024 * 1024},
	{"tbit", 1000000000000}, {"bps", 8}, {"kibps", 8 * 1024}, {"kbps", 8000},
	{"mibps", 8 * 1024 * 1024}, {"mbps", 8000000}, {"gibps", 8 * 1024 * 1024 * 1024},
	{"gbps", 8000000000}, {"tibps", 8 * 1024 * 1024 * 1024 * 1024}, {"tbps", 8000000000000},
}

// splitNumber splits "10.5mbit" into 10.5 and "mbit". Only plain decimal
// numbers are accepted (no hex, exponents, signs, inf or nan), which is
// stricter than strtod but never rejects a value anyone writes.
func splitNumber(s string) (float64, string, bool) {
	i := 0
	dot := false
	for i < len(s) && (s[i] >= '0' && s[i] <= '9' || s[i] == '.' && !dot) {
		if s[i] == '.' {
			dot = true
		}
		i++
	}
	if i == 0 || s[:i] == "." {
		return 0, "", false
	}
	v, err := strconv.ParseFloat(s[:i], 64)
	if err != nil {
		return 0, "", false
	}
	return v, s[i:], true
}

// maxRateBits (1 Pbit/s) bounds rates far above any link while keeping
// every accepted value exact in a float64.
const maxRateBits = 1e15

// parseRate reads a tc rate ("10mbit", "1.5gbit", "1000kbps") and returns
// bits per second. A bare number is bits per second, as in tc.
func parseRate(s string) (uint64, bool) {
	v, unit, ok := splitNumber(s)
	if !ok {
		return 0, false
	}
	scale := 0.0
	if unit == "" {
		scale = 1
	}
	for _, r := range rateSuffixes {
		if strings.EqualFold(unit, r.name) {
			scale = r.scale
			break
		}
	}
	if scale == 0 {
		return 0, false
	}
	bits := v * scale
	if bits >= maxRateBits {
		return 0, false
	}
	return uint64(bits), true
}

// parseSize reads a tc size ("4Mb", "1500", "64k", "8kbit") and returns
// bytes. k, m and g are binary (1024) multiples, as in tc.
func parseSize(s string) (uint32, bool) {
	v, unit, ok := splitNumber(s)
	if !ok {
		return 0, false
	}
	switch strings.ToLower(unit) {
	case "", "b":
	case "k", "kb":
		v *= 1024
	case "m", "mb":
		v *= 1024 * 1024
	case "g", "gb":
		v *= 1024 * 1024 * 1024
	case "kbit":
		v *= 1024 / 8
	case "mbit":
		v *= 1024 * 1024 / 8
	case "gbit":
		v *= 1024 * 1024 * 1024 / 8
	default:
		return 0, false
	}
	if v > math.MaxUint32 {
		return 0, false
	}
	return uint32(v), true
}

// parseTime reads a tc time ("5ms", "100000us", "1.5s"); a bare number
// is microseconds, as in tc. Results are whole microseconds.
func parseTime(s string) (time.Duration, bool) {
	v, unit, ok := splitNumber(s)
	if !ok {
		return 0, false
	}
	switch strings.ToLower(unit) {
	case "s", "sec", "secs":
		v *= 1e6
	case "ms", "msec", "msecs":
		v *= 1e3
	case "", "us", "usec", "usecs":
	default:
		return 0, false
	}
	if v > math.MaxUint32 { // the kernel takes times as u32 microseconds
		return 0, false
	}
	return time.Duration(v) * time.Microsecond, true
}

// parseUint32 reads an unsigned integer like tc's get_unsigned (base 0:
// decimal, 0x hex or 0 octal).
func parseUint32(s string) (uint32, bool) {
	v, err := strconv.ParseUint(s, 0, 32)
	if err != nil {
		return 0, false
	}
	return uint32(v), true
}
