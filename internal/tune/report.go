package tune

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"

	"sqm/internal/plot"
)

// WriteTable prints the result in the shape of seed 004's table: per
// direction, every rate measured, lowest first and shaping off last, with
// goodput, the ping statistics and the induced latency and its grade.
func WriteTable(w io.Writer, r *Result) error {
	var b strings.Builder
	target := fmt.Sprintf("target %g ms induced latency", r.TargetMs)
	if r.Profile != "" {
		target += " (profile " + r.Profile + ")"
	}
	ll := r.Linklayer
	if ll == "" {
		ll = "link layer not set"
	}
	fmt.Fprintf(&b, "sqm tune: %s; %s, overhead %d", target, ll, r.Overhead)
	if r.LinklayerSource != "" {
		fmt.Fprintf(&b, " (%s)", r.LinklayerSource)
	}
	fmt.Fprintf(&b, "; %.0f s\n", r.Seconds)
	if d := r.Detection; d != nil {
		sure := "sure"
		if !d.Sure {
			sure = "not sure"
		}
		fmt.Fprintf(&b, "link layer: %s (%s): %s\n", d.LinkLayer, sure, d.Reason)
	}
	fmt.Fprintf(&b, "idle: min %.1f, median %.1f, p90 %.1f ms (%d probes); induced = loaded p90 - idle median\n",
		r.Idle.MinMs, r.Idle.MedianMs, r.Idle.P90Ms, r.Idle.Count)
	split := false // the Measurer took each load's start apart
	for _, p := range r.Points {
		split = split || p.StartInducedMs != 0
	}
	if split {
		b.WriteString("loaded = after each load's start burst (until latency is back under the target, at most half the load); start = induced p90 of the burst, shown, not judged\n")
	}
	fmt.Fprintf(&b, "chosen: download %d kbit/s, upload %d kbit/s", r.DownloadKbit, r.UploadKbit)
	if r.DownloadKbit != r.AloneDownKbit || r.UploadKbit != r.AloneUpKbit {
		fmt.Fprintf(&b, " (each alone: %d/%d)", r.AloneDownKbit, r.AloneUpKbit)
	}
	fmt.Fprintf(&b, "; noise margin %.1f/%.1f ms\n", r.MarginDownMs, r.MarginUpMs)
	for _, d := range []Dir{Down, Up, Both} {
		var pts []Point
		for _, p := range r.Points {
			if p.Dir == d {
				pts = append(pts, p)
			}
		}
		if len(pts) == 0 {
			continue
		}
		sort.SliceStable(pts, func(i, j int) bool {
			ri, rj := pts[i].Rate(), pts[j].Rate()
			if ri == 0 || rj == 0 {
				return rj == 0 && ri != 0
			}
			return ri < rj
		})
		title := map[Dir]string{Down: "download", Up: "upload", Both: "both directions loaded"}[d]
		fmt.Fprintf(&b, "\n%s\n", title)
		tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
		startCol := ""
		if split {
			startCol = "start\t"
		}
		fmt.Fprintln(tw, "rate kbit/s\tgoodput kbit/s\tmin\t10pct\tmedian\tavg\t90pct\tmax\tinduced\tgrade\t"+startCol+"\t")
		for _, p := range pts {
			rate := "unshaped"
			switch {
			case d == Both:
				rate = fmt.Sprintf("%d/%d", p.DownKbit, p.UpKbit)
			case p.Rate() > 0:
				rate = fmt.Sprint(p.Rate())
			}
			good := fmt.Sprintf("%.0f", p.Goodput())
			if d == Both {
				good = fmt.Sprintf("%.0f/%.0f", p.GoodputDownKbit, p.GoodputUpKbit)
			}
			l := p.Latency
			start := ""
			if split {
				start = fmt.Sprintf("%.1f\t", p.StartInducedMs)
			}
			fmt.Fprintf(tw, "%s\t%s\t%.1f\t%.1f\t%.1f\t%.1f\t%.1f\t%.1f\t%.1f\t%s\t%s %s\t\n",
				rate, good, l.MinMs, l.P10Ms, l.MedianMs, l.MeanMs, l.P90Ms, l.MaxMs, p.InducedMs, p.Grade, start, remark(r, p))
		}
		tw.Flush()
	}
	for _, n := range r.Notes {
		fmt.Fprintf(&b, "\nnote: %s", n)
	}
	if len(r.Notes) > 0 {
		b.WriteString("\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// Chosen says whether p measured what r chose: the rate chosen for its
// direction, or with both loaded the chosen pair. A stale point (measured
// before the line changed) and an unshaped one are not.
func (r *Result) Chosen(p Point) bool {
	if p.Stale || p.Rate() <= 0 {
		return false
	}
	switch p.Dir {
	case Down:
		return p.DownKbit == r.DownloadKbit
	case Up:
		return p.UpKbit == r.UploadKbit
	}
	return p.DownKbit == r.DownloadKbit && p.UpKbit == r.UploadKbit
}

// remark is the last column: why the point is there and how it judged.
func remark(r *Result, p Point) string {
	var s []string
	if r.Chosen(p) {
		s = append(s, "<- chosen")
	}
	if !p.Pass {
		s = append(s, "over target")
	}
	if p.Role == RoleReference {
		s = append(s, "reference again")
	}
	if p.Stale {
		s = append(s, "stale (line changed)")
	}
	return strings.Join(s, ", ")
}

// Tradeoff is the trade-off curve of r for internal/plot.
func Tradeoff(r *Result, title string) *plot.Tradeoff {
	t := &plot.Tradeoff{
		Title: title,
		Subtitle: fmt.Sprintf("chosen %d/%d kbit/s for at most %g ms induced latency; unshaped goodput %.0f/%.0f kbit/s",
			r.DownloadKbit, r.UploadKbit, r.TargetMs, r.CapacityDownKbit, r.CapacityUpKbit),
		TargetMs: r.TargetMs,
	}
	for _, d := range []Dir{Down, Up} {
		pn := plot.TradeoffPanel{Name: map[Dir]string{Down: "Download", Up: "Upload"}[d]}
		chosen := r.AloneDownKbit
		if d == Up {
			chosen = r.AloneUpKbit
		}
		for _, p := range r.Points {
			if p.Dir != d || p.Stale {
				continue
			}
			pn.Points = append(pn.Points, plot.TradeoffPoint{RateKbit: p.Rate(), GoodputKbit: p.Goodput(),
				InducedMs: p.InducedMs, Pass: p.Pass, Chosen: p.Rate() > 0 && p.Rate() == chosen})
		}
		t.Panels = append(t.Panels, pn)
	}
	return t
}
