package linklayer

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// Across the whole range from a clear step to one drowned in jitter, the
// detector may say "unknown" but must never name the wrong framing, and
// when it says it is sure of an ATM overhead that overhead is within 4
// bytes (mod 48). The log is the accuracy table for the docs.
func TestDetectNeverWrong(t *testing.T) {
	// A cell costs 2*53*8/8 Mbit/s = 106 µs in the round trip of this line.
	const seeds = 12
	var table strings.Builder
	fmt.Fprintf(&table, "cell 106 µs; %d runs per row, overheads %d..%d\n%-8s %-8s %6s %6s %8s %8s\n", seeds, 2, 2+5*(seeds-1), "jitter", "truth", "right", "sure", "unknown", "wrong")
	for _, jitter := range []float64{50, 200, 400, 800, 1200, 1600, 3200, 6400} {
		for _, atm := range []bool{true, false} {
			var right, sure, unknown, wrong int
			for seed := range uint64(seeds) {
				ov := 2 + 5*int(seed)
				m := model{atm: atm, overhead: ov, downBits: 8e6, upBits: 8e6, base: 20 * time.Millisecond,
					jitterUs: jitter, spikeP: 0.05, spikeUs: 5000, lo: 60, hi: 252, perSz: 10, seed1: seed, seed2: uint64(jitter)}
				r, err := Detect(m.samples(), Options{})
				if err != nil {
					t.Fatal(err)
				}
				truth := map[bool]string{true: ATM, false: Ethernet}[atm]
				switch {
				case r.LinkLayer == Unknown:
					unknown++
				case r.LinkLayer != truth:
					wrong++
					t.Errorf("jitter %v µs, %s overhead %d: said %s (%s)", jitter, truth, ov, r.LinkLayer, r.Reason)
				case atm && r.Sure && circ(r.Overhead, ov) > 4:
					wrong++
					t.Errorf("jitter %v µs, atm overhead %d: sure of %d", jitter, ov, r.Overhead)
				default:
					right++
					if r.Sure {
						sure++
					}
				}
			}
			fmt.Fprintf(&table, "%-8.0f %-8s %6d %6d %8d %8d\n", jitter, map[bool]string{true: ATM, false: Ethernet}[atm], right, sure, unknown, wrong)
		}
	}
	t.Log("\n" + table.String())
}
