package web

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"sqm/internal/bloat"
	"sqm/internal/tune"
)

// fakeTune is the Tune hook of the tests: it reports a step and a line,
// waits for the test to let it go on (or for cancel), then tunes the
// simulated seed-004 line in no time.
type fakeTune struct {
	reqs chan TuneRequest
	gate chan struct{}
	err  error // returned instead of a result
}

func newFakeTune() *fakeTune {
	return &fakeTune{reqs: make(chan TuneRequest, 4), gate: make(chan struct{})}
}

func (f *fakeTune) run(ctx context.Context, req TuneRequest) (*tune.Result, error) {
	f.reqs <- req
	req.Line("idle      median 29.0 ms, p90 29.9 ms (100 probes)")
	req.Step(tune.Step{Phase: tune.RoleSweep, Dir: tune.Down, DownKbit: 6100, Done: 3, Expected: 27, Budget: tune.DefaultBudget})
	select {
	case <-f.gate:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if f.err != nil {
		return nil, f.err
	}
	l := &tune.SimLink{DownKbit: 7616, UpKbit: 864, ATM: true, Overhead: 32, ShaperATM: true, ShaperOverhead: 44,
		BufferPkts: 300, BaseMs: 29, JitterMs: 0.5, Seed: 4}
	return tune.Run(ctx, l, tune.Options{Profile: req.Profile, Detect: req.Detect, Linklayer: "atm", Overhead: 44, Now: l.Now, OnStep: req.Step, Progress: req.Line})
}

func tuneRig(t *testing.T) (*rig, *fakeTune) {
	r := newRig(t)
	f := newFakeTune()
	r.srv.Tune = f.run
	r.srv.TestServer = "192.0.2.7"
	return r, f
}

// waitTune polls GET /api/tune until the tune is no longer running.
func waitTune(t *testing.T, c *client) map[string]any {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		code, m := c.do("GET", "/api/tune", nil, nil)
		if code != http.StatusOK {
			t.Fatalf("GET /api/tune: %d %v", code, m)
		}
		if m["running"] != true {
			return m
		}
		if time.Now().After(deadline) {
			t.Fatalf("tune still running: %v", m)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestTuneAuth(t *testing.T) {
	r, _ := tuneRig(t)
	anon := r.client()
	for _, p := range []string{"/api/tune", "/api/tune/plot.svg"} {
		if code, _ := anon.do("GET", p, nil, nil); code != http.StatusUnauthorized {
			t.Errorf("GET %s without login: %d; want 401", p, code)
		}
	}
	start := map[string]any{"section": "wan"}
	for _, p := range []string{"/api/tune", "/api/tune/save"} {
		if code, _ := anon.do("POST", p, start, nil); code != http.StatusUnauthorized {
			t.Errorf("POST %s without login: %d; want 401", p, code)
		}
	}
	adm := r.client()
	adm.login("admin-secret")
	if code, _ := adm.do("POST", "/api/tune", start, nil); code != http.StatusForbidden {
		t.Errorf("start without the CSRF token: %d; want 403", code)
	}
	ro := r.client()
	ro.login("read-secret")
	if code, m := ro.do("GET", "/api/tune", nil, nil); code != http.StatusOK || m["available"] != true {
		t.Errorf("read-only GET: %d %v; want 200, available", code, m)
	}
	for _, p := range []string{"/api/tune", "/api/tune/save"} {
		if code, m := ro.change(p, start); code != http.StatusForbidden || !strings.Contains(fmt.Sprint(m["error"]), "read-only") {
			t.Errorf("read-only POST %s: %d %v; want 403", p, code, m)
		}
	}
	if code, m := ro.do("GET", "/api/tune", nil, nil); code != http.StatusOK || m["running"] == true {
		t.Errorf("refused starts started a tune: %v", m)
	}
}

func TestTuneBadRequests(t *testing.T) {
	r, _ := tuneRig(t)
	c := r.client()
	c.login("admin-secret")
	for _, tc := range []struct {
		body map[string]any
		code int
		want string
	}{
		{map[string]any{"server": "192.0.2.1"}, http.StatusBadRequest, "section"},
		{map[string]any{"section": "wan", "profile": "fast"}, http.StatusBadRequest, "profile fast"},
		{map[string]any{"section": "wan", "duration_s": 3}, http.StatusBadRequest, "unknown field"},
		{map[string]any{}, http.StatusConflict, "no finished tune"}, // save
	} {
		path := "/api/tune"
		if len(tc.body) == 0 {
			path = "/api/tune/save"
		}
		code, m := c.change(path, tc.body)
		if code != tc.code || !strings.Contains(fmt.Sprint(m["error"]), tc.want) {
			t.Errorf("%s %v: %d %v; want %d and %q", path, tc.body, code, m, tc.code, tc.want)
		}
	}
	r.srv.TestServer = ""
	if code, m := c.change("/api/tune", map[string]any{"section": "wan"}); code != http.StatusBadRequest || !strings.Contains(fmt.Sprint(m["error"]), "test server") {
		t.Errorf("no server: %d %v", code, m)
	}
}

// TestTuneNoTuner: a build without the tuner says so, and the page hides
// the card on available=false.
func TestTuneNoTuner(t *testing.T) {
	r := newRig(t)
	c := r.client()
	c.login("admin-secret")
	if code, m := c.do("GET", "/api/tune", nil, nil); code != http.StatusOK || m["available"] != false {
		t.Errorf("GET: %d %v; want available false", code, m)
	}
	if code, m := c.change("/api/tune", map[string]any{"section": "wan", "server": "192.0.2.7"}); code != http.StatusNotImplemented || !strings.Contains(fmt.Sprint(m["error"]), "no tuner") {
		t.Errorf("POST: %d %v; want 501", code, m)
	}
}

// TestTuneProgressResultSave: the page's whole round, with the fake hook:
// progress while it runs, no test, second tune or config change
// meanwhile, the result with its table and plot, then the rates saved
// into the file (comments and the unknown option kept) and applied.
func TestTuneProgressResultSave(t *testing.T) {
	r, f := tuneRig(t)
	c := r.client()
	c.login("admin-secret")
	code, m := c.change("/api/tune", map[string]any{"section": "wan", "profile": "throughput", "detect": true})
	if code != http.StatusAccepted || m["running"] != true {
		t.Fatalf("start: %d %v", code, m)
	}
	req := <-f.reqs
	if req.Section != "wan" || req.Server != "192.0.2.7" || req.Profile != "throughput" || !req.Detect {
		t.Errorf("the hook got %+v; want section wan, the default server, throughput, detect", req)
	}
	_, m = c.do("GET", "/api/tune", nil, nil)
	if m["phase"] != "sweep" || m["dir"] != "down" || m["down_kbit"] != 6100.0 || m["done"] != 3.0 || m["expected"] != 27.0 || m["budget_s"] != 300.0 {
		t.Errorf("progress: %v", m)
	}
	if lines, _ := m["lines"].([]any); len(lines) != 1 || !strings.HasPrefix(lines[0].(string), "idle") {
		t.Errorf("lines: %v", m["lines"])
	}
	// One thing loads the link at a time, and the shaping is the tune's.
	if code, m := c.change("/api/tune", map[string]any{"section": "wan"}); code != http.StatusConflict || !strings.Contains(fmt.Sprint(m["error"]), "tune is running") {
		t.Errorf("second tune: %d %v; want 409", code, m)
	}
	if code, m := c.change("/api/test", map[string]any{"server": "192.0.2.7"}); code != http.StatusConflict || !strings.Contains(fmt.Sprint(m["error"]), "tune is running") {
		t.Errorf("test during the tune: %d %v; want 409", code, m)
	}
	if code, m := c.change("/api/config", map[string]any{"section": "wan", "set": map[string]string{"download": "1000"}}); code != http.StatusConflict {
		t.Errorf("config change during the tune: %d %v; want 409", code, m)
	}
	if code, m := c.change("/api/tune/save", map[string]any{}); code != http.StatusConflict {
		t.Errorf("save while running: %d %v; want 409", code, m)
	}
	close(f.gate)
	m = waitTune(t, c)
	if m["error"] != nil {
		t.Fatalf("tune failed: %v", m["error"])
	}
	res, _ := m["result"].(map[string]any)
	if res == nil {
		t.Fatalf("no result: %v", m)
	}
	down, up := int(res["download_kbit"].(float64)), int(res["upload_kbit"].(float64))
	if down < 6000 || down > 7616 || up < 600 || up > 864 || res["linklayer"] != "atm" || res["overhead"] != 32.0 || res["linklayer_source"] != "detected" || res["target_ms"] != 60.0 {
		t.Errorf("result: %v", res)
	}
	pts, _ := res["points"].([]any)
	chosen := map[string]bool{}
	roles := map[string]bool{}
	for _, p := range pts {
		p := p.(map[string]any)
		roles[p["role"].(string)] = true
		if p["chosen"] == true {
			chosen[p["dir"].(string)] = true
			if p["pass"] != true {
				t.Errorf("chosen point did not pass: %v", p)
			}
		}
	}
	if len(pts) < 15 || !roles["unshaped"] || !roles["sweep"] || !roles["validate"] || !chosen["both"] {
		t.Errorf("%d points, roles %v, chosen %v", len(pts), roles, chosen)
	}
	if _, ok := m["lines"].([]any); !ok || len(m["lines"].([]any)) != tuneLines {
		t.Errorf("lines kept: %v; want the last %d", m["lines"], tuneLines)
	}
	// The plot, as the page's <img> fetches it.
	res2, err := c.c.Get(r.ts.URL + "/api/tune/plot.svg")
	if err != nil {
		t.Fatal(err)
	}
	svg, _ := io.ReadAll(res2.Body)
	res2.Body.Close()
	if res2.StatusCode != 200 || res2.Header.Get("Content-Type") != "image/svg+xml" || !strings.Contains(string(svg), "<svg") || !strings.Contains(string(svg), "section wan") {
		t.Errorf("plot: %d %s %.200s", res2.StatusCode, res2.Header.Get("Content-Type"), svg)
	}

	// Save: only the rates and the detected framing change.
	code, m = c.change("/api/tune/save", map[string]any{})
	if code != http.StatusOK || m["ok"] != true {
		t.Fatalf("save: %d %v", code, m)
	}
	want := strings.NewReplacer("'20000'", fmt.Sprintf("'%d'", down), "'5000'", fmt.Sprintf("'%d'", up)).Replace(sampleConfig) +
		"\toption linklayer 'atm'\n\toption overhead '32'\n"
	if b, _ := os.ReadFile(r.cfg); string(b) != want {
		t.Errorf("config after save:\n%s\nwant:\n%s", b, want)
	}
	if r.applies != 1 {
		t.Errorf("applies %d; want 1", r.applies)
	}
	if _, m := c.do("GET", "/api/tune", nil, nil); !strings.Contains(fmt.Sprint(m["saved"]), fmt.Sprintf("saved %d/%d kbit/s in section wan: eth1: applied", down, up)) {
		t.Errorf("saved: %v", m["saved"])
	}
	// And the link is free again.
	if code, m := c.change("/api/config", map[string]any{"section": "wan", "set": map[string]string{"upload": "700"}}); code != http.StatusOK {
		t.Errorf("config change after the tune: %d %v", code, m)
	}
}

// TestTuneSaveRolledBack: the kernel refuses the saved rates: the old file
// is back and applied, and the page is told.
func TestTuneSaveRolledBack(t *testing.T) {
	r, f := tuneRig(t)
	close(f.gate)
	c := r.client()
	c.login("admin-secret")
	if code, m := c.change("/api/tune", map[string]any{"section": "wan"}); code != http.StatusAccepted {
		t.Fatalf("start: %d %v", code, m)
	}
	if m := waitTune(t, c); m["result"] == nil {
		t.Fatalf("no result: %v", m)
	}
	r.applyErr = errors.New("eth1: kernel said no")
	code, m := c.change("/api/tune/save", map[string]any{})
	if code != http.StatusConflict || m["rolled_back"] != true {
		t.Fatalf("save refused by the kernel: %d %v", code, m)
	}
	if b, _ := os.ReadFile(r.cfg); string(b) != sampleConfig || r.applies != 2 {
		t.Errorf("applies %d, file:\n%s", r.applies, b)
	}
	if _, m := c.do("GET", "/api/tune", nil, nil); m["saved"] != nil {
		t.Errorf("saved %v after a rollback", m["saved"])
	}
}

// TestTuneCancelAndErrors: cancel ends the hook's run and the page says
// so; a failed tune shows its error, which the next start clears; a tune
// cannot start while a page test runs.
func TestTuneCancelAndErrors(t *testing.T) {
	r, f := tuneRig(t)
	c := r.client()
	c.login("admin-secret")
	c.change("/api/tune", map[string]any{"section": "wan"})
	<-f.reqs
	if code, _ := c.change("/api/tune", map[string]any{"cancel": true}); code != http.StatusOK {
		t.Errorf("cancel: %d", code)
	}
	if m := waitTune(t, c); !strings.Contains(fmt.Sprint(m["error"]), "cancelled") || m["result"] != nil {
		t.Errorf("after cancel: %v", m)
	}

	f.err = errors.New("tune: down: the unshaped line moved no data; is the server reachable?")
	close(f.gate)
	c.change("/api/tune", map[string]any{"section": "wan"})
	if m := waitTune(t, c); !strings.Contains(fmt.Sprint(m["error"]), "moved no data") {
		t.Errorf("after a failure: %v", m)
	}
	f.err = nil
	if code, m := c.change("/api/tune", map[string]any{"section": "wan"}); code != http.StatusAccepted || m["error"] != nil {
		t.Errorf("restart: %d %v; want the old error cleared", code, m)
	}
	waitTune(t, c)

	// A page test holds the link: no tune meanwhile.
	testGate := make(chan struct{})
	r.srv.Test = func(ctx context.Context, o bloat.Options) (*bloat.Result, error) {
		<-testGate
		return nil, errors.New("stopped")
	}
	if code, m := c.change("/api/test", map[string]any{"server": "192.0.2.7"}); code != http.StatusAccepted {
		t.Fatalf("test: %d %v", code, m)
	}
	if code, m := c.change("/api/tune", map[string]any{"section": "wan"}); code != http.StatusConflict || !strings.Contains(fmt.Sprint(m["error"]), "test is already running") {
		t.Errorf("tune during a test: %d %v; want 409", code, m)
	}
	close(testGate)
}
