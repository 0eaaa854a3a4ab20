package plot

import (
	"errors"
	"fmt"
	"io"
	"math"
	"os"
)

// Timeline is a set of panels over one shared time axis: what a trace run
// of the lab draws (capacity, shaping rate and goodput in one panel,
// induced delay in the next, per direction), so rate, capacity and delay
// are read at the same second.
type Timeline struct {
	Title, Subtitle string
	Panels          []TimelinePanel
}

// TimelinePanel is one plot area with its lines.
type TimelinePanel struct {
	YLabel string
	Lines  []TimelineLine
}

// TimelineLine is one series; points with a NaN Y are gaps.
type TimelineLine struct {
	Name string
	X, Y []float64
}

const tlWidth = 1000

var timelineColors = []string{"#000000", "#d62728", "#1f77b4", "#2ca02c", "#9467bd"}

// SaveTimeline draws t to path (.svg or .png).
func SaveTimeline(path string, t *Timeline) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("plot: %w", err)
	}
	return errors.Join(WriteTimeline(f, path, t), f.Close())
}

// WriteTimeline draws t to w in the format named by path's extension.
func WriteTimeline(w io.Writer, path string, t *Timeline) error {
	if len(t.Panels) == 0 {
		return fmt.Errorf("plot: timeline %q has no panels", t.Title)
	}
	return encode(w, path, tlWidth, timelineHeight(t), func(c canvas) { layoutTimeline(c, t) })
}

const tlTop, tlPanel, tlGap = 70.0, 180.0, 60.0

func timelineHeight(t *Timeline) int {
	return int(tlTop + float64(len(t.Panels))*(tlPanel+tlGap) + 20)
}

func layoutTimeline(c canvas, t *Timeline) {
	h := float64(timelineHeight(t))
	c.rect(0, 0, tlWidth, h, "#ffffff")
	c.text(tlWidth/2, 26, t.Title, 17, anchorMiddle, "#000000")
	c.text(tlWidth/2, 48, t.Subtitle, 12, anchorMiddle, "#444444")
	x0, x1 := math.Inf(1), math.Inf(-1)
	for _, p := range t.Panels {
		for _, l := range p.Lines {
			for _, x := range l.X {
				x0, x1 = math.Min(x0, x), math.Max(x1, x)
			}
		}
	}
	if !(x1 > x0) {
		x0, x1 = 0, 1
	}
	const left, legendW = 80.0, 190.0
	for i, tp := range t.Panels {
		ymin, ymax := 0.0, 0.0
		for _, l := range tp.Lines {
			for _, y := range l.Y {
				if !math.IsInf(y, 0) && !math.IsNaN(y) {
					ymin, ymax = math.Min(ymin, y), math.Max(ymax, y)
				}
			}
		}
		ymax = math.Max(ymax, 1) * 1.1
		ys := niceStep(ymax, 4)
		ymax = ys * math.Ceil(ymax/ys)
		ymin = ys * math.Floor(ymin/ys) // an induced delay below its base is jitter, drawn as it is
		p := &panel{x: left, y: tlTop + float64(i)*(tlPanel+tlGap), w: tlWidth - left - legendW - 20, h: tlPanel, x0: x0, x1: x1, y0: ymin, y1: ymax}
		xl := ""
		if i == len(t.Panels)-1 {
			xl = "time (s)"
		}
		p.axes(c, tp.YLabel, xl)
		var items []legendItem
		for j, l := range tp.Lines {
			col := timelineColors[j%len(timelineColors)]
			var run []pt
			for k := range l.X {
				if k >= len(l.Y) || math.IsNaN(l.Y[k]) {
					c.polyline(run, col, 1.8)
					run = nil
					continue
				}
				run = append(run, pt{p.px(l.X[k]), p.py(l.Y[k])})
			}
			c.polyline(run, col, 1.8)
			items = append(items, legendItem{label: l.Name, color: col, bold: j == 0})
		}
		legend(c, p.x+p.w+20, p.y+10, "", items)
	}
	c.text(tlWidth-10, h-8, "sqm", 10, anchorEnd, "#aaaaaa")
}
