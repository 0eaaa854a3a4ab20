//go:build linux

package cli

import (
	"fmt"
	"io"

	"sqm/internal/codelpolice"
)

// printCodelPolice shows what the codel_police program counted: what it
// let through, the signals it gave (CE marks, drops of packets that could
// not be marked), the drops past its hard limit, and the signals it moved
// off flows below the average and the packets of such flows it let past
// the limit (flow-aware mode).
func printCodelPolice(w io.Writer, c *codelpolice.Counters) {
	fmt.Fprintf(w, "  codel_police: passed %d (%s), ECN-marked %d (%s), dropped %d as signals (%s) and %d past the limit (%s), thin flows spared %d signals and %d limit drops, non-IP %d\n",
		c.Passed, humanBytes(c.PassedBytes), c.Marked, humanBytes(c.MarkedBytes),
		c.DroppedSignal, humanBytes(c.DroppedSignalBytes), c.DroppedLimit, humanBytes(c.DroppedLimitBytes), c.Spared, c.SparedLimit, c.NonIP)
}
