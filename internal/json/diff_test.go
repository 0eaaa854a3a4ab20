package json_test

import (
	"bufio"
	"bytes"
	stdjson "encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"sqm/internal/bloat"
	"sqm/internal/config"
	"sqm/internal/iperf3"
	"sqm/internal/json"
	"sqm/internal/json/jsontest"
	"sqm/internal/plan"
	"sqm/internal/rpm"
	"sqm/internal/service"
	"sqm/internal/tune"
)

type inner struct {
	A int    `json:"a"`
	B string `json:"b,omitempty"`
}

type Embedded struct {
	E      int
	Shadow string `json:"shadow"`
	Deep   string
}

type Embedded2 struct {
	Deep string // ties with Embedded.Deep: both hidden
	F    float32
}

// kitchen has one of each shape the codec handles, for the fuzzers.
type kitchen struct {
	Embedded
	Embedded2
	Shadow int `json:"shadow"` // shallower than Embedded.Shadow: wins
	I8     int8
	I16    int16
	I32    int32
	I64    int64 `json:"i64,omitempty"`
	U      uint
	U8     uint8
	U16    uint16
	U32    uint32
	U64    uint64 `json:"u64,omitempty"`
	F32    float32
	F64    float64 `json:"f64,omitempty"`
	S      string  `json:"s,omitempty"`
	Bo     bool    `json:"b"`
	Bytes  []byte  `json:"bytes,omitempty"`
	Raw    json.RawMessage
	P      *inner
	PP     **int
	Any    any
	Arr    [2]inner
	Sl     []inner
	M      map[string]*inner
	MI     map[int8]string
	MU     map[uint16]bool
	H      plan.Handle  `json:"h"`
	HP     *plan.Handle `json:"hp,omitempty"`
	T      time.Time
	Skip   int `json:"-"`
	Dash   int `json:"-,"`
	Str    fmt.Stringer
	Ints   []int `json:",omitempty"`
	hidden int
}

// targets are the types the differential tests decode into: what sqm
// writes and reads, and kitchen for the shapes they do not cover.
var targets = []struct {
	name string
	new  func() any
}{
	{"any", func() any { return new(any) }},
	{"plan.Plan", func() any { return new(plan.Plan) }},
	{"service.State", func() any { return new(service.State) }},
	{"[]service.Refused", func() any { return new([]service.Refused) }},
	{"config.Queue", func() any { return new(config.Queue) }},
	{"iperf3.Params", func() any { return new(iperf3.Params) }},
	{"iperf3.Results", func() any { return new(iperf3.Results) }},
	{"bloat.Result", func() any { return new(bloat.Result) }},
	{"rpm.Result", func() any { return new(rpm.Result) }},
	{"tune.Result", func() any { return new(tune.Result) }},
	{"kitchen", func() any { return new(kitchen) }},
	{"map[string]int", func() any { return new(map[string]int) }},
	{"map[int16]*float32", func() any { return new(map[int16]*float32) }},
	{"[3]uint8", func() any { return new([3]uint8) }},
	{"[]byte", func() any { return new([]byte) }},
	{"string", func() any { return new(string) }},
	{"plan.Handle", func() any { return new(plan.Handle) }},
	{"*int64", func() any { return new(*int64) }},
	{"time.Time", func() any { return new(time.Time) }},
}

// seeds are inputs for the fuzzers: small cases here, and the plans,
// status documents and results in the repository's golden files.
var seeds = []string{
	`null`, `true`, `1`, `-0`, `1e400`, `1.5e-7`, `"x"`, `[]`, `{}`, ` {"a" : [1, 2.5, "\u00e9\ud83d\ude00\ud800"]} `,
	`{"I8":127,"i8":-128,"U8":256,"U16":65535,"u32":-1,"F32":3.5e38,"F32":1e39}`,
	`{"shadow":1,"E":2,"Deep":"x","F":1.5,"b":true,"bytes":"aGk=","Raw":{"x": [ 1 ]},"P":{"a":1,"A":2},"PP":3}`,
	`{"Any":{"k":[null,false,{"z":1e21}]},"Arr":[{"a":1},{"a":2},{"a":3}],"Sl":[{"b":"q"}],"M":{"k":null,"j":{"a":1}}}`,
	`{"MI":{"-128":"a","12":"b"},"MU":{"70000":true},"h":"1:10","hp":"ffff:","T":"2026-12-01T23:00:00.5+01:00"}`,
	`{"Skip":1,"-":2,"Str":null,"Ints":[1,2],"hidden":3,"unknown":{"deep":[[]]}}`,
	`{"Str":"x"}`, `{"h":1}`, `{"h":"zz"}`, `{"bytes":"!!"}`, `{"Sl":{}}`, `{"K\u212a":1}`,
	`"\u2028<>&\u0000\u001f\\\"/"`, `[1,2,3,4]`, `{"1":1.5,"-32768":null,"x":1}`,
}

func loadSeeds(t testing.TB) []string {
	out := append([]string(nil), seeds...)
	files, _ := filepath.Glob("../plan/testdata/*.jsonl")
	for _, f := range files[:min(len(files), 6)] {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(bytes.NewReader(b))
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			var line struct{ Plan stdjson.RawMessage }
			if stdjson.Unmarshal(sc.Bytes(), &line) == nil && line.Plan != nil {
				out = append(out, string(line.Plan))
			}
		}
	}
	for _, f := range []string{"../cli/testdata/status.json.golden", "../tune/testdata/seed004.json.golden"} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, string(b))
	}
	return out
}

func TestDifferential(t *testing.T) {
	for _, s := range loadSeeds(t) {
		for _, tg := range targets {
			if err := jsontest.Unmarshal([]byte(s), tg.new); err != nil {
				t.Errorf("%s: %v", tg.name, err)
			}
		}
		roundTrip(t, []byte(s))
	}
}

// roundTrip checks the parts that take input directly (Valid, Compact)
// and the encoders on what encoding/json decodes from data.
func roundTrip(t *testing.T, data []byte) {
	if a, b := json.Valid(data), stdjson.Valid(data); a != b {
		t.Fatalf("Valid(%q) = %v, encoding/json says %v", data, a, b)
	}
	var ca, cb bytes.Buffer
	ea, eb := json.Compact(&ca, data), stdjson.Compact(&cb, data)
	if (ea == nil) != (eb == nil) || !bytes.Equal(ca.Bytes(), cb.Bytes()) {
		t.Fatalf("Compact(%q) = %q, %v; encoding/json gives %q, %v", data, ca.Bytes(), ea, cb.Bytes(), eb)
	}
	if err := jsontest.Marshal(string(data)); err != nil {
		t.Fatal(err)
	}
	if err := jsontest.Marshal(json.RawMessage(data)); err != nil {
		t.Fatal(err)
	}
	for _, tg := range targets {
		v := tg.new()
		if stdjson.Unmarshal(data, v) != nil {
			continue
		}
		if err := jsontest.Marshal(v); err != nil {
			t.Fatalf("%s: %v", tg.name, err)
		}
	}
}

func FuzzUnmarshal(f *testing.F) {
	for _, s := range loadSeeds(f) {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, tg := range targets {
			if err := jsontest.Unmarshal(data, tg.new); err != nil {
				t.Fatalf("%s: %v", tg.name, err)
			}
		}
	})
}

func FuzzRoundTrip(f *testing.F) {
	for _, s := range loadSeeds(f) {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) { roundTrip(t, data) })
}

// TestEncodeValues covers values no decoded input produces: floats at
// the format boundaries, NaN, invalid UTF-8, cycles, nil containers.
func TestEncodeValues(t *testing.T) {
	h := plan.Handle(0x10010)
	type cyc struct{ Next *cyc }
	loop := &cyc{}
	loop.Next = loop
	for _, v := range []any{
		nil, 0.0, math.Copysign(0, -1), 1e21, 999999999999999999999.0, 1e-6, 9.99e-7, 1e-7, 5e-324, math.MaxFloat64,
		float32(1e21), float32(1e-6), float32(9.99e-7), float32(0.1), float32(math.MaxFloat32), float32(16777217),
		math.NaN(), math.Inf(1), float32(math.Inf(-1)), []float64{1, math.NaN()},
		"\xff\xfe<a href='x'>&amp;</a>\u2028\u2029\x7f\x00\x1f\t", []string(nil), []string{}, map[string]int(nil), map[string]int{},
		map[int]string{10: "a", 9: "b", -1: "c"}, map[uint8]bool{200: true, 3: false}, [0]int{}, [2]bool{true},
		[]byte(nil), []byte{}, []byte("hello, world"), h, &h, []plan.Handle{1, 2}, map[string]plan.Handle{"a": 3},
		json.RawMessage(nil), json.RawMessage(` { "a" : "<&>" } `), json.RawMessage(`{bad`), (*int)(nil), new(*int), loop,
		make(chan int), func() {}, complex(1, 2), struct{ C chan int }{}, kitchen{}, &kitchen{Ints: []int{}, S: "s", Bo: true},
		time.Date(2026, 12, 1, 23, 0, 0, 5, time.UTC), time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC),
		map[string]any{"z": []any{1, "2", nil, map[string]any{}}, "a": struct{}{}, "\u2028": 1},
	} {
		if err := jsontest.Marshal(v); err != nil {
			t.Error(err)
		}
	}
}

func TestEncodeExact(t *testing.T) {
	for _, tc := range []struct {
		v    any
		want string
	}{
		{1e21, `1e+21`},
		{1e-7, `1e-7`},
		{123456789.0, `123456789`},
		{float32(0.1), `0.1`},
		{"<&>\u2028\xff", `"\u003c\u0026\u003e\u2028\ufffd"`},
		{map[int]int{10: 1, 9: 2}, `{"10":1,"9":2}`},
		{[]byte("hi"), `"aGk="`},
		{plan.Handle(0x10010), `"1:10"`},
		{struct {
			A int `json:"a,omitempty"`
			B []int
		}{}, `{"B":null}`},
	} {
		got, err := json.Marshal(tc.v)
		if err != nil || string(got) != tc.want {
			t.Errorf("Marshal(%#v) = %s, %v; want %s", tc.v, got, err, tc.want)
		}
	}
	got, _ := json.MarshalIndent(map[string]any{"a": []int{}, "b": map[string]int{}, "c": []int{1, 2}}, "", "  ")
	if want := "{\n  \"a\": [],\n  \"b\": {},\n  \"c\": [\n    1,\n    2\n  ]\n}"; string(got) != want {
		t.Errorf("MarshalIndent = %q, want %q", got, want)
	}
}

// TestErrors checks that errors say what and where: the byte offset and,
// when decoding into a known type, the Go path to the field.
func TestErrors(t *testing.T) {
	type stringOpt struct {
		N int `json:"n,string"`
	}
	type omitZero struct {
		N int `json:"n,omitzero"`
	}
	type embPtr struct {
		*inner
	}
	type cyc struct{ Next *cyc }
	loop := &cyc{}
	loop.Next = loop
	deep := strings.Repeat("[", 10001) + strings.Repeat("]", 10001)
	for _, tc := range []struct {
		name string
		err  func() error
		want []string
	}{
		{"syntax", func() error { return json.Unmarshal([]byte(`{"a":1,}`), new(any)) }, []string{"unexpected character '}'", "object key", "at byte 7"}},
		{"end", func() error { return json.Unmarshal([]byte(`[1,`), new(any)) }, []string{"unexpected end of input", "at byte 3"}},
		{"trailing", func() error { return json.Unmarshal([]byte(`1 2`), new(any)) }, []string{"after the top-level value", "at byte 2"}},
		{"control", func() error { return json.Unmarshal([]byte("\"a\nb\""), new(any)) }, []string{"byte 0xa", "control characters", "at byte 2"}},
		{"type with path", func() error { return json.Unmarshal([]byte(`{"Sl":[{"a":1},{"a":"x"}]}`), new(kitchen)) },
			[]string{"json_test.kitchen.Sl[1].A", "cannot store a string in a Go int", "at byte 20"}},
		{"range", func() error { return json.Unmarshal([]byte(`{"I8":128}`), new(kitchen)) }, []string{"kitchen.I8", "number 128", "int8"}},
		{"map key", func() error { return json.Unmarshal([]byte(`{"MI":{"x":"y"}}`), new(kitchen)) }, []string{`kitchen.MI`, `key "x"`, "int8"}},
		{"map path", func() error { return json.Unmarshal([]byte(`{"M":{"k":{"a":true}}}`), new(kitchen)) }, []string{`kitchen.M["k"].A`, "bool"}},
		{"text method", func() error { return json.Unmarshal([]byte(`{"h":"zz"}`), new(kitchen)) }, []string{"kitchen.H", "DecodeJSONString", "parse handle", "at byte 5"}},
		{"base64", func() error { return json.Unmarshal([]byte(`{"bytes":"!"}`), new(kitchen)) }, []string{"kitchen.Bytes", "base64"}},
		{"not a pointer", func() error { return json.Unmarshal([]byte(`1`), kitchen{}) }, []string{"non-nil pointer", "json_test.kitchen"}},
		{"depth", func() error { return json.Unmarshal([]byte(deep), new(any)) }, []string{"nested more than 10000"}},
		{",string", func() error { return json.Unmarshal([]byte(`{}`), new(stringOpt)) }, []string{"stringOpt.N", `"string" is not supported`}},
		{",omitzero", func() error { _, err := json.Marshal(omitZero{}); return err }, []string{"omitZero.N", `"omitzero" is not supported`}},
		{"embedded pointer", func() error { _, err := json.Marshal(embPtr{}); return err }, []string{"embPtr.inner", "embedded pointer"}},
		{"NaN", func() error { _, err := json.Marshal(&kitchen{F64: math.NaN()}); return err }, []string{"encoding json_test.kitchen.F64", "NaN"}},
		{"cycle", func() error { _, err := json.Marshal(loop); return err }, []string{"json_test.cyc.Next.Next", "nested more than"}},
		{"bad RawMessage", func() error { _, err := json.Marshal([]json.RawMessage{[]byte(`{`)}); return err }, []string{"[0]", "MarshalJSON", "bad JSON"}},
		{"map key type", func() error { _, err := json.Marshal(map[plan.Handle]int{1: 1}); return err }, []string{"plan.Handle", "not supported"}},
	} {
		err := tc.err()
		if err == nil {
			t.Errorf("%s: no error", tc.name)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %q does not say %q", tc.name, err, w)
			}
		}
	}
	// The depth limit is encoding/json's: 10000 levels are fine.
	ok := strings.Repeat("[", 10000) + strings.Repeat("]", 10000)
	if err := json.Unmarshal([]byte(ok), new(any)); err != nil || stdjson.Unmarshal([]byte(ok), new(any)) != nil {
		t.Errorf("10000 levels: %v", err)
	}
	if stdjson.Unmarshal([]byte(deep), new(any)) == nil {
		t.Errorf("encoding/json takes 10001 levels; the limit here is wrong")
	}
}

// TestSelfPointingInterface: an interface that holds a pointer to itself
// is decoded into (replaced), as encoding/json does, instead of followed
// forever; a pointer of another type or to another interface is followed.
func TestSelfPointingInterface(t *testing.T) {
	for _, in := range []string{`{"a":1}`, `[1,"x"]`, `"s"`, `2`, `null`} {
		var mine, std any
		mine, std = &mine, &std
		if err := json.Unmarshal([]byte(in), &mine); err != nil {
			t.Fatalf("%s: %v", in, err)
		}
		if err := stdjson.Unmarshal([]byte(in), &std); err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(mine) != fmt.Sprint(std) {
			t.Errorf("%s into a self-pointing interface: %v, encoding/json gives %v", in, mine, std)
		}
	}
	var other any
	var n int
	other = &n
	if err := json.Unmarshal([]byte(`7`), &other); err != nil || n != 7 {
		t.Errorf("7 into an interface holding an *int: n = %d, %v; want 7", n, err)
	}
}
