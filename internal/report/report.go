// Package report renders a bloat.Result for people and tools: a text
// summary laid out like betterspeedtest's (so people recognise it), JSON
// (the Result itself), and a flent data file that flent opens and plots.
// It does no measuring and no network I/O.
package report

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"sqm/internal/bloat"
	"sqm/internal/json"
	"sqm/internal/stats"
)

// JSON writes r as one indented JSON object: exactly the Result type.
func JSON(w io.Writer, r *bloat.Result) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(r); err != nil {
		return fmt.Errorf("report: write json: %w", err)
	}
	return nil
}

// Text writes the human summary. Latency columns are idle (lead and tail
// pooled) and each load phase, then all load phases pooled when there is
// more than one; rows follow betterspeedtest (Min, 10pct, Median, Avg,
// 90pct, Max) plus 99pct, sample count and loss.
func Text(w io.Writer, r *bloat.Result) error {
	var b strings.Builder
	fmt.Fprintf(&b, "sqm test %s against %s, %s\n", r.Mode, r.Server, r.Start.UTC().Format("2006-01-02 15:04:05 UTC"))
	switch r.Mode {
	case bloat.ModeIdle:
		fmt.Fprintf(&b, "  %s of idle latency, a probe of each kind every %s\n", secs(r.TotalS), secs(r.StepS))
	default:
		fmt.Fprintf(&b, "  %s load per phase, %s idle before and after, a probe of each kind every %s\n", secs(r.LoadS), secs(r.IdleS), secs(r.StepS))
		fmt.Fprintf(&b, "\n  Download: %8.2f Mbps\n    Upload: %8.2f Mbps\n", r.DownloadMbps, r.UploadMbps)
	}

	type col struct {
		name string
		s    stats.Summary
	}
	cols := []col{{"idle", r.Idle}}
	nload := 0
	for _, p := range r.Phases {
		if p.Name != "idle-before" && p.Name != "idle-after" && p.Name != "idle" {
			cols = append(cols, col{p.Name, p.Latency})
			nload++
		}
	}
	if nload > 1 {
		cols = append(cols, col{"loaded", r.Loaded})
	}
	fmt.Fprintf(&b, "\n   Latency: (round trip, in msec; all probe kinds)\n")
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
	row := func(label string, f func(stats.Summary) string) {
		fmt.Fprintf(tw, "%s:\t", label)
		for _, c := range cols {
			fmt.Fprintf(tw, "%s\t", f(c.s))
		}
		fmt.Fprintln(tw)
	}
	fmt.Fprintf(tw, "\t")
	for _, c := range cols {
		fmt.Fprintf(tw, "%s\t", c.name)
	}
	fmt.Fprintln(tw)
	num := func(get func(stats.Summary) float64) func(stats.Summary) string {
		return func(s stats.Summary) string {
			if s.Count == 0 {
				return "-"
			}
			return fmt.Sprintf("%.3f", get(s))
		}
	}
	row("Min", num(func(s stats.Summary) float64 { return s.MinMs }))
	row("10pct", num(func(s stats.Summary) float64 { return s.P10Ms }))
	row("Median", num(func(s stats.Summary) float64 { return s.MedianMs }))
	row("Avg", num(func(s stats.Summary) float64 { return s.MeanMs }))
	row("90pct", num(func(s stats.Summary) float64 { return s.P90Ms }))
	row("99pct", num(func(s stats.Summary) float64 { return s.P99Ms }))
	row("Max", num(func(s stats.Summary) float64 { return s.MaxMs }))
	row("Samples", func(s stats.Summary) string { return fmt.Sprintf("%d", s.Count) })
	row("Loss", func(s stats.Summary) string { return fmt.Sprintf("%.2f%%", s.LossPct) })
	tw.Flush()

	if r.Mode != bloat.ModeIdle {
		fmt.Fprintf(&b, "\n  Induced latency: %.1f ms (loaded median minus idle median)\n", r.InducedMs)
		fmt.Fprintf(&b, "  Bufferbloat grade: %s (A+ < 5 ms, A < 30, B < 60, C < 200, D < 400, F otherwise)\n", r.Grade)
		fmt.Fprintf(&b, "  Responsiveness: %.0f RPM, %s (60000 / loaded median RTT; Poor < 300, Fair < 1000, Good < 6000)\n", r.RPM, r.RPMBand)
	} else {
		fmt.Fprintf(&b, "\n  Responsiveness: %.0f RPM, %s (60000 / idle median RTT)\n", r.RPM, r.RPMBand)
	}

	if len(r.Probes) > 0 {
		fmt.Fprintf(&b, "\n  Per probe kind (median ms, idle / loaded, loss %%):\n")
		tw = tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
		for _, p := range r.Probes {
			fmt.Fprintf(tw, "    %s\tidle %s\tloaded %s\tloss %.1f%% / %.1f%%", p.Kind, med(p.Idle), med(p.Loaded), p.Idle.LossPct, p.Loaded.LossPct)
			if p.LoadedOWDUpMs != 0 {
				how := "estimated"
				if p.Protocol == "irtt" && p.ClocksSynced != nil && *p.ClocksSynced {
					how = "as stamped"
				}
				fmt.Fprintf(tw, "\tloaded one-way up %.2f down %.2f (%s)", p.LoadedOWDUpMs, p.LoadedOWDDownMs, how)
			}
			if p.InducedOWDUpMs != 0 || p.InducedOWDDownMs != 0 {
				fmt.Fprintf(tw, "\tinduced one-way up %.2f down %.2f", p.InducedOWDUpMs, p.InducedOWDDownMs)
			}
			fmt.Fprintln(tw)
		}
		tw.Flush()
	}
	if len(r.Streams) > 0 {
		fmt.Fprintf(&b, "\n  Per stream (Mbit/s):\n")
		for _, dir := range []string{bloat.DirDown, bloat.DirUp} {
			var parts []string
			for _, s := range r.Streams {
				if s.Dir == dir {
					parts = append(parts, fmt.Sprintf("%s %.2f", s.Label, s.Mbps))
				}
			}
			if len(parts) > 0 {
				fmt.Fprintf(&b, "    %-4s %s\n", dir, strings.Join(parts, ", "))
			}
		}
	}
	for _, n := range r.Notes {
		fmt.Fprintf(&b, "\n  Note: %s", n)
	}
	if len(r.Notes) > 0 {
		b.WriteString("\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func med(s stats.Summary) string {
	if s.Count == 0 {
		return "-"
	}
	return fmt.Sprintf("%.3f", s.MedianMs)
}

func secs(s float64) string {
	return (time.Duration(s * float64(time.Second))).Round(time.Millisecond).String()
}
