package plot

import (
	"fmt"
	"html"
	"io"
	"strings"

	"sqm/internal/bloat"
)

// SVG writes the picture as a standalone SVG document.
func SVG(w io.Writer, r *bloat.Result) error {
	return encodeSVG(w, width, height, func(c canvas) { layout(c, r) })
}

type svgCanvas struct{ b strings.Builder }

func (s *svgCanvas) rect(x, y, w, h float64, fill string) {
	fmt.Fprintf(&s.b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s"/>`+"\n", x, y, w, h, fill)
}

func (s *svgCanvas) polyline(pts []pt, stroke string, width float64) {
	if len(pts) < 2 {
		return
	}
	s.b.WriteString(`<polyline fill="none" stroke-linejoin="round" points="`)
	for i, p := range pts {
		if i > 0 {
			s.b.WriteByte(' ')
		}
		fmt.Fprintf(&s.b, "%.1f,%.1f", p.x, p.y)
	}
	fmt.Fprintf(&s.b, `" stroke="%s" stroke-width="%.1f"/>`+"\n", stroke, width)
}

var svgAnchor = [...]string{"start", "middle", "end"}

func (s *svgCanvas) text(x, y float64, t string, size float64, anchor int, color string) {
	fmt.Fprintf(&s.b, `<text x="%.1f" y="%.1f" font-size="%.0f" text-anchor="%s" fill="%s">%s</text>`+"\n", x, y, size, svgAnchor[anchor], color, html.EscapeString(t))
}

func (s *svgCanvas) vtext(x, y float64, t string, size float64, color string) {
	fmt.Fprintf(&s.b, `<text transform="translate(%.1f %.1f) rotate(-90)" font-size="%.0f" text-anchor="middle" fill="%s">%s</text>`+"\n", x, y, size, color, html.EscapeString(t))
}

func (s *svgCanvas) dot(x, y, r float64, fill string) {
	fmt.Fprintf(&s.b, `<circle cx="%.1f" cy="%.1f" r="%.1f" fill="%s"/>`+"\n", x, y, r, fill)
}

var _ = bloat.ModeRRUL
