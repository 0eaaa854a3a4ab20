package bloat

import (
	"testing"
	"time"

	"sqm/internal/stats"
)

// LoadedSamples keeps the load phases' probes, timed from their phase's
// start, lost ones included, and leaves the idle phases out.
func TestLoadedSamples(t *testing.T) {
	r := &Result{
		Phases: []Phase{
			{Name: "idle-before", StartS: 0, EndS: 2},
			{Name: "download", StartS: 2, EndS: 7},
			{Name: "upload", StartS: 7, EndS: 12},
			{Name: "idle-after", StartS: 12, EndS: 14},
		},
		Samples: []Sample{
			{TS: 1, RTTMs: 5},
			{TS: 2.5, RTTMs: 200},
			{TS: 6.9, RTTMs: 30},
			{TS: 7.5, Lost: true},
			{TS: 12.5, RTTMs: 1000},
		},
	}
	got := r.LoadedSamples()
	want := []stats.Timed{{T: 500 * time.Millisecond, RTTMs: 200}, {T: 4900 * time.Millisecond, RTTMs: 30}, {T: 500 * time.Millisecond, Lost: true}}
	if len(got) != len(want) {
		t.Fatalf("got %+v, want %+v", got, want)
	}
	for i := range want {
		if d := got[i].T - want[i].T; d > time.Microsecond || d < -time.Microsecond || got[i].RTTMs != want[i].RTTMs || got[i].Lost != want[i].Lost {
			t.Errorf("sample %d: %+v, want %+v", i, got[i], want[i])
		}
	}
}
