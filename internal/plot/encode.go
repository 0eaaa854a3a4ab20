package plot

import (
	"fmt"
	"io"
	"path/filepath"
	"strings"
)

// encode draws a w×h picture with draw and writes it to out in the format
// path's extension names. Every picture in this package (the test plot,
// the trade-off curve) goes through it, so both accept the same formats,
// with the same SVG header and the same errors.
func encode(out io.Writer, path string, w, h int, draw func(canvas)) error {
	switch strings.ToLower(filepath.Ext(path)) {
	case ".svg":
		return encodeSVG(out, w, h, draw)
	case ".png":
		if !pngBuilt {
			return fmt.Errorf("plot: %s: PNG is not in this build (built with -tags sqm_nopng); use a .svg file name", path)
		}
		return encodePNG(out, w, h, draw)
	}
	return fmt.Errorf("plot: %s: unknown picture format; use a file name ending in %s", path, Formats)
}

// Supported reports whether path names a format Write and WriteTradeoff
// can draw, so a command can refuse a --plot file name before it spends a
// measurement on a picture it cannot write.
func Supported(path string) bool {
	switch strings.ToLower(filepath.Ext(path)) {
	case ".svg":
		return true
	case ".png":
		return pngBuilt
	}
	return false
}

// encodeSVG writes a standalone SVG document; it is built in memory so
// that a write error cannot leave half a document that still parses.
func encodeSVG(out io.Writer, w, h int, draw func(canvas)) error {
	s := &svgCanvas{}
	fmt.Fprintf(&s.b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="DejaVu Sans, Helvetica, Arial, sans-serif">`+"\n", w, h, w, h)
	draw(s)
	s.b.WriteString("</svg>\n")
	if _, err := io.WriteString(out, s.b.String()); err != nil {
		return fmt.Errorf("plot: write svg: %w", err)
	}
	return nil
}
