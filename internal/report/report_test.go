package report

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"sqm/internal/bloat"
	"sqm/internal/bloat/bloattest"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden")

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		os.MkdirAll("testdata", 0o755)
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from golden file (run go test -update if intended):\n%s", name, got)
	}
}

func TestText(t *testing.T) {
	var b bytes.Buffer
	if err := Text(&b, bloattest.Synthetic()); err != nil {
		t.Fatal(err)
	}
	golden(t, "rrul.txt.golden", b.Bytes())
	for _, want := range []string{"Download:    19.40 Mbps", "10pct:", "99pct:", "Bufferbloat grade: D", "RPM, Poor", "Note: example note"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("text lacks %q", want)
		}
	}
}

func TestTextSpeedtest(t *testing.T) {
	r := bloattest.Synthetic()
	r.Mode = bloat.ModeSpeedtest
	r.LoadS = 10
	down, up := r.Loaded, r.Loaded
	down.MedianMs, up.MedianMs = 250, 330
	r.Phases = []bloat.Phase{
		{Name: "idle-before", StartS: 0, EndS: 5, Latency: r.Idle},
		{Name: "download", StartS: 5, EndS: 15, DownloadMbps: 19.4, Latency: down},
		{Name: "upload", StartS: 15, EndS: 25, UploadMbps: 4.85, Latency: up},
		{Name: "idle-after", StartS: 25, EndS: 30, Latency: r.Idle},
	}
	r.Notes = nil
	var b bytes.Buffer
	if err := Text(&b, r); err != nil {
		t.Fatal(err)
	}
	golden(t, "speedtest.txt.golden", b.Bytes())
	if !regexp.MustCompile(`idle +download +upload +loaded`).MatchString(b.String()) {
		t.Errorf("speedtest text lacks the per-phase columns:\n%s", b.String())
	}
}

func TestJSONFields(t *testing.T) {
	var b bytes.Buffer
	if err := JSON(&b, bloattest.Synthetic()); err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b.Bytes(), &m); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"download_mbps", "upload_mbps", "idle", "loaded", "induced_ms", "grade", "rpm", "probes", "streams", "series", "samples"} {
		if _, ok := m[k]; !ok {
			t.Errorf("json lacks %q", k)
		}
	}
	for _, part := range []string{"idle", "loaded"} {
		sub := m[part].(map[string]any)
		for _, k := range []string{"min_ms", "p10_ms", "median_ms", "mean_ms", "p90_ms", "p99_ms", "max_ms", "count", "loss_pct"} {
			if _, ok := sub[k]; !ok {
				t.Errorf("json %s lacks %q", part, k)
			}
		}
	}
}

func TestFlentStructure(t *testing.T) {
	var b bytes.Buffer
	if err := Flent(&b, bloattest.Synthetic(), "x.flent.gz"); err != nil {
		t.Fatal(err)
	}
	zr, err := gzip.NewReader(&b)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Version int                         `json:"version"`
		X       []float64                   `json:"x_values"`
		Results map[string][]*float64       `json:"results"`
		Raw     map[string][]map[string]any `json:"raw_values"`
		Meta    map[string]any              `json:"metadata"`
	}
	if err := json.NewDecoder(zr).Decode(&doc); err != nil {
		t.Fatal(err)
	}
	if doc.Version != 4 || doc.Meta["NAME"] != "rrul" {
		t.Errorf("version %d name %v", doc.Version, doc.Meta["NAME"])
	}
	for _, name := range []string{"TCP download BE", "TCP download BK", "TCP download CS5", "TCP download EF",
		"TCP upload BE", "TCP upload EF", "TCP download sum", "TCP upload avg", "TCP totals",
		"Ping (ms) UDP EF", "Ping (ms) UDP BE", "Ping (ms) UDP BK", "Ping (ms) ICMP", "Ping (ms) avg"} {
		v, ok := doc.Results[name]
		if !ok {
			t.Errorf("no series %q", name)
			continue
		}
		if len(v) != len(doc.X) {
			t.Errorf("%q has %d values for %d x values", name, len(v), len(doc.X))
		}
	}
	if note, _ := doc.Meta["NOTE"].(string); !strings.Contains(note, "sqm's own server") {
		t.Errorf("NOTE %q: the synthetic run names no load server, so the note must say sqm's own", note)
	}
	if err := Flent(&b, &bloat.Result{Mode: bloat.ModeSpeedtest}, "x"); err == nil {
		t.Error("flent accepted a speedtest run")
	}
}

// TestFlentNote: the metadata names the server that carried the load, so
// a file from an iperf3 or netperf run is not taken for sqm server's.
func TestFlentNote(t *testing.T) {
	for _, load := range []string{"sqm://192.0.2.7:8474", "iperf3://192.0.2.7:5201", "netperf://192.0.2.7:12865"} {
		r := bloattest.Synthetic()
		r.Servers = &bloat.Servers{Load: load}
		if got := flentNote(r); !strings.Contains(got, "load by "+load) {
			t.Errorf("load %s: NOTE %q", load, got)
		}
	}
}

// TestFlentOpens has flent itself load and plot the file.
func TestFlentOpens(t *testing.T) {
	CheckFlentOpens(t, bloattest.Synthetic())
}

// CheckFlentOpens writes r as a flent file and has the flent program plot
// it with all_scaled; it skips when flent is not installed.
func CheckFlentOpens(t *testing.T, r *bloat.Result) {
	t.Helper()
	flent, err := exec.LookPath("flent")
	if err != nil {
		t.Skip("flent not installed (apt install flent; .ci/run installs it)")
	}
	dir := t.TempDir()
	data := filepath.Join(dir, "run.flent.gz")
	if err := WriteFlentFile(data, r); err != nil {
		t.Fatal(err)
	}
	png := filepath.Join(dir, "out.png")
	cmd := exec.Command(flent, "-i", data, "-p", "all_scaled", "-o", png)
	cmd.Env = append(os.Environ(), "MPLBACKEND=Agg", "HOME="+dir)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("flent failed: %v\n%s", err, out)
	}
	if strings.Contains(string(out), "Traceback") || strings.Contains(string(out), "ERROR") {
		t.Fatalf("flent complained:\n%s", out)
	}
	st, err := os.Stat(png)
	if err != nil || st.Size() < 10000 {
		t.Fatalf("flent wrote no plot (%v):\n%s", err, out)
	}
	if os.Getenv("SQM_KEEP_PLOTS") != "" {
		data, _ := os.ReadFile(png)
		os.WriteFile(filepath.Join(os.Getenv("SQM_KEEP_PLOTS"), "flent-"+t.Name()+".png"), data, 0o644)
	}
}
