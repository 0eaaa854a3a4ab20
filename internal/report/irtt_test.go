package report

import (
	"bytes"
	"strings"
	"testing"

	"sqm/internal/bloat"
)

// TestOneWayLabels: one-way delays are labelled by how they were had, and
// the offset-free induced ones are shown.
func TestOneWayLabels(t *testing.T) {
	yes, no := true, false
	for _, tc := range []struct {
		name   string
		p      bloat.ProbeSummary
		want   []string
		absent []string
	}{
		{"irtt, synchronised", bloat.ProbeSummary{Kind: "udp-be", Protocol: "irtt", ClocksSynced: &yes,
			LoadedOWDUpMs: 40, LoadedOWDDownMs: 2, InducedOWDUpMs: 39.5, InducedOWDDownMs: 0.25},
			[]string{"loaded one-way up 40.00 down 2.00 (as stamped)", "induced one-way up 39.50 down 0.25"}, []string{"estimated"}},
		{"irtt, clocks apart", bloat.ProbeSummary{Kind: "udp-be", Protocol: "irtt", ClocksSynced: &no,
			LoadedOWDUpMs: 21, LoadedOWDDownMs: 21, InducedOWDUpMs: 39.5, InducedOWDDownMs: 0.25},
			[]string{"(estimated)", "induced one-way up 39.50"}, []string{"as stamped"}},
		{"sqm server", bloat.ProbeSummary{Kind: "udp-be", Protocol: "sqm", ClocksSynced: &yes, LoadedOWDUpMs: 3, LoadedOWDDownMs: 1},
			[]string{"(estimated)"}, []string{"as stamped", "induced one-way"}},
	} {
		var b bytes.Buffer
		r := &bloat.Result{Mode: bloat.ModeRRUL, Grade: "A", Probes: []bloat.ProbeSummary{tc.p}}
		if err := Text(&b, r); err != nil {
			t.Fatal(err)
		}
		for _, w := range tc.want {
			if !strings.Contains(b.String(), w) {
				t.Errorf("%s: no %q in\n%s", tc.name, w, b.String())
			}
		}
		for _, a := range tc.absent {
			if strings.Contains(b.String(), a) {
				t.Errorf("%s: %q in\n%s", tc.name, a, b.String())
			}
		}
	}
}
