//go:build sqm_nopng

package plot

import (
	"errors"
	"io"

	"sqm/internal/bloat"
)

// A build with -tags sqm_nopng draws SVG only (png.go has the raster
// path): Supported refuses a .png name, so a command says so before it
// measures anything.
const pngBuilt = false

// Formats names the picture file names this build can write, for errors.
const Formats = ".svg (PNG is not in this build: -tags sqm_nopng)"

var errNoPNG = errors.New("plot: PNG is not in this build (built with -tags sqm_nopng); use a .svg file name")

func encodePNG(io.Writer, int, int, func(canvas)) error { return errNoPNG }

// PNG fails in this build; it exists so callers compile in both.
func PNG(io.Writer, *bloat.Result) error { return errNoPNG }
