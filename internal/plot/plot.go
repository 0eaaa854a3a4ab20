// Package plot draws a bloat.Result as a picture that needs no other tool:
// download and upload throughput and latency over time on a shared time
// axis (like flent's all_scaled), and the latency CDF idle vs loaded. The
// layout is computed once onto a small canvas interface with two backends,
// SVG (hand-written) and PNG (image/png with a built-in bitmap font), so
// both formats show the same picture.
package plot

import (
	"fmt"
	"io"
	"math"
	"sort"
	"strings"

	"sqm/internal/bloat"
	"sqm/internal/stats"
)

// canvas is what the layout draws on. Coordinates are pixels, origin top
// left; colours are "#rrggbb".
type canvas interface {
	rect(x, y, w, h float64, fill string)
	polyline(pts []pt, stroke string, width float64)
	text(x, y float64, s string, size float64, anchor int, color string)
	vtext(x, y float64, s string, size float64, color string) // rotated 90° ccw, centred on (x, y)
	dot(x, y, r float64, fill string)
}

type pt struct{ x, y float64 }

// Text anchors.
const (
	anchorStart = iota
	anchorMiddle
	anchorEnd
)

// Size of the picture in pixels.
const (
	width  = 1000
	height = 1060
)

var streamColors = map[string]string{"BE": "#1b9e77", "BK": "#d95f02", "CS5": "#7570b3", "EF": "#e7298a"}
var probeColors = map[string]string{"udp-ef": "#e7298a", "udp-be": "#1b9e77", "udp-bk": "#d95f02", "icmp": "#7570b3"}
var extraColors = []string{"#1b9e77", "#d95f02", "#7570b3", "#e7298a", "#66a61e", "#e6ab02", "#a6761d", "#666666"}

const (
	colAxis   = "#333333"
	colGrid   = "#dddddd"
	colLoad   = "#f3efe0"
	colTotal  = "#000000"
	colIdle   = "#1f77b4"
	colLoaded = "#d62728"
	colLost   = "#d62728"
)

// Write draws r to w in the format named by path's extension (.svg or
// .png). host and date appear in the title.
func Write(w io.Writer, path string, r *bloat.Result) error {
	return encode(w, path, width, height, func(c canvas) { layout(c, r) })
}

// panel is a plot area with data ranges.
type panel struct {
	x, y, w, h   float64 // pixel box of the plot area
	x0, x1       float64 // data range
	y0, y1       float64
	xlabel, unit string
}

func (p *panel) px(x float64) float64 { return p.x + (x-p.x0)/(p.x1-p.x0)*p.w }
func (p *panel) py(y float64) float64 {
	y = math.Max(p.y0, math.Min(p.y1, y))
	return p.y + p.h - (y-p.y0)/(p.y1-p.y0)*p.h
}

// niceStep picks a 1/2/5×10^n step giving about n ticks over span.
func niceStep(span float64, n int) float64 {
	if span <= 0 {
		return 1
	}
	raw := span / float64(n)
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 2.5, 5, 10} {
		if raw <= m*mag {
			return m * mag
		}
	}
	return 10 * mag
}

// fmtTick prints a tick with the decimals its step needs (a 2.5 step
// printed "2", "5", "8" for 2.5, 5, 7.5; a 0.25 one "0.2", "0.5").
func fmtTick(v, step float64) string {
	if v == 0 {
		return "0"
	}
	d := 0
	for ; d < 6; d++ {
		x := step * math.Pow(10, float64(d))
		if math.Abs(x-math.Round(x)) < 1e-6*x {
			break
		}
	}
	return fmt.Sprintf("%.*f", d, v)
}

// axes draws the frame, grid, ticks and labels of p.
func (p *panel) axes(c canvas, ylabel string, xlabel string) {
	c.rect(p.x, p.y, p.w, p.h, "#ffffff")
	ys := niceStep(p.y1-p.y0, 4)
	for v := math.Ceil(p.y0/ys) * ys; v <= p.y1+ys*1e-9; v += ys {
		y := p.py(v)
		c.polyline([]pt{{p.x, y}, {p.x + p.w, y}}, colGrid, 1)
		c.text(p.x-6, y+4, fmtTick(v, ys), 11, anchorEnd, colAxis)
	}
	xs := niceStep(p.x1-p.x0, 10)
	for v := math.Ceil(p.x0/xs) * xs; v <= p.x1+xs*1e-9; v += xs {
		x := p.px(v)
		c.polyline([]pt{{x, p.y}, {x, p.y + p.h}}, colGrid, 1)
		c.text(x, p.y+p.h+15, fmtTick(v, xs), 11, anchorMiddle, colAxis)
	}
	c.polyline([]pt{{p.x, p.y}, {p.x, p.y + p.h}, {p.x + p.w, p.y + p.h}}, colAxis, 1)
	c.vtext(p.x-48, p.y+p.h/2, ylabel, 12, colAxis)
	if xlabel != "" {
		c.text(p.x+p.w/2, p.y+p.h+32, xlabel, 12, anchorMiddle, colAxis)
	}
}

type legendItem struct {
	label, color string
	bold         bool
}

func legend(c canvas, x, y float64, title string, items []legendItem) {
	c.text(x, y, title, 12, anchorStart, colAxis)
	for i, it := range items {
		yy := y + 18 + float64(i)*16
		w := 2.0
		if it.bold {
			w = 3
		}
		c.polyline([]pt{{x, yy - 4}, {x + 22, yy - 4}}, it.color, w)
		c.text(x+28, yy, it.label, 11, anchorStart, colAxis)
	}
}

// layout lays the whole picture out on c.
func layout(c canvas, r *bloat.Result) {
	c.rect(0, 0, width, height, "#ffffff")
	title := fmt.Sprintf("sqm test %s | %s | %s", r.Mode, r.Server, r.Start.UTC().Format("2006-01-02 15:04:05 UTC"))
	c.text(width/2, 26, title, 17, anchorMiddle, "#000000")
	sub := fmt.Sprintf("download %.2f Mbit/s | upload %.2f Mbit/s | median latency idle %.2f ms, loaded %.2f ms | induced %.1f ms | grade %s | %.0f RPM",
		r.DownloadMbps, r.UploadMbps, r.Idle.MedianMs, r.Loaded.MedianMs, r.InducedMs, r.Grade, r.RPM)
	if r.Mode == bloat.ModeIdle {
		sub = fmt.Sprintf("idle latency median %.2f ms, p90 %.2f ms, loss %.1f%% | %.0f RPM", r.Idle.MedianMs, r.Idle.P90Ms, r.Idle.LossPct, r.RPM)
	}
	c.text(width/2, 48, sub, 12, anchorMiddle, "#444444")

	const left, plotW, legendX = 80.0, 720.0, 825.0
	tmax := r.TotalS
	if tmax <= 0 && len(r.Series.TS) > 0 {
		tmax = r.Series.TS[len(r.Series.TS)-1]
	}
	if tmax <= 0 {
		tmax = 1
	}
	shade := func(p *panel) {
		for _, ph := range r.Phases {
			if strings.HasPrefix(ph.Name, "idle") {
				continue
			}
			x0, x1 := p.px(ph.StartS), p.px(ph.EndS)
			c.rect(x0, p.y, x1-x0, p.h, colLoad)
			c.text((x0+x1)/2, p.y+12, ph.Name, 10, anchorMiddle, "#998866")
		}
	}
	y := 75.0
	for _, dir := range []string{bloat.DirDown, bloat.DirUp} {
		name, total := "Download", r.Series.DownloadMbps
		if dir == bloat.DirUp {
			name, total = "Upload", r.Series.UploadMbps
		}
		ymax := 0.0
		for _, v := range total {
			ymax = math.Max(ymax, v)
		}
		if ymax <= 0 {
			ymax = 1
		}
		ymax = niceStep(ymax*1.08, 4) * math.Ceil(ymax*1.08/niceStep(ymax*1.08, 4))
		p := &panel{x: left, y: y, w: plotW, h: 170, x0: 0, x1: tmax, y0: 0, y1: ymax}
		p.axes(c, name+" (Mbit/s)", "")
		shade(p)
		p.axes2(c)
		var items []legendItem
		ci := 0
		for _, s := range r.Streams {
			if s.Dir != dir {
				continue
			}
			col, ok := streamColors[s.Label]
			if !ok {
				col = extraColors[ci%len(extraColors)]
			}
			ci++
			var pts []pt
			for i, v := range s.MbpsSeries {
				if i < len(r.Series.TS) && r.Series.TS[i] > s.StartS && r.Series.TS[i] <= s.EndS+r.StepS {
					pts = append(pts, pt{p.px(r.Series.TS[i]), p.py(v)})
				}
			}
			c.polyline(pts, col, 1.2)
			items = append(items, legendItem{label: fmt.Sprintf("%s %.1f", s.Label, s.Mbps), color: col})
		}
		var pts []pt
		for i, v := range total {
			pts = append(pts, pt{p.px(r.Series.TS[i]), p.py(v)})
		}
		c.polyline(pts, colTotal, 2.2)
		items = append(items, legendItem{label: "total", color: colTotal, bold: true})
		legend(c, legendX, y+10, "TCP "+strings.ToLower(name)+" (Mbit/s)", items)
		y += 200
	}

	// Latency over time; the y axis is cut at 1.2× the 99th percentile so a
	// few outliers do not flatten the picture (as flent's scaled plots do).
	var all []float64
	for _, s := range r.Samples {
		if !s.Lost {
			all = append(all, s.RTTMs)
		}
	}
	sort.Float64s(all)
	ymax := 1.0
	if len(all) > 0 {
		ymax = all[int(0.99*float64(len(all)-1))] * 1.2
		ymax = math.Max(ymax, all[0]*1.5)
	}
	ys := niceStep(ymax, 4)
	ymax = ys * math.Ceil(ymax/ys)
	p := &panel{x: left, y: y, w: plotW, h: 200, x0: 0, x1: tmax, y0: 0, y1: ymax}
	p.axes(c, "Latency (ms)", "Time (s)")
	shade(p)
	p.axes2(c)
	var items []legendItem
	clipped := false
	for i, pk := range r.Probes {
		col, ok := probeColors[pk.Kind]
		if !ok {
			col = extraColors[i%len(extraColors)]
		}
		var pts []pt
		for _, s := range r.Samples {
			if s.Kind != pk.Kind {
				continue
			}
			if s.Lost {
				c.dot(p.px(s.TS), p.y+p.h-3, 2.5, colLost)
				continue
			}
			clipped = clipped || s.RTTMs > ymax
			pts = append(pts, pt{p.px(s.TS), p.py(s.RTTMs)})
		}
		c.polyline(pts, col, 1.2)
		items = append(items, legendItem{label: fmt.Sprintf("%s %.2f", pk.Kind, pk.Loaded.MedianMs), color: col})
	}
	if pk := r.Probes; len(pk) > 0 && r.Mode == bloat.ModeIdle {
		items = items[:0]
		for i, k := range pk {
			col, ok := probeColors[k.Kind]
			if !ok {
				col = extraColors[i%len(extraColors)]
			}
			items = append(items, legendItem{label: fmt.Sprintf("%s %.2f", k.Kind, k.Idle.MedianMs), color: col})
		}
	}
	probeTitle := "Probe (loaded median ms)"
	if r.Mode == bloat.ModeIdle {
		probeTitle = "Probe (median ms)"
	}
	legend(c, legendX, y+10, probeTitle, items)
	ly := y + 10 + 18 + float64(len(items))*16 + 6
	c.dot(legendX+11, ly-4, 2.5, colLost)
	c.text(legendX+28, ly, "lost probe", 11, anchorStart, colAxis)
	if clipped {
		c.text(p.x+p.w, p.y-4, "axis cut at 1.2 x p99; higher samples drawn at the top", 10, anchorEnd, "#888888")
	}
	y += 200 + 70

	// CDF of idle vs loaded latency.
	var idle, loaded []float64
	for _, s := range r.Samples {
		if s.Lost {
			continue
		}
		if inLoad(r, s.TS) {
			loaded = append(loaded, s.RTTMs)
		} else {
			idle = append(idle, s.RTTMs)
		}
	}
	sort.Float64s(idle)
	sort.Float64s(loaded)
	cmax := 1.0
	if len(all) > 0 {
		cmax = all[int(0.99*float64(len(all)-1))] * 1.1
	}
	xs := niceStep(cmax, 8)
	cmax = xs * math.Ceil(cmax/xs)
	cp := &panel{x: left, y: y, w: plotW, h: 230, x0: 0, x1: cmax, y0: 0, y1: 100}
	cp.axes(c, "Cumulative probes (%)", "Round-trip latency (ms)")
	items = items[:0]
	for _, set := range []struct {
		name string
		v    []float64
		col  string
	}{{"idle", idle, colIdle}, {"loaded", loaded, colLoaded}} {
		if len(set.v) == 0 {
			continue
		}
		pts := []pt{{cp.px(math.Min(set.v[0], cmax)), cp.py(0)}}
		for i, v := range set.v {
			x := cp.px(math.Min(v, cmax))
			pts = append(pts, pt{x, cp.py(100 * float64(i) / float64(len(set.v)))}, pt{x, cp.py(100 * float64(i+1) / float64(len(set.v)))})
		}
		c.polyline(pts, set.col, 2)
		med := stats.Percentile(set.v, 50) // as in the text summary
		items = append(items, legendItem{label: fmt.Sprintf("%s %.2f", set.name, med), color: set.col, bold: true})
	}
	legend(c, legendX, y+10, "CDF (median ms)", items)
	c.text(width-10, height-8, "sqm", 10, anchorEnd, "#aaaaaa")
}

// axes2 redraws the frame and grid over the load shading.
func (p *panel) axes2(c canvas) {
	ys := niceStep(p.y1-p.y0, 4)
	for v := math.Ceil(p.y0/ys) * ys; v <= p.y1+ys*1e-9; v += ys {
		y := p.py(v)
		c.polyline([]pt{{p.x, y}, {p.x + p.w, y}}, colGrid, 1)
	}
	c.polyline([]pt{{p.x, p.y}, {p.x, p.y + p.h}, {p.x + p.w, p.y + p.h}}, colAxis, 1)
}

func inLoad(r *bloat.Result, t float64) bool {
	for _, ph := range r.Phases {
		if !strings.HasPrefix(ph.Name, "idle") && t >= ph.StartS && t < ph.EndS {
			return true
		}
	}
	return false
}

// logAxes draws p's frame with a linear y axis from 0 in steps of ys and
// a logarithmic x axis from xlo to xhi (p.x0, p.x1 are their logarithms),
// gridded at 1-2-5 values.
func (p *panel) logAxes(c canvas, ys, xlo, xhi float64, ylabel, xlabel string) {
	c.rect(p.x, p.y, p.w, p.h, "#ffffff")
	for v := 0.0; v <= p.y1+ys*1e-9; v += ys {
		y := p.py(v)
		c.polyline([]pt{{p.x, y}, {p.x + p.w, y}}, colGrid, 1)
		c.text(p.x-6, y+4, fmtTick(v, ys), 11, anchorEnd, colAxis)
	}
	for _, v := range logTicks(xlo, xhi) {
		x := p.px(math.Log10(v))
		c.polyline([]pt{{x, p.y}, {x, p.y + p.h}}, colGrid, 1)
		c.text(x, p.y+p.h+15, fmtTick(v, math.Min(1, v)), 11, anchorMiddle, colAxis)
	}
	c.polyline([]pt{{p.x, p.y}, {p.x, p.y + p.h}, {p.x + p.w, p.y + p.h}}, colAxis, 1)
	c.vtext(p.x-48, p.y+p.h/2, ylabel, 12, colAxis)
	c.text(p.x+p.w/2, p.y+p.h+34, xlabel, 12, anchorMiddle, colAxis)
}
