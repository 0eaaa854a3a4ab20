package tune

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/xml"
	"errors"
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sqm/internal/plot"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden")

// seed004Run is tune on a simulated line shaped like seed 004's: 7616/864
// kbit/s ADSL, ATM + 44, 29 ms base RTT; tune configured with sqm's
// default framing (none) finds ATM + 44 itself.
func seed004Run(t *testing.T) *Result {
	t.Helper()
	l := *simLinks()["seed004-adsl"]
	l.ShaperATM, l.ShaperOverhead = false, 0
	res, err := Run(context.Background(), &l, Options{Profile: "balanced", Linklayer: "none", Detect: true, Now: l.Now})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./internal/tune -update)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the golden file (run go test ./internal/tune -update if intended, and look at it)\ngot:\n%s", path, got)
	}
}

func TestTableGolden(t *testing.T) {
	var b bytes.Buffer
	if err := WriteTable(&b, seed004Run(t)); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"download", "upload", "both directions loaded", "unshaped", "<- chosen", "90pct", "induced", "grade"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("table lacks %q", want)
		}
	}
	golden(t, "seed004.txt.golden", b.Bytes())
}

// TestJSONContract checks the names issue 12's output contract fixes, then
// the whole object against its golden file.
func TestJSONContract(t *testing.T) {
	res := seed004Run(t)
	b, err := json.MarshalIndent(res, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"download_kbit", "upload_kbit", "linklayer", "overhead", "target_ms", "seconds", "points"} {
		if _, ok := m[k]; !ok {
			t.Errorf("tune object lacks %q", k)
		}
	}
	if pts, _ := m["points"].([]any); len(pts) != len(res.Points) || len(pts) == 0 {
		t.Errorf("points: %d in JSON, %d measured", len(pts), len(res.Points))
	}
	if m["seconds"].(float64) <= 0 || m["linklayer"] != "atm" || m["overhead"].(float64) != 44 || m["target_ms"].(float64) != 30 {
		t.Errorf("seconds/linklayer/overhead/target_ms = %v/%v/%v/%v", m["seconds"], m["linklayer"], m["overhead"], m["target_ms"])
	}
	golden(t, "seed004.json.golden", append(b, '\n'))
}

func TestCurveGolden(t *testing.T) {
	res := seed004Run(t)
	var b bytes.Buffer
	if err := plot.WriteTradeoff(&b, "x.svg", Tradeoff(res, "sqm tune | simulated ADSL 7616/864 ATM+44")); err != nil {
		t.Fatal(err)
	}
	dec := xml.NewDecoder(bytes.NewReader(b.Bytes()))
	for {
		if _, err := dec.Token(); err != nil {
			if !errors.Is(err, io.EOF) {
				t.Fatalf("svg is not well-formed XML: %v", err)
			}
			break
		}
	}
	for _, want := range []string{"unshaped", "chosen 7", "chosen 8", "target 30 ms", "Download goodput", "Upload goodput"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("svg lacks %q", want)
		}
	}
	golden(t, "seed004.svg.golden", b.Bytes())
	var p bytes.Buffer
	if err := plot.WriteTradeoff(&p, "x.png", Tradeoff(res, "t")); err != nil || !bytes.HasPrefix(p.Bytes(), []byte("\x89PNG")) {
		t.Fatalf("png: %v", err)
	}
	if err := plot.WriteTradeoff(&p, "x.gif", Tradeoff(res, "t")); err == nil {
		t.Fatal("gif accepted")
	}
}
