package json

import (
	"errors"
	"strconv"
	"time"
)

// parseTime reads a time.Time from the bytes between a JSON string's
// quotes, taken as they are (not unescaped), and accepts exactly what
// time.Time's UnmarshalJSON accepts, with the same result: since Go 1.20
// that is what time.Parse(time.RFC3339, s) takes (its stricter checks
// are disabled), an hour of one digit and a comma before the fraction
// included, and an offset that is the local zone's at that time gives
// time.Local, any other a time.FixedZone.
//
// It is here, not in time, because calling UnmarshalJSON or UnmarshalText
// through an interface makes the linker keep every such method of every
// type that is ever stored in an interface: time.Time's links time's
// whole layout parser (time.parse and its helpers: 25 KB less in the
// router build on mipsle with this), which sqm needs for one layout only.
// TestTimeLikeTime holds it to time's own parser.
func parseTime(b []byte) (time.Time, error) {
	var f [8]int // year, month, day, hour, minute, second, nanosecond, offset
	if why := timeFields(b, &f); why != "" {
		return time.Time{}, errors.New("parsing time " + strconv.Quote(string(b)) + " as RFC 3339: " + why)
	}
	t := time.Date(f[0], time.Month(f[1]), f[2], f[3], f[4], f[5], f[6], time.UTC)
	if b[len(b)-1] == 'Z' {
		return t, nil
	}
	offset := f[7]
	t = t.Add(-time.Duration(offset) * time.Second)
	if _, o := t.In(time.Local).Zone(); o == offset {
		return t.In(time.Local), nil
	}
	return t.In(time.FixedZone("", offset)), nil
}

// timeFields reads b's fields into f (parseTime's order) and says what
// is wrong with it, or "". (Returning a time.Time from each place that
// refuses one costs 1.5 KB of code on mipsle.)
func timeFields(b []byte, f *[8]int) string {
	const form = "not in the form 2006-01-02T15:04:05Z07:00"
	// The date and the time of day: digits where the layout has 0, its
	// other bytes as they are, each run of digits one field.
	const layout = "0000-00-00T00:00:00"
	s, k := b, 0
	for j := 0; j < len(layout); j++ {
		switch c := layout[j]; {
		case len(s) == 0:
			return form
		case c != '0':
			if s[0] != c {
				return form
			}
			k++
		case s[0] >= '0' && s[0] <= '9':
			f[k] = f[k]*10 + int(s[0]-'0')
		case j == 12 && s[0] == ':':
			// time.Parse's hour ("15") may have one digit
			continue
		default:
			return form
		}
		s = s[1:]
	}
	for i, max := range [...]int{1: 12, 3: 23, 4: 59, 5: 59} {
		if max > 0 && (f[i] > max || i == 1 && f[i] == 0) {
			return [...]string{1: "month", 3: "hour", 4: "minute", 5: "second"}[i] + " out of range"
		}
	}
	if len(s) >= 2 && (s[0] == '.' || s[0] == ',') && s[1] >= '0' && s[1] <= '9' {
		// Any number of digits; the first nine count.
		n := 1
		for ; n < len(s) && s[n] >= '0' && s[n] <= '9'; n++ {
			if n <= 9 {
				f[6] = f[6]*10 + int(s[n]-'0')
			}
		}
		for i := n; i <= 9; i++ {
			f[6] *= 10
		}
		s = s[n:]
	}
	if len(s) > 0 && s[0] == 'Z' {
		s = s[1:]
	} else {
		if len(s) < 6 || s[0] != '+' && s[0] != '-' || s[3] != ':' {
			return form
		}
		for _, c := range [...]byte{s[1], s[2], s[4], s[5]} {
			if c < '0' || c > '9' {
				return form
			}
		}
		hh, mm := int(s[1]-'0')*10+int(s[2]-'0'), int(s[4]-'0')*10+int(s[5]-'0')
		// time.Parse takes 24 hours and 60 minutes: some write them.
		if hh > 24 || mm > 60 {
			return "time zone offset out of range"
		}
		if f[7] = (hh*60 + mm) * 60; s[0] == '-' {
			f[7] = -f[7]
		}
		s = s[6:]
	}
	if len(s) != 0 {
		return "extra text " + strconv.Quote(string(s))
	}
	year, month, day := f[0], f[1], f[2]
	days := 31
	switch month {
	case 2:
		days = 28
		if year%4 == 0 && (year%100 != 0 || year%400 == 0) {
			days = 29
		}
	case 4, 6, 9, 11:
		days = 30
	}
	if day < 1 || day > days {
		return "day out of range"
	}
	return ""
}
