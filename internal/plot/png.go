//go:build !sqm_nopng

package plot

import (
	"fmt"
	"image"
	"image/color"
	"image/draw"
	"image/png"
	"io"
	"math"
	"strconv"

	"golang.org/x/image/font"
	"golang.org/x/image/font/basicfont"
	"golang.org/x/image/math/fixed"

	"sqm/internal/bloat"
)

// pngBuilt says this build draws PNG; -tags sqm_nopng leaves the raster
// path (image/png, x/image's font, ~130 KB on mipsle) out of builds for a
// router, whose page draws SVG (png_omitted.go).
const pngBuilt = true

// Formats names the picture file names this build can write, for errors.
const Formats = ".svg or .png"

func encodePNG(out io.Writer, w, h int, draw func(canvas)) error {
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	draw(&pngCanvas{img: img})
	if err := png.Encode(out, img); err != nil {
		return fmt.Errorf("plot: write png: %w", err)
	}
	return nil
}

// PNG writes the picture as a PNG image. Text uses x/image's 7×13 bitmap
// font at every size (sizes ≥ 16 are drawn bold), lines are drawn with
// simple coverage-based anti-aliasing.
func PNG(w io.Writer, r *bloat.Result) error {
	return encodePNG(w, width, height, func(c canvas) { layout(c, r) })
}

type pngCanvas struct{ img *image.RGBA }

func parseColor(s string) color.RGBA {
	v, _ := strconv.ParseUint(s[1:], 16, 32)
	return color.RGBA{uint8(v >> 16), uint8(v >> 8), uint8(v), 255}
}

// blend paints c over pixel (x, y) with coverage a in 0..1.
func (p *pngCanvas) blend(x, y int, c color.RGBA, a float64) {
	if !(image.Point{x, y}.In(p.img.Rect)) || a <= 0 {
		return
	}
	a = math.Min(a, 1)
	o := p.img.RGBAAt(x, y)
	mix := func(d, s uint8) uint8 { return uint8(float64(d)*(1-a) + float64(s)*a + 0.5) }
	p.img.SetRGBA(x, y, color.RGBA{mix(o.R, c.R), mix(o.G, c.G), mix(o.B, c.B), 255})
}

func (p *pngCanvas) rect(x, y, w, h float64, fill string) {
	r := image.Rect(int(math.Round(x)), int(math.Round(y)), int(math.Round(x+w)), int(math.Round(y+h)))
	draw.Draw(p.img, r, &image.Uniform{parseColor(fill)}, image.Point{}, draw.Src)
}

// polyline draws each segment as a capsule of the given width: a pixel's
// coverage falls off linearly over one pixel at the edge.
func (p *pngCanvas) polyline(pts []pt, stroke string, width float64) {
	c := parseColor(stroke)
	hw := width / 2
	for i := 1; i < len(pts); i++ {
		a, b := pts[i-1], pts[i]
		// Exact thin axis-aligned 1px lines (grid, axes) stay crisp.
		if width <= 1 && (a.x == b.x || a.y == b.y) {
			x0, x1 := int(math.Round(math.Min(a.x, b.x))), int(math.Round(math.Max(a.x, b.x)))
			y0, y1 := int(math.Round(math.Min(a.y, b.y))), int(math.Round(math.Max(a.y, b.y)))
			for y := y0; y <= y1; y++ {
				for x := x0; x <= x1; x++ {
					p.blend(x, y, c, 1)
				}
			}
			continue
		}
		minX, maxX := int(math.Floor(math.Min(a.x, b.x)-hw-1)), int(math.Ceil(math.Max(a.x, b.x)+hw+1))
		minY, maxY := int(math.Floor(math.Min(a.y, b.y)-hw-1)), int(math.Ceil(math.Max(a.y, b.y)+hw+1))
		dx, dy := b.x-a.x, b.y-a.y
		l2 := dx*dx + dy*dy
		for y := minY; y <= maxY; y++ {
			for x := minX; x <= maxX; x++ {
				px, py := float64(x), float64(y)
				t := 0.0
				if l2 > 0 {
					t = math.Max(0, math.Min(1, ((px-a.x)*dx+(py-a.y)*dy)/l2))
				}
				d := math.Hypot(px-(a.x+t*dx), py-(a.y+t*dy))
				cov := hw + 0.5 - d
				if cov > 0 {
					// Blend only the part not yet covered by a joint segment.
					if i > 1 && pointSegDist(px, py, pts[i-2], a) <= hw-0.5 {
						continue
					}
					p.blend(x, y, c, cov)
				}
			}
		}
	}
}

func pointSegDist(px, py float64, a, b pt) float64 {
	dx, dy := b.x-a.x, b.y-a.y
	l2 := dx*dx + dy*dy
	t := 0.0
	if l2 > 0 {
		t = math.Max(0, math.Min(1, ((px-a.x)*dx+(py-a.y)*dy)/l2))
	}
	return math.Hypot(px-(a.x+t*dx), py-(a.y+t*dy))
}

func (p *pngCanvas) dot(x, y, r float64, fill string) {
	c := parseColor(fill)
	for yy := int(y - r - 1); yy <= int(y+r+1); yy++ {
		for xx := int(x - r - 1); xx <= int(x+r+1); xx++ {
			p.blend(xx, yy, c, r+0.5-math.Hypot(float64(xx)-x, float64(yy)-y))
		}
	}
}

var face = basicfont.Face7x13

func textWidth(s string) int { return font.MeasureString(face, s).Ceil() }

func (p *pngCanvas) drawString(dst draw.Image, x, y int, s string, c color.RGBA, bold bool) {
	d := &font.Drawer{Dst: dst, Src: &image.Uniform{c}, Face: face, Dot: fixed.P(x, y)}
	d.DrawString(s)
	if bold {
		d.Dot = fixed.P(x+1, y)
		d.DrawString(s)
	}
}

func (p *pngCanvas) text(x, y float64, s string, size float64, anchor int, col string) {
	w := textWidth(s)
	if size >= 16 {
		w++
	}
	xi := int(math.Round(x))
	switch anchor {
	case anchorMiddle:
		xi -= w / 2
	case anchorEnd:
		xi -= w
	}
	p.drawString(p.img, xi, int(math.Round(y)), s, parseColor(col), size >= 16)
}

func (p *pngCanvas) vtext(x, y float64, s string, size float64, col string) {
	w, h := textWidth(s), 13
	tmp := image.NewRGBA(image.Rect(0, 0, w, h))
	p.drawString(tmp, 0, 10, s, parseColor(col), false)
	// Rotate 90° counter-clockwise into place, centred on (x, y).
	x0, y0 := int(math.Round(x))-h/2, int(math.Round(y))+w/2
	for ty := 0; ty < h; ty++ {
		for tx := 0; tx < w; tx++ {
			c := tmp.RGBAAt(tx, ty)
			if c.A == 0 {
				continue
			}
			p.blend(x0+ty, y0-tx, color.RGBA{c.R, c.G, c.B, 255}, float64(c.A)/255)
		}
	}
}

var _ = bloat.ModeRRUL
