package plot

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
)

// Sweep is a parameter sweep's picture: induced latency and goodput
// against one parameter (a policer's bucket, a limit), one line per
// series, with reference levels drawn across (a recipe without the
// parameter). Two panels side by side, so the cost of a setting in
// latency and what it buys in goodput are read at the same x.
type Sweep struct {
	Title, Subtitle string
	XLabel          string // with its unit; the axis is logarithmic
	Series          []SweepSeries
	Refs            []SweepRef
}

// SweepSeries is one recipe's points, in any order.
type SweepSeries struct {
	Name   string
	Points []SweepPoint
}

// SweepPoint is one measured setting.
type SweepPoint struct {
	X           float64 // > 0
	InducedMs   float64
	GoodputMbit float64
}

// SweepRef is a level drawn across both panels.
type SweepRef struct {
	Name        string
	InducedMs   float64
	GoodputMbit float64
}

const (
	swWidth  = 1000
	swHeight = 500
)

var sweepColors = []string{"#d62728", "#1f77b4", "#2ca02c", "#9467bd", "#8c564b"}

// SaveSweep draws s to path (.svg or .png).
func SaveSweep(path string, s *Sweep) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("plot: %w", err)
	}
	return errors.Join(WriteSweep(f, path, s), f.Close())
}

// WriteSweep draws s to w in the format named by path's extension.
func WriteSweep(w io.Writer, path string, s *Sweep) error {
	return encode(w, path, swWidth, swHeight, func(c canvas) { layoutSweep(c, s) })
}

func layoutSweep(c canvas, s *Sweep) {
	c.rect(0, 0, swWidth, swHeight, "#ffffff")
	c.text(swWidth/2, 26, s.Title, 17, anchorMiddle, "#000000")
	c.text(swWidth/2, 48, s.Subtitle, 12, anchorMiddle, "#444444")
	xlo, xhi := math.Inf(1), 0.0
	var lat, gp float64
	for _, se := range s.Series {
		for _, p := range se.Points {
			if p.X > 0 {
				xlo, xhi = math.Min(xlo, p.X), math.Max(xhi, p.X)
			}
			lat, gp = math.Max(lat, p.InducedMs), math.Max(gp, p.GoodputMbit)
		}
	}
	for _, r := range s.Refs {
		lat, gp = math.Max(lat, r.InducedMs), math.Max(gp, r.GoodputMbit)
	}
	if xhi == 0 {
		xlo, xhi = 1, 10
	}
	xlo, xhi = step125(xlo/1.2, false), step125(xhi*1.2, true)
	const left, top, gap, ph = 80.0, 80.0, 90.0, 320.0
	pw := (swWidth - left - 30 - gap) / 2
	for i, q := range []struct {
		label string
		ymax  float64
		y     func(induced, goodput float64) float64
	}{
		{"Induced latency, p90 (ms)", lat, func(l, _ float64) float64 { return l }},
		{"Download goodput (Mbit/s)", gp, func(_, g float64) float64 { return g }},
	} {
		ymax := math.Max(q.ymax, 1) * 1.1
		ys := niceStep(ymax, 5)
		ymax = ys * math.Ceil(ymax/ys)
		p := &panel{x: left + float64(i)*(pw+gap), y: top, w: pw, h: ph, x0: math.Log10(xlo), x1: math.Log10(xhi), y0: 0, y1: ymax}
		p.logAxes(c, ys, xlo, xhi, q.label, s.XLabel)
		lines := make([][]pt, len(s.Series))
		var dots []pt
		for j, se := range s.Series {
			pts := append([]SweepPoint(nil), se.Points...)
			slices.SortFunc(pts, func(a, b SweepPoint) int { return cmp.Compare(a.X, b.X) })
			for _, sp := range pts {
				if sp.X > 0 {
					lines[j] = append(lines[j], pt{p.px(math.Log10(sp.X)), p.py(q.y(sp.InducedMs, sp.GoodputMbit))})
				}
			}
			dots = append(dots, lines[j]...)
		}
		for _, r := range s.Refs {
			y := p.py(q.y(r.InducedMs, r.GoodputMbit))
			c.polyline([]pt{{p.x, y}, {p.x + p.w, y}}, "#7f7f7f", 1.5)
			lx, ly, anchor := refLabelAt(p, y, r.Name, dots)
			c.text(lx, ly, r.Name, 10, anchor, "#555555")
		}
		for j, line := range lines {
			col := sweepColors[j%len(sweepColors)]
			for _, xy := range line {
				c.dot(xy.x, xy.y, 3.5, col)
			}
			c.polyline(line, col, 2)
		}
	}
	x := left
	for j, se := range s.Series {
		col := sweepColors[j%len(sweepColors)]
		c.polyline([]pt{{x, top + ph + 58}, {x + 22, top + ph + 58}}, col, 2)
		c.text(x+28, top+ph+62, se.Name, 11, anchorStart, colAxis)
		x += 260
	}
	c.text(swWidth-10, swHeight-8, "sqm", 10, anchorEnd, "#aaaaaa")
}

// refLabelAt places a reference line's label at the line's right or left
// end, above or below it, in the first of those places where it covers no
// point: the reference often sits among the points it is compared with.
// When every place is covered it stays at the right, above.
func refLabelAt(p *panel, y float64, name string, dots []pt) (float64, float64, int) {
	const size, pad = 10.0, 5.0
	w := float64(len(name)) * size * 0.6 // a generous average glyph width
	type place struct {
		x, base float64
		anchor  int
	}
	places := []place{
		{p.x + p.w - 4, y - 4, anchorEnd},
		{p.x + 4, y - 4, anchorStart},
		{p.x + p.w - 4, y + 4 + size, anchorEnd},
		{p.x + 4, y + 4 + size, anchorStart},
	}
	for _, pl := range places {
		x0 := pl.x
		if pl.anchor == anchorEnd {
			x0 -= w
		}
		free := true
		for _, d := range dots {
			if d.x > x0-pad && d.x < x0+w+pad && d.y > pl.base-size-pad && d.y < pl.base+pad {
				free = false
				break
			}
		}
		if free {
			return pl.x, pl.base, pl.anchor
		}
	}
	return places[0].x, places[0].base, places[0].anchor
}

// step125 is the 1-2-5 value next to v: the one above it when up, else the
// one below.
func step125(v float64, up bool) float64 {
	e := math.Pow(10, math.Floor(math.Log10(v)))
	steps := []float64{1, 2, 5, 10}
	if up {
		for _, m := range steps {
			if m*e >= v {
				return m * e
			}
		}
	}
	for i := len(steps) - 1; i >= 0; i-- {
		if steps[i]*e <= v {
			return steps[i] * e
		}
	}
	return e
}
