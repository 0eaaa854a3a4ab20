package json_test

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"sqm/internal/json"
)

// timeInputs are the contents of JSON strings decoded into a time.Time:
// what sqm writes, and every way time.Parse(time.RFC3339) accepts or
// refuses one (it is what time.Time's UnmarshalJSON falls back to).
var timeInputs = []string{
	"2026-12-01T23:00:00Z", "2026-12-01T23:00:00.123456789Z", "2026-12-01T23:00:00.5+01:00",
	"2026-12-02T04:03:02.000000001-07:30", "0000-01-01T00:00:00Z", "9999-12-31T23:59:59.999999999Z",
	"2024-02-29T00:00:00Z", "2023-02-29T00:00:00Z", "2000-02-29T00:00:00Z", "1900-02-29T00:00:00Z",
	"2026-04-31T00:00:00Z", "2026-04-30T00:00:00Z", "2026-00-10T00:00:00Z", "2026-13-10T00:00:00Z",
	"2026-12-00T00:00:00Z", "2026-12-32T00:00:00Z", "2026-12-01T24:00:00Z", "2026-12-01T23:60:00Z",
	"2026-12-01T23:00:60Z", "2026-12-01T5:00:00Z", "2026-12-01T:00:00Z", "2026-12-01t23:00:00Z",
	"2026-12-01T23:00:00z", "2026-12-01 23:00:00Z", "2026-12-01T23:00:00", "2026-12-01T23:00Z",
	"2026-12-01T23:00:00,5Z", "2026-12-01T23:00:00.Z", "2026-12-01T23:00:00.1234567891234Z",
	"2026-12-01T23:00:00.5.5Z", "2026-12-01T23:00:00+24:00", "2026-12-01T23:00:00+25:00",
	"2026-12-01T23:00:00-00:60", "2026-12-01T23:00:00-00:61", "2026-12-01T23:00:00+0100",
	"2026-12-01T23:00:00+01:0", "2026-12-01T23:00:00*01:00", "2026-12-01T23:00:00+01:00 ",
	"2026-12-01T23:00:00+01:00Z", "2026-12-01T23:00:00ZZ", "+2026-12-01T23:00:00Z", "226-12-01T23:00:00Z",
	"20a6-12-01T23:00:00Z", "2026-1-01T23:00:00Z", "2026-12-1T23:00:00Z", "2026-12-01T23:0:00Z",
	"2026-12-01T23:00:0Z", "2026-12-01T23:00:00+1:00", "2026-12-01T23:00:00+01:a0", "2026-12-01T23:00:00+a1:00",
	"2026-12-01T23:00:00\\u005a", "", "Z", "2026", "2026-12-01T23:00:00+00:00", "2026-06-01T12:00:00+02:00",
	"2026-12-01T23:00:00.000Z", "2026-12-01T23:00:00.0000000000000000000000000001Z", "2026-12-01T23:00:00-01:00",
}

// TestTimeLikeTime holds internal/json's own RFC 3339 reader to what
// time.Time's UnmarshalJSON does with the same JSON string: the same
// inputs refused, the same times (location included) stored, with
// time.Local as UTC and as a zone with an offset that inputs use.
func TestTimeLikeTime(t *testing.T) {
	defer func(l *time.Location) { time.Local = l }(time.Local)
	for _, local := range []*time.Location{time.UTC, time.FixedZone("CET", 3600), time.FixedZone("", -7*3600-30*60)} {
		time.Local = local
		for _, in := range timeInputs {
			if err := sameTime(`"` + in + `"`); err != "" {
				t.Errorf("Local %v: %s", local, err)
			}
		}
	}
	for _, in := range []string{`null`, `1`, `true`, `{}`, `["2026-12-01T23:00:00Z"]`} {
		if err := sameTime(in); err != "" {
			t.Error(err)
		}
	}
}

func sameTime(in string) string {
	mine, std := time.Unix(7, 0), time.Unix(7, 0) // null leaves them alone
	errA := json.Unmarshal([]byte(in), &mine)
	errB := std.UnmarshalJSON([]byte(in))
	switch {
	case (errA == nil) != (errB == nil):
		return in + ": sqm/internal/json says " + errString(errA) + ", time.Time says " + errString(errB)
	case errA != nil && !strings.Contains(errA.Error(), "Time.UnmarshalJSON"):
		return in + ": the error does not name the method it stands for: " + errA.Error()
	case !reflect.DeepEqual(mine, std):
		return in + ": sqm/internal/json stores " + mine.String() + ", time.Time " + std.String()
	}
	return ""
}

func errString(err error) string {
	if err == nil {
		return "ok"
	}
	return err.Error()
}

// FuzzTime runs the same comparison on any string content.
func FuzzTime(f *testing.F) {
	for _, in := range timeInputs {
		f.Add(in)
	}
	f.Fuzz(func(t *testing.T, in string) {
		if !json.Valid([]byte(`"` + in + `"`)) {
			return
		}
		if err := sameTime(`"` + in + `"`); err != "" {
			t.Error(err)
		}
	})
}

type textOnly struct{ s string }

func (x *textOnly) UnmarshalText(b []byte) error { x.s = string(b); return nil }

type embedsTime struct{ time.Time }

// TestStandardMethodsRefused: a type with only UnmarshalText or
// UnmarshalJSON (one embedding time.Time has the latter) is refused
// with an error naming the method to add, not decoded some other way.
func TestStandardMethodsRefused(t *testing.T) {
	for _, tc := range []struct {
		in   string
		v    any
		want []string
	}{
		{`"x"`, new(textOnly), []string{"json_test.textOnly", "has UnmarshalText", "DecodeJSONString", "at byte 0"}},
		{`{"A":"x"}`, new(struct{ A textOnly }), []string{".A", "has UnmarshalText", "at byte 5"}},
		{`"2026-12-01T23:00:00Z"`, new(embedsTime), []string{"json_test.embedsTime", "has UnmarshalJSON", "DecodeJSON"}},
		{`{}`, new(embedsTime), []string{"has UnmarshalJSON"}},
	} {
		err := json.Unmarshal([]byte(tc.in), tc.v)
		if err == nil {
			t.Errorf("%s into %T: no error", tc.in, tc.v)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s into %T: %q does not say %q", tc.in, tc.v, err, w)
			}
		}
	}
	// null takes no text method: it leaves the value alone, as in encoding/json.
	if err := json.Unmarshal([]byte(`null`), new(textOnly)); err != nil {
		t.Errorf("null into a textOnly: %v", err)
	}
}
