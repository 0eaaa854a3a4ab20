package plot

import (
	"bytes"
	"encoding/xml"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func sampleSweep() *Sweep {
	return &Sweep{
		Title: "policer sweep", Subtitle: "55/10 Mbit/s line, 20 ms, shaped 50 Mbit/s",
		XLabel: "bucket or limit (ms of the rate)",
		Series: []SweepSeries{
			{"police (bucket)", []SweepPoint{{160, 80, 47}, {5, 3, 30}, {20, 6, 46}}},
			{"codel_police (limit)", []SweepPoint{{20, 5.8, 44}, {80, 20, 45}}},
		},
		Refs: []SweepRef{{"cake on an IFB", 5.1, 47}},
	}
}

// TestSweepSVG: well-formed, labelled, one line per series and panel with
// its points in x order, the reference drawn across both panels.
func TestSweepSVG(t *testing.T) {
	var b bytes.Buffer
	if err := WriteSweep(&b, "x.svg", sampleSweep()); err != nil {
		t.Fatal(err)
	}
	dec := xml.NewDecoder(bytes.NewReader(b.Bytes()))
	for {
		if _, err := dec.Token(); err != nil {
			if err.Error() != "EOF" {
				t.Fatalf("svg is not well-formed XML: %v", err)
			}
			break
		}
	}
	s := b.String()
	for _, want := range []string{"policer sweep", "Induced latency, p90 (ms)", "Download goodput (Mbit/s)", "bucket or limit (ms of the rate)", "police (bucket)", "codel_police (limit)", "cake on an IFB"} {
		if !strings.Contains(s, want) {
			t.Errorf("svg lacks %q", want)
		}
	}
	if n := strings.Count(s, ">cake on an IFB<"); n != 2 {
		t.Errorf("reference labelled %d times; want once per panel", n)
	}
	path := filepath.Join("testdata", "sweep.svg.golden")
	if *update {
		if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(want, b.Bytes()) {
		t.Errorf("svg differs from %s (go test ./internal/plot -run TestSweepSVG -update, then look at it)", path)
	}
}

func TestSweepPNG(t *testing.T) {
	requirePNG(t)
	var b bytes.Buffer
	if err := WriteSweep(&b, "x.png", sampleSweep()); err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(b.Bytes(), []byte("\x89PNG")) {
		t.Error("not a PNG")
	}
}

// TestRefLabelAt: the reference label moves off the points: to the left
// end when a point sits under its place at the right, below the line when
// both ends above are taken, and back to the right, above, when nothing is
// clear.
func TestRefLabelAt(t *testing.T) {
	p := &panel{x: 100, y: 50, w: 400, h: 300}
	const y = 200.0
	right, left := pt{480, 190}, pt{120, 190}
	rightBelow, leftBelow := pt{480, 210}, pt{120, 210}
	for _, c := range []struct {
		name   string
		dots   []pt
		x, b   float64
		anchor int
	}{
		{"clear", []pt{{300, 100}}, 496, 196, anchorEnd},
		{"point at the right", []pt{right}, 104, 196, anchorStart},
		{"both ends above", []pt{right, left}, 496, 214, anchorEnd},
		{"all taken", []pt{right, left, rightBelow, leftBelow}, 496, 196, anchorEnd},
	} {
		x, b, a := refLabelAt(p, y, "cake on an IFB", c.dots)
		if x != c.x || b != c.b || a != c.anchor {
			t.Errorf("%s: label at (%g, %g) anchor %d; want (%g, %g) anchor %d", c.name, x, b, a, c.x, c.b, c.anchor)
		}
	}
}
