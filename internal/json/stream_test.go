package json_test

import (
	"bytes"
	stdjson "encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"
	"testing"
	"testing/iotest"

	"sqm/internal/config"
	"sqm/internal/json"
	"sqm/internal/plan"
)

// decodeAll reads values until the decoder stops and describes what it
// got, so both packages' decoders can be compared.
func decodeAll(next func(*any) error) []string {
	var out []string
	for range 10 {
		var v any
		err := next(&v)
		if err != nil {
			kind := "error"
			switch {
			case err == io.EOF:
				kind = "EOF"
			case err == io.ErrUnexpectedEOF:
				kind = "unexpected EOF"
			}
			return append(out, kind)
		}
		out = append(out, fmt.Sprintf("%#v", v))
	}
	return out
}

func TestDecoderStream(t *testing.T) {
	for _, in := range []string{
		``, `  `, `1`, `1 2 3`, `{"a":1}{"b":[2]} "x"` + "\n", `[1,2`, `{"a":}`, `12x`, `"abc`, `true false null`,
		`{"a":1} }`, `-`, "[]\n\n[]  ", `1.5e`, `{"k":"\u00e9"} 0`,
	} {
		for _, rd := range []struct {
			name string
			r    func() io.Reader
		}{
			{"whole", func() io.Reader { return strings.NewReader(in) }},
			{"one byte at a time", func() io.Reader { return iotest.OneByteReader(strings.NewReader(in)) }},
		} {
			ours := json.NewDecoder(rd.r())
			std := stdjson.NewDecoder(rd.r())
			got := decodeAll(func(v *any) error { return ours.Decode(v) })
			want := decodeAll(func(v *any) error { return std.Decode(v) })
			if !reflect.DeepEqual(got, want) {
				t.Errorf("%q (%s): got %v, encoding/json %v", in, rd.name, got, want)
			}
		}
	}
}

// TestDecoderReadsOnlyWhatItNeeds: a Decoder on a connection must return
// a value once it is complete, without waiting for more input.
func TestDecoderReadsOnlyWhatItNeeds(t *testing.T) {
	pr, pw := io.Pipe()
	go pw.Write([]byte(`{"a":[1]}`))
	done := make(chan error)
	go func() {
		var v map[string][]int
		done <- json.NewDecoder(pr).Decode(&v)
	}()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	pw.Close()
}

func TestDecoderErrorOffset(t *testing.T) {
	d := json.NewDecoder(strings.NewReader(`{"a":1}` + "\n" + `{"a":"x"}`))
	var v struct{ A int }
	if err := d.Decode(&v); err != nil {
		t.Fatal(err)
	}
	err := d.Decode(&v)
	if err == nil || !strings.Contains(err.Error(), ".A:") || !strings.Contains(err.Error(), "at byte 13") {
		t.Errorf("second value's error = %v; want the field and the stream offset 13", err)
	}
}

func TestMembers(t *testing.T) {
	for _, tc := range []struct {
		in, want, rest string
		err            error
	}{
		{in: `{}`, want: ``},
		{in: ` {"a" : 1 , "b":{"c":[2]},"a":"\u0078"} tail`, want: `a=1 b={"c":[2]} a="\u0078" `, rest: " tail"},
		{in: `{"\u00e9":null}`, want: `é=null `},
		{in: `[1]`, err: json.ErrNotObject, rest: ""},
		{in: `"x"`, err: json.ErrNotObject},
	} {
		ms, rest, err := json.Members([]byte(tc.in))
		var b strings.Builder
		for _, m := range ms {
			fmt.Fprintf(&b, "%s=%s ", m.Name, m.Value)
		}
		if !errors.Is(err, tc.err) || b.String() != tc.want || string(rest) != tc.rest {
			t.Errorf("Members(%q) = %q, rest %q, %v; want %q, rest %q, %v", tc.in, b.String(), rest, err, tc.want, tc.rest, tc.err)
		}
	}
	for _, in := range []string{``, `{`, `{"a"}`, `{"a":1,}`, `{1:2}`} {
		if _, _, err := json.Members([]byte(in)); err == nil || errors.Is(err, json.ErrNotObject) {
			t.Errorf("Members(%q) = %v; want a syntax error", in, err)
		}
	}
}

// typicalPlan is what `sqm plan` prints for a cake section with ingress
// shaping: the value sqm encodes on every apply and decodes on restore.
func typicalPlan(b testing.TB) *plan.Plan {
	q := &config.Queue{
		Name: "wan", Interface: "wan0", Enabled: true,
		Download: 85000, Upload: 10000, Qdisc: "cake", Script: "piece_of_cake.qos",
		SquashDSCP: true, SquashIngress: true, IngressECN: true, EgressECN: true,
		LinkLayer: "ethernet", Overhead: 34, StabMTU: 2047, StabTSize: 512, LLAM: "default",
	}
	p, err := plan.Build(q, plan.Env{MTU: 1500})
	if err != nil {
		b.Fatal(err)
	}
	return p
}

func BenchmarkPlan(b *testing.B) {
	p := typicalPlan(b)
	data, _ := stdjson.Marshal(p)
	b.Logf("plan: %d bytes of JSON", len(data))
	for _, c := range []struct {
		name      string
		marshal   func(any) ([]byte, error)
		unmarshal func([]byte, any) error
	}{
		{"sqm", json.Marshal, json.Unmarshal},
		{"encoding-json", stdjson.Marshal, stdjson.Unmarshal},
	} {
		b.Run("Marshal/"+c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := c.marshal(p); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run("Unmarshal/"+c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				var q plan.Plan
				if err := c.unmarshal(data, &q); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func TestTypicalPlan(t *testing.T) {
	p := typicalPlan(t)
	a, err := json.MarshalIndent(p, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := stdjson.MarshalIndent(p, "", "  ")
	if !bytes.Equal(a, b) {
		t.Fatalf("plan:\n%s\nencoding/json:\n%s", a, b)
	}
	var back plan.Plan
	if err := json.Unmarshal(a, &back); err != nil || !reflect.DeepEqual(&back, p) {
		t.Fatalf("plan does not survive a round trip: %v\n%#v\n%#v", err, &back, p)
	}
}

// TestDisallowUnknownFields holds the strict decoder (the page's API
// bodies) to encoding/json's: which inputs fail, and what is still
// stored when one does.
func TestDisallowUnknownFields(t *testing.T) {
	type inner struct {
		A int `json:"a"`
	}
	type body struct {
		Name  string           `json:"name"`
		In    inner            `json:"in"`
		Map   map[string]inner `json:"map"`
		Items []inner          `json:"items"`
	}
	for _, in := range []string{
		`{"name":"x"}`,
		`{"NAME":"x"}`,
		`{"name":"x","nmae":"y"}`,
		`{"nmae":"y","name":"x"}`,
		`{"in":{"a":1,"b":2}}`,
		`{"map":{"k":{"a":1,"z":0}}}`,
		`{"items":[{"a":1},{"c":3}]}`,
		`{"name":1,"extra":true}`,
	} {
		var got, want body
		dec := json.NewDecoder(strings.NewReader(in))
		dec.DisallowUnknownFields()
		err := dec.Decode(&got)
		sdec := stdjson.NewDecoder(strings.NewReader(in))
		sdec.DisallowUnknownFields()
		serr := sdec.Decode(&want)
		if (err == nil) != (serr == nil) {
			t.Errorf("%s: error %v; encoding/json's %v", in, err, serr)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: stored %+v; encoding/json %+v", in, got, want)
		}
		if err != nil && serr != nil && strings.Contains(serr.Error(), "unknown field") != strings.Contains(err.Error(), "unknown field") {
			t.Errorf("%s: %q and encoding/json's %q disagree on the reason", in, err, serr)
		}
	}
	// Without the option the same inputs decode, as before.
	var b body
	if err := json.NewDecoder(strings.NewReader(`{"nmae":"y"}`)).Decode(&b); err != nil {
		t.Errorf("lenient decoder: %v", err)
	}
}
