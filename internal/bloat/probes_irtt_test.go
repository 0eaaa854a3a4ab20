package bloat

import (
	"strings"
	"testing"
	"time"
)

// owdKind makes an irtt kind whose probes saw raw one-way delays a (up)
// and b (down) in ms: the first two idle, the rest loaded.
func owdKind(a, b []float64) (*kind, []Sample) {
	k := &kind{name: "udp-be", protocol: "irtt", server: "192.0.2.1:2112"}
	for i := range a {
		k.recs = append(k.recs, probeRec{sent: time.Duration(i) * time.Second, got: true, hasOWD: true,
			rtt: time.Duration((a[i] + b[i]) * 1e6), a: int64(a[i] * 1e6), b: int64(b[i] * 1e6)})
	}
	off, _ := k.offset()
	var s []Sample
	for i, r := range k.recs {
		s = append(s, Sample{Kind: k.name, Seq: uint64(i), TS: float64(i), RTTMs: ms(r.rtt),
			OWDUpMs: float64(r.a-off) / 1e6, OWDDownMs: float64(r.b+off) / 1e6})
	}
	return k, s
}

func TestDescribeClocks(t *testing.T) {
	idle := func(ts float64) bool { return ts < 2 }
	loaded := func(ts float64) bool { return ts >= 2 }
	for _, tc := range []struct {
		name           string
		a, b           []float64
		synced         bool
		offsetMs       float64
		induced        [2]float64
		note           string
		upOWD, downOWD float64 // first loaded sample as reported
	}{
		// Same clock: a 40 ms queue on the way up under load.
		{"synchronised", []float64{5, 5, 45, 45}, []float64{5, 5, 5, 5}, true, 0, [2]float64{40, 0}, "", 45, 5},
		// The server's clock 30 ms behind: the raw up delay goes negative,
		// so the offset is estimated (fastest probe symmetric) and the note
		// says so; the induced part is the same as above.
		{"server behind", []float64{-25, -25, 15, 15}, []float64{35, 35, 35, 35}, false, -30, [2]float64{40, 0}, "not synchronised (a one-way delay came out -25.00 ms)", 45, 5},
	} {
		k, s := owdKind(tc.a, tc.b)
		off, _ := k.offset()
		var ps ProbeSummary
		note := k.describe(&ps, s, idle, loaded)
		if ps.ClocksSynced == nil || *ps.ClocksSynced != tc.synced {
			t.Errorf("%s: clocks_synced %v, want %v", tc.name, ps.ClocksSynced, tc.synced)
		}
		if float64(off)/1e6 != tc.offsetMs {
			t.Errorf("%s: offset %.2f ms, want %.2f", tc.name, float64(off)/1e6, tc.offsetMs)
		}
		if ps.InducedOWDUpMs != tc.induced[0] || ps.InducedOWDDownMs != tc.induced[1] {
			t.Errorf("%s: induced %.2f/%.2f, want %v", tc.name, ps.InducedOWDUpMs, ps.InducedOWDDownMs, tc.induced)
		}
		if s[2].OWDUpMs != tc.upOWD || s[2].OWDDownMs != tc.downOWD {
			t.Errorf("%s: loaded one-way %.2f/%.2f, want %.2f/%.2f", tc.name, s[2].OWDUpMs, s[2].OWDDownMs, tc.upOWD, tc.downOWD)
		}
		if (tc.note == "") != (note == "") || !strings.Contains(note, tc.note) {
			t.Errorf("%s: note %q, want %q", tc.name, note, tc.note)
		}
		if ps.Server != "192.0.2.1:2112" || ps.Protocol != "irtt" {
			t.Errorf("%s: server %q protocol %q", tc.name, ps.Server, ps.Protocol)
		}
	}
}

// TestLossSplit: the server's count in the last answered reply tells how
// many of the probes up to it were lost on the way there.
func TestLossSplit(t *testing.T) {
	c := &client{o: Options{Logf: func(string, ...any) {}}}
	k := &kind{name: "udp-be", protocol: "irtt"}
	got := []bool{true, false, true, false, false, true, false}
	for _, g := range got {
		k.recs = append(k.recs, probeRec{got: g})
	}
	// Probes 0..5 sent before the last answered one (5); the server
	// counted 4 of those 6, so 2 were lost going up and 1 (of the 3
	// unanswered) coming back. Probe 6 is after the count and not judged.
	k.lastSeq, k.srvCount, k.hasCount = 5, 4, true
	k.irttFinish(c)
	if len(c.notes) != 1 || !strings.Contains(c.notes[0], "3 of the first 6 probes lost; by the irtt server's count 2 on the way there, 1 on the way back") {
		t.Errorf("notes %q", c.notes)
	}
}
