package linklayer

import (
	"encoding/binary"
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"
)

func FuzzParseSizes(f *testing.F) {
	for _, s := range []string{"60-252", "100-400/4", "1-2", "-5-100", "60-252/", "99999999999999999999-1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, err := ParseSizes(s)
		if err != nil {
			return
		}
		if len(got) < 2 || got[0] < minIPSize(true) || got[len(got)-1] > 1500 || got[len(got)-1]-got[0] < 2*cellPayload-cellPayload/4 {
			t.Fatalf("%q accepted as %d sizes %v..%v", s, len(got), got[0], got[len(got)-1])
		}
	})
}

func FuzzParseUevent(f *testing.F) {
	for _, s := range []string{"DEVTYPE=vlan\nINTERFACE=eth0.7\nIFINDEX=5\n", "INTERFACE=pppoe-wan\nIFINDEX=9", "", "=x", "a b=c\n"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		kv, err := ParseUevent(s)
		if err != nil {
			return
		}
		for k := range kv {
			if k == "" || strings.ContainsAny(k, " \t\n=") {
				t.Fatalf("key %q accepted from %q", k, s)
			}
		}
	})
}

func FuzzParseType(f *testing.F) {
	for _, s := range []string{"1\n", "512", "65534", "-1", "x", "70000"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := ParseType(s)
		if err == nil && (n < 0 || n > 0xffff) {
			t.Fatalf("%q -> %d", s, n)
		}
	})
}

// FuzzDetect feeds arbitrary samples (4 bytes each: a 16-bit size and a
// 16-bit RTT in µs): Detect must return an error or a verdict whose
// numbers are finite and JSON-encodable, never panic.
func FuzzDetect(f *testing.F) {
	seed := func(s []Sample) []byte {
		var b []byte
		for _, x := range s {
			b = binary.BigEndian.AppendUint16(b, uint16(x.Size))
			b = binary.BigEndian.AppendUint16(b, uint16(x.RTT/time.Microsecond))
		}
		return b
	}
	m := adsl(44, 1)
	m.base, m.spikeP, m.perSz = 5*time.Millisecond, 0, 1
	f.Add(seed(m.samples()))
	f.Add(seed(flat()))
	f.Add([]byte{0, 100, 0, 1})
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) > 4*8192 { // more probes than a run sends
			return
		}
		var s []Sample
		for i := 0; i+4 <= len(b); i += 4 {
			s = append(s, Sample{Size: int(binary.BigEndian.Uint16(b[i:])), RTT: time.Duration(binary.BigEndian.Uint16(b[i+2:])) * time.Microsecond})
		}
		r, err := Detect(s, Options{})
		if err != nil {
			return
		}
		for _, v := range []float64{r.Ratio, r.Margin, r.ByteUs, r.RateBits, r.NoiseUs, r.StepUs} {
			if math.IsNaN(v) || math.IsInf(v, 0) {
				t.Fatalf("non-finite number in %+v", r)
			}
		}
		if _, err := json.Marshal(r); err != nil {
			t.Fatal(err)
		}
		if r.LinkLayer == ATM && (r.Overhead < 6 || r.Overhead > 53) {
			t.Fatalf("overhead %d outside the window", r.Overhead)
		}
	})
}
