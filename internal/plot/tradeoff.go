package plot

import (
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"sort"
)

// Tradeoff is the picture `sqm tune` draws: per direction, goodput against
// induced latency for every shaper rate measured, so a user sees what the
// last few percent of speed cost in latency (seed 004's question). Plot
// knows nothing of tune; the caller fills this in.
type Tradeoff struct {
	Title    string
	Subtitle string
	TargetMs float64 // drawn as a vertical line; 0 = none
	Panels   []TradeoffPanel
}

// TradeoffPanel is one direction.
type TradeoffPanel struct {
	Name   string // "Download", "Upload"
	Points []TradeoffPoint
}

// TradeoffPoint is one measured rate.
type TradeoffPoint struct {
	RateKbit    int // shaper rate; 0 = unshaped
	GoodputKbit float64
	InducedMs   float64
	Pass        bool // met the target
	Chosen      bool
}

const (
	toWidth    = 1000
	toHeight   = 520
	colPass    = "#1a9850"
	colFail    = "#d73027"
	colChosen  = "#1f77b4"
	colNoShape = "#7f3b08"
)

// WriteTradeoff draws t to w in the format named by path's extension.
func WriteTradeoff(w io.Writer, path string, t *Tradeoff) error {
	return encode(w, path, toWidth, toHeight, func(c canvas) { layoutTradeoff(c, t) })
}

// SaveTradeoff draws t to the file path (.svg or .png), created or
// truncated.
func SaveTradeoff(path string, t *Tradeoff) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("plot: %w", err)
	}
	return errors.Join(WriteTradeoff(f, path, t), f.Close())
}

// logTicks are the 1-2-5 values within [lo, hi].
func logTicks(lo, hi float64) []float64 {
	var out []float64
	for e := math.Floor(math.Log10(lo)); e <= math.Ceil(math.Log10(hi)); e++ {
		for _, m := range []float64{1, 2, 5} {
			v := m * math.Pow(10, e)
			if v >= lo*0.999 && v <= hi*1.001 {
				out = append(out, v)
			}
		}
	}
	return out
}

func layoutTradeoff(c canvas, t *Tradeoff) {
	c.rect(0, 0, toWidth, toHeight, "#ffffff")
	c.text(toWidth/2, 26, t.Title, 17, anchorMiddle, "#000000")
	c.text(toWidth/2, 48, t.Subtitle, 12, anchorMiddle, "#444444")
	n := max(1, len(t.Panels))
	const left, top, gap, ph = 80.0, 80.0, 90.0, 340.0
	pw := (toWidth - left - 30 - gap*float64(n-1)) / float64(n)
	for i, pn := range t.Panels {
		// Induced latency spans from a few ms (shaped) to seconds
		// (unshaped bloat): a log axis keeps both readable.
		xlo, xhi, ymax := math.Inf(1), 0.0, 0.0
		for _, p := range pn.Points {
			v := math.Max(p.InducedMs, 0.5)
			xlo, xhi = math.Min(xlo, v), math.Max(xhi, v)
			ymax = math.Max(ymax, p.GoodputKbit/1000)
		}
		if t.TargetMs > 0 {
			xlo, xhi = math.Min(xlo, t.TargetMs), math.Max(xhi, t.TargetMs)
		}
		if xhi == 0 {
			xlo, xhi = 1, 10
		}
		xlo = math.Pow(10, math.Floor(math.Log10(xlo)))
		xhi = math.Pow(10, math.Ceil(math.Log10(xhi*1.2)))
		if ymax <= 0 {
			ymax = 1
		}
		ys := niceStep(ymax*1.1, 5)
		ymax = ys * math.Ceil(ymax*1.1/ys)
		p := &panel{x: left + float64(i)*(pw+gap), y: top, w: pw, h: ph, x0: math.Log10(xlo), x1: math.Log10(xhi), y0: 0, y1: ymax}
		p.logAxes(c, ys, xlo, xhi, pn.Name+" goodput (Mbit/s)", "Induced latency, p90 loaded - idle median (ms, log scale)")
		if t.TargetMs > 0 {
			x := p.px(math.Log10(t.TargetMs))
			c.polyline([]pt{{x, p.y}, {x, p.y + p.h}}, colFail, 1)
			c.text(x+4, p.y+12, fmt.Sprintf("target %g ms", t.TargetMs), 10, anchorStart, colFail)
		}
		at := func(q TradeoffPoint) pt {
			return pt{p.px(math.Log10(math.Max(q.InducedMs, xlo))), p.py(q.GoodputKbit / 1000)}
		}
		// The shaped points joined in rate order trace the curve.
		var shaped []TradeoffPoint
		for _, q := range pn.Points {
			if q.RateKbit > 0 {
				shaped = append(shaped, q)
			}
		}
		sort.SliceStable(shaped, func(a, b int) bool { return shaped[a].RateKbit < shaped[b].RateKbit })
		var line []pt
		for _, q := range shaped {
			line = append(line, at(q))
		}
		c.polyline(line, "#999999", 1)
		for _, q := range pn.Points {
			xy := at(q)
			switch {
			case q.RateKbit == 0:
				c.dot(xy.x, xy.y, 6, colNoShape)
				c.text(xy.x-8, xy.y-9, "unshaped", 11, anchorEnd, colNoShape)
			case q.Chosen:
				c.dot(xy.x, xy.y, 7, colChosen)
				c.text(xy.x, xy.y+20, fmt.Sprintf("chosen %d kbit/s", q.RateKbit), 11, anchorMiddle, colChosen)
			case q.Pass:
				c.dot(xy.x, xy.y, 3.5, colPass)
			default:
				c.dot(xy.x, xy.y, 3.5, colFail)
			}
		}
	}
	ly := top + ph + 62
	items := []struct{ label, col string }{{"meets target", colPass}, {"misses target", colFail}, {"chosen rate", colChosen}, {"shaping off", colNoShape}}
	x := left
	for _, it := range items {
		c.dot(x, ly-4, 4, it.col)
		c.text(x+10, ly, it.label, 11, anchorStart, colAxis)
		x += 140
	}
	c.text(toWidth-10, toHeight-8, "sqm", 10, anchorEnd, "#aaaaaa")
}
