package report

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"flag"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"sqm/internal/bloat"
	"sqm/internal/stats"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden")

// synthetic builds a deterministic rrul Result shaped like a bloated link:
// 20 ms idle, latency climbing to ~300 ms under load, 19/4.8 Mbit/s.
func synthetic() *bloat.Result {
	r := &bloat.Result{
		FormatVersion: bloat.ResultVersion, Mode: bloat.ModeRRUL, Server: "10.0.0.2:12866",
		Start: time.Date(2026, 11, 29, 23, 30, 0, 0, time.UTC),
		IdleS: 5, LoadS: 20, StepS: 0.2, TotalS: 30,
	}
	n := int(r.TotalS/r.StepS) + 1
	loaded := func(t float64) bool { return t >= 5 && t < 25 }
	for i := 0; i < n; i++ {
		t := float64(i) * r.StepS
		r.Series.TS = append(r.Series.TS, t)
	}
	marks := []struct {
		l string
		d int
	}{{"BE", 0}, {"BK", 8}, {"CS5", 40}, {"EF", 46}}
	for _, dir := range []string{bloat.DirDown, bloat.DirUp} {
		for j, m := range marks {
			s := bloat.Stream{Dir: dir, Label: m.l, DSCP: m.d, StartS: 5.001, EndS: 25.001}
			rate := 4.75 + 0.1*float64(j)
			if dir == bloat.DirUp {
				rate /= 4
			}
			for _, t := range r.Series.TS {
				v := 0.0
				if t > 5.001 && t <= 25.2 {
					v = rate * (1 + 0.2*math.Sin(t*1.3+float64(j)))
				}
				s.MbpsSeries = append(s.MbpsSeries, v)
			}
			s.Mbps = rate
			s.Bytes = int64(rate * 20 * 1e6 / 8)
			r.Streams = append(r.Streams, s)
		}
	}
	for i, t := range r.Series.TS {
		var d, u float64
		for _, s := range r.Streams {
			if s.Dir == bloat.DirDown {
				d += s.MbpsSeries[i]
			} else {
				u += s.MbpsSeries[i]
			}
		}
		r.Series.DownloadMbps = append(r.Series.DownloadMbps, d)
		r.Series.UploadMbps = append(r.Series.UploadMbps, u)
		_ = t
	}
	kinds := []struct {
		k string
		d int
	}{{"udp-ef", 46}, {"udp-be", 0}, {"udp-bk", 8}, {"icmp", 0}}
	var idle, load []float64
	for ki, k := range kinds {
		var ki2, kl []float64
		for i := 0; i < n-1; i++ {
			ts := float64(i)*r.StepS + float64(ki)*0.05
			rtt := 20 + 0.3*math.Sin(float64(i))
			if loaded(ts) {
				rtt = 30 + 270*math.Min(1, (ts-5)/3) + 10*math.Sin(float64(i)*0.7)
			}
			lost := loaded(ts) && i%37 == ki
			s := bloat.Sample{Kind: k.k, Seq: uint64(i), TS: ts, RTTMs: rtt, Lost: lost}
			if lost {
				s.RTTMs = 0
			} else if loaded(ts) {
				load = append(load, rtt)
				kl = append(kl, rtt)
			} else {
				idle = append(idle, rtt)
				ki2 = append(ki2, rtt)
			}
			r.Samples = append(r.Samples, s)
		}
		r.Probes = append(r.Probes, bloat.ProbeSummary{Kind: k.k, DSCP: k.d,
			Idle: stats.Summarize(ki2, len(ki2)), Loaded: stats.Summarize(kl, 100)})
	}
	r.Idle = stats.Summarize(idle, len(idle))
	r.Loaded = stats.Summarize(load, len(load)+10)
	r.DownloadMbps, r.UploadMbps = 19.4, 4.85
	r.InducedMs = r.Loaded.MedianMs - r.Idle.MedianMs
	r.Grade = stats.Grade(r.InducedMs)
	r.RPM = stats.RPM(r.Loaded.MedianMs)
	r.RPMBand = stats.RPMBand(r.RPM)
	r.Phases = []bloat.Phase{
		{Name: "idle-before", StartS: 0, EndS: 5, Latency: r.Idle},
		{Name: "load", StartS: 5, EndS: 25, DownloadMbps: 19.4, UploadMbps: 4.85, Latency: r.Loaded},
		{Name: "idle-after", StartS: 25, EndS: 30, Latency: r.Idle},
	}
	r.Notes = []string{"example note"}
	return r
}

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
	if err := Text(&b, synthetic()); err != nil {
		t.Fatal(err)
	}
	golden(t, "rrul.txt.golden", b.Bytes())
	for _, want := range []string{"Download:    19.40 Mbps", "10pct:", "99pct:", "Bufferbloat grade: D", "RPM, Poor", "Note: example note"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("text lacks %q", want)
		}
	}
}

func TestJSONFields(t *testing.T) {
	var b bytes.Buffer
	if err := JSON(&b, synthetic()); err != nil {
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
	if err := Flent(&b, synthetic(), "x.flent.gz"); err != nil {
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
	if err := Flent(&b, &bloat.Result{Mode: bloat.ModeSpeedtest}, "x"); err == nil {
		t.Error("flent accepted a speedtest run")
	}
}

// TestFlentOpens has flent itself load and plot the file.
func TestFlentOpens(t *testing.T) {
	CheckFlentOpens(t, synthetic())
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
