package lab

import (
	"fmt"
	"io"
	"math"
	"strings"

	"sqm/internal/stats"
)

// Side is one column of the before/after table: what the lab reads out of a
// tester result. Kept separate from the tester's Result so the table can be
// tested with literal numbers.
type Side struct {
	DownMbps, UpMbps float64
	Idle             stats.Summary // latency with no load
	Loaded           stats.Summary // latency while the load runs
	Grade            string
	RPM              float64
}

// InducedMs is the latency the load adds at percentile p (50 or 90):
// loaded minus idle median, the queueing delay the user feels.
func (s Side) InducedMs(p int) float64 {
	l := s.Loaded.MedianMs
	if p == 90 {
		l = s.Loaded.P90Ms
	}
	return l - s.Idle.MedianMs
}

// GivenUp is the share of the unshaped throughput that shaping costs, in
// percent, per direction; negative when shaping was faster (it happens on
// links where bloat makes TCP collapse).
func GivenUp(before, after Side) (down, up float64) {
	f := func(b, a float64) float64 {
		if b <= 0 {
			return math.NaN()
		}
		return 100 * (b - a) / b
	}
	return f(before.DownMbps, after.DownMbps), f(before.UpMbps, after.UpMbps)
}

// WriteTable prints the before/after comparison the way betterspeedtest
// summarizes a run (Min/10pct/Median/Avg/90pct/Max), one column per run, so
// the two can be read side by side.
func WriteTable(w io.Writer, link Link, shaping string, before, after Side) error {
	fmt.Fprintf(w, "Emulated link: %s down / %s up, base RTT %v, modem buffer %d packets, %s framing (overhead %d)\n",
		FormatRate(link.DownBits), FormatRate(link.UpBits), link.RTT, link.Buffer, link.LinkLayer, link.Overhead)
	fmt.Fprintf(w, "Shaping (after): %s\n\n", shaping)
	var tw strings.Builder
	row := func(name string, f func(Side) string) {
		tw.WriteString(strings.TrimRight(fmt.Sprintf("%-30s %12s %12s", name, f(before), f(after)), " ") + "\n")
	}
	num := func(v float64, prec int) string {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return "-"
		}
		return fmt.Sprintf("%.*f", prec, v)
	}
	fmt.Fprintf(&tw, "%-30s %12s %12s\n", "", "without SQM", "with SQM")
	row("Download (Mbit/s)", func(s Side) string { return num(s.DownMbps, 2) })
	row("Upload (Mbit/s)", func(s Side) string { return num(s.UpMbps, 2) })
	row("Idle latency median (ms)", func(s Side) string { return num(s.Idle.MedianMs, 1) })
	row("Latency under load (ms)", func(Side) string { return "" })
	row("  Min", func(s Side) string { return num(s.Loaded.MinMs, 1) })
	row("  10pct", func(s Side) string { return num(s.Loaded.P10Ms, 1) })
	row("  Median", func(s Side) string { return num(s.Loaded.MedianMs, 1) })
	row("  Avg", func(s Side) string { return num(s.Loaded.MeanMs, 1) })
	row("  90pct", func(s Side) string { return num(s.Loaded.P90Ms, 1) })
	row("  Max", func(s Side) string { return num(s.Loaded.MaxMs, 1) })
	row("Probes (lost %)", func(s Side) string {
		return fmt.Sprintf("%d (%s%%)", s.Loaded.Count, num(s.Loaded.LossPct, 1))
	})
	row("Induced latency median (ms)", func(s Side) string { return num(s.InducedMs(50), 1) })
	row("Induced latency 90pct (ms)", func(s Side) string { return num(s.InducedMs(90), 1) })
	row("Bufferbloat grade", func(s Side) string { return s.Grade })
	row("Responsiveness (RPM)", func(s Side) string {
		return strings.TrimSpace(num(math.Round(s.RPM), 0) + " " + stats.RPMBand(s.RPM))
	})
	if _, err := io.WriteString(w, tw.String()); err != nil {
		return err
	}
	d, u := GivenUp(before, after)
	pct := func(v float64) string {
		if math.IsNaN(v) {
			return "n/a (nothing got through without SQM)"
		}
		return num(v, 1) + "%"
	}
	_, err := fmt.Fprintf(w, "\nThroughput given up for it: download %s, upload %s\n", pct(d), pct(u))
	return err
}
