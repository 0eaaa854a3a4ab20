package web

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"time"

	"sqm/internal/bloat"
	"sqm/internal/httpd"
	"sqm/internal/plot"
)

// testRunner holds the one bufferbloat test the page may run at a time
// (two at once would load the link against each other) and its result.
type testRunner struct {
	mu       sync.Mutex
	running  bool
	started  time.Time
	server   string
	progress *bloat.Progress
	phases   []string // phase names in the order they were seen
	result   *bloat.Result
	svg      []byte
	err      string
	cancel   context.CancelFunc
}

type testState struct {
	Running  bool         `json:"running"`
	Server   string       `json:"server,omitempty"`
	Default  string       `json:"default_server,omitempty"`
	Started  *time.Time   `json:"started,omitempty"`
	Phase    string       `json:"phase,omitempty"`
	Phases   []string     `json:"phases,omitempty"`
	Elapsed  float64      `json:"elapsed_s"`
	Total    float64      `json:"total_s"`
	DownMbps float64      `json:"download_mbps"`
	UpMbps   float64      `json:"upload_mbps"`
	RTTMs    float64      `json:"latency_ms"`
	Error    string       `json:"error,omitempty"`
	Result   *testSummary `json:"result,omitempty"`
}

// testSummary is the headline of a finished test; the full series stay on
// the server and reach the page as the plot.
type testSummary struct {
	Grade        string   `json:"grade"`
	InducedMs    float64  `json:"induced_ms"`
	DownloadMbps float64  `json:"download_mbps"`
	UploadMbps   float64  `json:"upload_mbps"`
	IdleMedianMs float64  `json:"idle_median_ms"`
	LoadedMedian float64  `json:"loaded_median_ms"`
	Loaded90     float64  `json:"loaded_p90_ms"`
	RPM          float64  `json:"rpm"`
	RPMBand      string   `json:"rpm_band"`
	Notes        []string `json:"notes,omitempty"`
}

func (s *Server) testState() testState {
	t := &s.test
	t.mu.Lock()
	defer t.mu.Unlock()
	st := testState{Running: t.running, Server: t.server, Default: s.TestServer, Error: t.err, Phases: t.phases}
	if !t.started.IsZero() {
		at := t.started.UTC()
		st.Started = &at
	}
	if p := t.progress; p != nil {
		st.Phase, st.Elapsed, st.Total = p.Phase, p.Elapsed.Seconds(), p.Total.Seconds()
		st.DownMbps, st.UpMbps, st.RTTMs = p.DownloadMbps, p.UploadMbps, p.LatencyMs
	}
	if r := t.result; r != nil {
		st.Result = &testSummary{
			Grade: r.Grade, InducedMs: r.InducedMs, DownloadMbps: r.DownloadMbps, UploadMbps: r.UploadMbps,
			IdleMedianMs: r.Idle.MedianMs, LoadedMedian: r.Loaded.MedianMs, Loaded90: r.Loaded.P90Ms,
			RPM: r.RPM, RPMBand: r.RPMBand, Notes: r.Notes,
		}
	}
	return st
}

func (s *Server) getTest(w httpd.ResponseWriter, r *httpd.Request, _ *session) {
	writeJSON(w, httpd.StatusOK, s.testState())
}

// Test lengths the page offers are bounded: a router page should not be
// able to keep the link saturated for an hour.
const maxTestDuration = 2 * time.Minute

func (s *Server) postTest(w httpd.ResponseWriter, r *httpd.Request, _ *session) {
	var req struct {
		Server   string  `json:"server"`
		Mode     string  `json:"mode"`
		Duration float64 `json:"duration_s"`
		Idle     float64 `json:"idle_s"`
		Cancel   bool    `json:"cancel"`
	}
	if !readJSON(w, r, &req) {
		return
	}
	t := &s.test
	if req.Cancel {
		t.mu.Lock()
		if t.cancel != nil {
			t.cancel()
		}
		t.mu.Unlock()
		writeJSON(w, httpd.StatusOK, s.testState())
		return
	}
	if req.Server == "" {
		req.Server = s.TestServer
	}
	if req.Server == "" {
		jsonError(w, httpd.StatusBadRequest, "no test server: give one (host or host:port of an 'sqm server')")
		return
	}
	mode := bloat.Mode(req.Mode)
	switch mode {
	case "":
		mode = bloat.ModeRRUL
	case bloat.ModeRRUL, bloat.ModeSpeedtest, bloat.ModeIdle:
	default:
		jsonError(w, httpd.StatusBadRequest, "mode "+req.Mode+": use rrul, speedtest or idle")
		return
	}
	dur := time.Duration(req.Duration * float64(time.Second))
	if dur == 0 {
		dur = 20 * time.Second
	}
	if dur < time.Second || dur > maxTestDuration {
		jsonError(w, httpd.StatusBadRequest, "duration_s: use 1 to 120 seconds")
		return
	}
	idle := time.Duration(req.Idle * float64(time.Second))
	if idle < 0 || idle > 30*time.Second {
		jsonError(w, httpd.StatusBadRequest, "idle_s: use 0 to 30 seconds")
		return
	}
	if idle == 0 {
		idle = 2 * time.Second
	}
	if err := s.claim("test"); err != nil {
		jsonError(w, httpd.StatusConflict, err.Error())
		return
	}
	t.mu.Lock()
	ctx, cancel := context.WithCancel(s.base())
	t.running, t.started, t.server = true, time.Now(), req.Server
	t.progress, t.phases, t.result, t.svg, t.err, t.cancel = nil, nil, nil, nil, "", cancel
	t.mu.Unlock()
	run := s.Test
	if run == nil {
		run = bloat.Run
	}
	opts := bloat.Options{
		Addr: req.Server, Mode: mode, Duration: dur, Idle: idle,
		Progress: func(p bloat.Progress) {
			t.mu.Lock()
			t.progress = &p
			if n := len(t.phases); n == 0 || t.phases[n-1] != p.Phase {
				t.phases = append(t.phases, p.Phase)
			}
			t.mu.Unlock()
		},
		// The log takes key-value pairs, not a format: the note is formatted
		// first, or its arguments would be logged as !BADKEY attributes.
		Logf: func(format string, args ...any) { s.log().Warn("web test: " + fmt.Sprintf(format, args...)) },
	}
	s.log().Info("web: bufferbloat test started", "server", req.Server, "mode", string(mode), "duration", dur)
	go func() {
		defer s.release() // last: after the outcome is recorded
		defer cancel()
		res, err := run(ctx, opts)
		var svg bytes.Buffer
		if err == nil {
			if perr := plot.SVG(&svg, res); perr != nil {
				s.log().Warn("web test: plot failed", "err", perr)
			}
		}
		t.mu.Lock()
		defer t.mu.Unlock()
		t.running, t.cancel = false, nil
		if err != nil {
			t.err = err.Error()
			s.log().Warn("web: bufferbloat test failed", "err", err)
			return
		}
		t.result, t.svg = res, svg.Bytes()
		s.log().Info("web: bufferbloat test done", "grade", res.Grade, "induced_ms", res.InducedMs)
	}()
	writeJSON(w, httpd.StatusAccepted, s.testState())
}

func (s *Server) testPlot(w httpd.ResponseWriter, r *httpd.Request, _ *session) {
	s.test.mu.Lock()
	svg := s.test.svg
	s.test.mu.Unlock()
	if len(svg) == 0 {
		jsonError(w, httpd.StatusNotFound, "no finished test")
		return
	}
	w.Header().Set("Content-Type", "image/svg+xml")
	w.Header().Set("Cache-Control", "no-store")
	// The plot is our own SVG, but keep it inert if opened directly.
	w.Header().Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'")
	w.Write(svg)
}

// LastResult is the last finished test run from the page (nil: none yet),
// for the daemon's /metrics.
func (s *Server) LastResult() *bloat.Result {
	s.test.mu.Lock()
	defer s.test.mu.Unlock()
	return s.test.result
}
