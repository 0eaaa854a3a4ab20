package plot

import (
	"bytes"
	"encoding/xml"
	"flag"
	"image/png"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sqm/internal/bloat"
	"sqm/internal/bloat/bloattest"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden")

func TestSVGGolden(t *testing.T) {
	var b bytes.Buffer
	if err := SVG(&b, bloattest.Synthetic()); err != nil {
		t.Fatal(err)
	}
	// Well-formed XML.
	dec := xml.NewDecoder(bytes.NewReader(b.Bytes()))
	for {
		if _, err := dec.Token(); err != nil {
			if err.Error() != "EOF" {
				t.Fatalf("svg is not well-formed XML: %v", err)
			}
			break
		}
	}
	for _, want := range []string{"Download (Mbit/s)", "Upload (Mbit/s)", "Latency (ms)", "Time (s)", "2026-11-29 23:30:00 UTC", "10.0.0.2:12866", "CDF (median ms)"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("svg lacks %q", want)
		}
	}
	path := filepath.Join("testdata", "rrul.svg.golden")
	if *update {
		os.MkdirAll("testdata", 0o755)
		os.WriteFile(path, b.Bytes(), 0o644)
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update)", err)
	}
	if !bytes.Equal(b.Bytes(), want) {
		t.Error("svg differs from testdata/rrul.svg.golden (run go test -update if intended, and look at it)")
	}
	keep(t, "synthetic.svg", b.Bytes())
}

func TestPNG(t *testing.T) {
	requirePNG(t)
	for _, r := range []*bloat.Result{bloattest.Synthetic(), {Mode: bloat.ModeIdle}} {
		var b bytes.Buffer
		if err := Write(&b, "x.PNG", r); err != nil {
			t.Fatal(err)
		}
		data := append([]byte(nil), b.Bytes()...)
		img, err := png.Decode(&b)
		if err != nil {
			t.Fatal(err)
		}
		if s := img.Bounds().Size(); s.X != width || s.Y != height {
			t.Errorf("png is %v", s)
		}
		keep(t, "synthetic-"+string(r.Mode)+".png", data)
	}
	if err := Write(&bytes.Buffer{}, "x.gif", bloattest.Synthetic()); err == nil {
		t.Error("Write accepted .gif")
	}
}

// keep copies a picture to $SQM_KEEP_PLOTS so a person can look at it.
func keep(t *testing.T, name string, data []byte) {
	if dir := os.Getenv("SQM_KEEP_PLOTS"); dir != "" {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Log(err)
		}
	}
}

// requirePNG skips a test of the raster path in a build without it.
func requirePNG(t *testing.T) {
	if !pngBuilt {
		t.Skip("built with -tags sqm_nopng: no PNG (TestSupported checks it is refused)")
	}
}

// TestSupported: what Supported accepts is exactly what the writers draw,
// so a command's early --plot check and the writer cannot disagree; in a
// build with -tags sqm_nopng (go test -tags sqm_nopng ./internal/plot)
// a .png name is refused by both, and the error names the tag.
func TestSupported(t *testing.T) {
	for _, path := range []string{"a.svg", "A.SVG", "dir.x/b.png", "c.jpg", "svg", "d.svg.gz", ""} {
		err := Write(io.Discard, path, bloattest.Synthetic())
		if got := Supported(path); got != (err == nil) {
			t.Errorf("Supported(%q) = %v, but Write says %v", path, got, err)
		}
	}
	err := Write(io.Discard, "b.png", bloattest.Synthetic())
	if Supported("b.png") != pngBuilt {
		t.Errorf("Supported(b.png) = %v in a build with pngBuilt %v", !pngBuilt, pngBuilt)
	}
	if !pngBuilt && (err == nil || !strings.Contains(err.Error(), "sqm_nopng")) {
		t.Errorf("Write(b.png) without PNG: %v; want an error naming -tags sqm_nopng", err)
	}
}

func TestFmtTick(t *testing.T) {
	for _, tc := range []struct {
		v, step float64
		want    string
	}{
		{0, 2.5, "0"}, {2.5, 2.5, "2.5"}, {7.5, 2.5, "7.5"}, {10, 2.5, "10.0"},
		{5, 1, "5"}, {20, 10, "20"}, {0.25, 0.25, "0.25"}, {0.5, 0.25, "0.50"},
		{0.2, 0.1, "0.2"}, {150, 50, "150"}, {0.002, 0.001, "0.002"},
	} {
		if got := fmtTick(tc.v, tc.step); got != tc.want {
			t.Errorf("fmtTick(%v, %v) = %q, want %q", tc.v, tc.step, got, tc.want)
		}
	}
}
