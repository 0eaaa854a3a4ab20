package lab

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"strings"

	"sqm/internal/bloat"
	"sqm/internal/kernel"
	"sqm/internal/plot"
)

// SideOf reads one column of the table out of a tester result. The
// tester's idle baseline is the lead before the load only (the tail starts
// with the queue the bloated modem still holds), so its grade and induced
// latency are used as they are.
func SideOf(r *bloat.Result) Side {
	return Side{DownMbps: r.DownloadMbps, UpMbps: r.UploadMbps, Idle: r.Idle, Loaded: r.Loaded,
		Grade: r.Grade, RPM: r.RPM}
}

// ShapingText is one line saying what the "after" run shaped with.
func (s ShapingReport) Text() string {
	ll := s.LinkLayer
	if ll == "" || ll == "none" {
		ll = "no link-layer compensation"
	} else {
		ll = fmt.Sprintf("linklayer %s overhead %d", ll, s.Overhead)
	}
	return fmt.Sprintf("sqm %s/%s on %s, %s down (%s) / %s up, %s (from %s)",
		s.Script, s.Qdisc, s.Interface, FormatRate(s.DownloadKbit*1000), s.ingressPath(), FormatRate(s.UploadKbit*1000), ll, s.Source)
}

// ingressPath says how the download was held to its rate, from the plan
// that was applied (an IFB for the shaping recipes, a filter on the
// ingress hook for the policers), so the table never claims an IFB the
// kernel did not get.
func (s ShapingReport) ingressPath() string {
	switch {
	case s.Plan == nil || s.Plan.Ingress == nil:
		return "ingress not shaped"
	case s.Plan.Ingress.IFB != "":
		return "ingress via IFB"
	default:
		return "ingress policed, no IFB"
	}
}

// WriteText prints the before/after table and what limits the comparison.
func (r *Report) WriteText(w io.Writer) error {
	if err := WriteTable(w, r.Link.Link, r.Shaping.Text(), SideOf(r.Before), SideOf(r.After)); err != nil {
		return err
	}
	a := SideOf(r.After)
	fmt.Fprintf(w, "Shaped goodput is %.0f%% / %.0f%% of the emulated line rate (at most %.0f%% fit through its framing)\n",
		100*a.DownMbps*1e6/float64(r.Link.DownBits), 100*a.UpMbps*1e6/float64(r.Link.UpBits), 100*r.Link.Link.Efficiency())
	for i, dir := range []string{"download", "upload"} {
		b, a := modemDrops(r.Link.Modem.Before, i), modemDrops(r.Link.Modem.After, i)
		if b >= 0 && a >= 0 {
			fmt.Fprintf(w, "Modem FIFO drops (%s): %d without SQM, %d with SQM\n", dir, b, a-b)
		}
	}
	var notes []string
	for i, res := range []*bloat.Result{r.Before, r.After} {
		for _, n := range res.Notes {
			notes = append(notes, []string{"without SQM: ", "with SQM: "}[i]+n)
		}
	}
	if len(notes) > 0 {
		fmt.Fprintf(w, "Notes:\n  %s\n", strings.Join(notes, "\n  "))
	}
	return nil
}

// WritePlots writes PREFIX-before.svg and PREFIX-after.svg, the tester's
// plot of each run.
func (r *Report) WritePlots(prefix string) error {
	for _, p := range []struct {
		name string
		res  *bloat.Result
	}{{prefix + "-before.svg", r.Before}, {prefix + "-after.svg", r.After}} {
		var b bytes.Buffer
		if err := plot.SVG(&b, p.res); err != nil {
			return fmt.Errorf("lab: plot %s: %w", p.name, err)
		}
		if err := os.WriteFile(p.name, b.Bytes(), 0o644); err != nil {
			return fmt.Errorf("lab: write plot: %w", err)
		}
	}
	return nil
}

// modemDrops is the netem drop counter of direction i (0 down, 1 up), or -1.
func modemDrops(st []kernel.DeviceStatus, i int) int64 {
	if i >= len(st) || len(st[i].Qdiscs) == 0 {
		return -1
	}
	for _, q := range st[i].Qdiscs {
		if q.Kind == "netem" {
			return int64(q.Drops)
		}
	}
	return -1
}
