package web

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"sqm/internal/httpd"
	"sqm/internal/plot"
	"sqm/internal/tune"
)

// TuneRequest is a tune the page asks for: `sqm tune --section Section
// --profile Profile [--detect] Server`. Step and Line report its progress;
// the hook calls them from its own goroutine.
type TuneRequest struct {
	Section string // name, or @queue[N]
	Server  string // the 'sqm server', host[:port]
	Profile string // gaming, balanced or throughput
	Detect  bool   // find the link layer first, and shape with it
	Step    func(tune.Step)
	Line    func(string)
}

// tuneRunner holds the one tune the page may run and its result, which
// "Save these rates" writes.
type tuneRunner struct {
	mu      sync.Mutex
	running bool
	started time.Time
	req     TuneRequest // without the callbacks
	step    *tune.Step
	lines   []string // the last progress lines, as sqm tune prints them
	result  *tune.Result
	svg     []byte
	err     string
	saved   string
	cancel  context.CancelFunc
}

// tuneLines is how many progress lines the page shows.
const tuneLines = 6

type tuneState struct {
	// Available is false when this sqm has no tuner (the hook is nil): the
	// page then leaves the card out.
	Available bool       `json:"available"`
	Running   bool       `json:"running"`
	Section   string     `json:"section,omitempty"`
	Server    string     `json:"server,omitempty"`
	Default   string     `json:"default_server,omitempty"`
	Profile   string     `json:"profile,omitempty"`
	Detect    bool       `json:"detect"`
	Started   *time.Time `json:"started,omitempty"`
	Phase     string     `json:"phase,omitempty"`
	Dir       string     `json:"dir,omitempty"`
	DownKbit  int        `json:"down_kbit"`
	UpKbit    int        `json:"up_kbit"`
	Done      int        `json:"done"`
	Expected  int        `json:"expected"`
	Elapsed   float64    `json:"elapsed_s"`
	Budget    float64    `json:"budget_s"` // 0: none
	Lines     []string   `json:"lines,omitempty"`
	Error     string     `json:"error,omitempty"`
	Result    *tuneReply `json:"result,omitempty"`
	Saved     string     `json:"saved,omitempty"`
}

// tuneReply is the result as the page shows it: the choice, and every
// point with its verdict for the table (the curve comes as the plot).
type tuneReply struct {
	DownloadKbit    int         `json:"download_kbit"`
	UploadKbit      int         `json:"upload_kbit"`
	AloneDownKbit   int         `json:"alone_down_kbit"`
	AloneUpKbit     int         `json:"alone_up_kbit"`
	Linklayer       string      `json:"linklayer"`
	Overhead        int         `json:"overhead"`
	LinklayerSource string      `json:"linklayer_source"`
	TargetMs        float64     `json:"target_ms"`
	Profile         string      `json:"profile,omitempty"`
	Seconds         float64     `json:"seconds"`
	IdleMedianMs    float64     `json:"idle_median_ms"`
	CapDownKbit     float64     `json:"capacity_down_kbit"`
	CapUpKbit       float64     `json:"capacity_up_kbit"`
	Points          []tunePoint `json:"points"`
	Notes           []string    `json:"notes,omitempty"`
}

type tunePoint struct {
	Role           string  `json:"role"`
	Dir            string  `json:"dir"`
	DownKbit       int     `json:"down_kbit"`
	UpKbit         int     `json:"up_kbit"`
	GoodDownKbit   float64 `json:"goodput_down_kbit"`
	GoodUpKbit     float64 `json:"goodput_up_kbit"`
	InducedMs      float64 `json:"induced_ms"`
	StartInducedMs float64 `json:"start_induced_ms"`
	P90Ms          float64 `json:"p90_ms"`
	Grade          string  `json:"grade"`
	Pass           bool    `json:"pass"`
	Stale          bool    `json:"stale,omitempty"`
	Chosen         bool    `json:"chosen,omitempty"`
}

func tuneSummary(r *tune.Result) *tuneReply {
	out := &tuneReply{DownloadKbit: r.DownloadKbit, UploadKbit: r.UploadKbit, AloneDownKbit: r.AloneDownKbit, AloneUpKbit: r.AloneUpKbit,
		Linklayer: r.Linklayer, Overhead: r.Overhead, LinklayerSource: r.LinklayerSource, TargetMs: r.TargetMs, Profile: r.Profile,
		Seconds: r.Seconds, IdleMedianMs: r.Idle.MedianMs, CapDownKbit: r.CapacityDownKbit, CapUpKbit: r.CapacityUpKbit,
		Points: []tunePoint{}, Notes: r.Notes}
	for _, p := range r.Points {
		out.Points = append(out.Points, tunePoint{Role: p.Role, Dir: string(p.Dir), DownKbit: p.DownKbit, UpKbit: p.UpKbit,
			GoodDownKbit: p.GoodputDownKbit, GoodUpKbit: p.GoodputUpKbit, InducedMs: p.InducedMs, StartInducedMs: p.StartInducedMs,
			P90Ms: p.Latency.P90Ms, Grade: p.Grade, Pass: p.Pass, Stale: p.Stale, Chosen: r.Chosen(p)})
	}
	return out
}

func (s *Server) tuneState() tuneState {
	t := &s.tune
	t.mu.Lock()
	defer t.mu.Unlock()
	st := tuneState{Available: s.Tune != nil, Running: t.running, Section: t.req.Section, Server: t.req.Server, Default: s.TestServer,
		Profile: t.req.Profile, Detect: t.req.Detect, Lines: t.lines, Error: t.err, Saved: t.saved}
	if !t.started.IsZero() {
		at := t.started.UTC()
		st.Started = &at
		if t.running {
			st.Elapsed = time.Since(t.started).Seconds()
		}
	}
	if p := t.step; p != nil {
		st.Phase, st.Dir, st.DownKbit, st.UpKbit, st.Done, st.Expected = p.Phase, string(p.Dir), p.DownKbit, p.UpKbit, p.Done, p.Expected
		if p.Budget > 0 {
			st.Budget = p.Budget.Seconds()
		}
	}
	if r := t.result; r != nil {
		st.Result = tuneSummary(r)
		st.Elapsed = r.Seconds
	}
	return st
}

func (s *Server) getTune(w httpd.ResponseWriter, r *httpd.Request, _ *session) {
	writeJSON(w, httpd.StatusOK, s.tuneState())
}

var errNoTuner = errors.New("this sqm has no tuner (built without it, or the daemon does not offer it)")

// postTune starts a tune, or cancels the running one. The tune changes the
// section's shaping as it measures and puts the old one back at the end,
// on an error and on cancel (the hook's job, as for sqm tune); nothing is
// written until "Save these rates" (postTuneSave).
func (s *Server) postTune(w httpd.ResponseWriter, r *httpd.Request, _ *session) {
	var req struct {
		Section string `json:"section"`
		Server  string `json:"server"`
		Profile string `json:"profile"`
		Detect  bool   `json:"detect"`
		Cancel  bool   `json:"cancel"`
	}
	if !readJSON(w, r, &req) {
		return
	}
	t := &s.tune
	if req.Cancel {
		t.mu.Lock()
		if t.cancel != nil {
			t.cancel()
		}
		t.mu.Unlock()
		writeJSON(w, httpd.StatusOK, s.tuneState())
		return
	}
	if s.Tune == nil {
		jsonError(w, httpd.StatusNotImplemented, errNoTuner.Error())
		return
	}
	if req.Server == "" {
		req.Server = s.TestServer
	}
	if req.Server == "" {
		jsonError(w, httpd.StatusBadRequest, "no test server: give one (host or host:port of an 'sqm server')")
		return
	}
	if req.Section == "" {
		jsonError(w, httpd.StatusBadRequest, "name the queue section to tune")
		return
	}
	if req.Profile == "" {
		req.Profile = tune.DefaultProfile
	}
	if _, ok := tune.Profiles[req.Profile]; !ok {
		jsonError(w, httpd.StatusBadRequest, "profile "+req.Profile+": use gaming, balanced or throughput")
		return
	}
	if err := s.claim("tune"); err != nil {
		jsonError(w, httpd.StatusConflict, err.Error())
		return
	}
	ctx, cancel := context.WithCancel(s.base())
	tr := TuneRequest{Section: req.Section, Server: req.Server, Profile: req.Profile, Detect: req.Detect}
	t.mu.Lock()
	t.running, t.started, t.req = true, time.Now(), tr
	t.step, t.lines, t.result, t.svg, t.err, t.saved, t.cancel = nil, nil, nil, nil, "", "", cancel
	t.mu.Unlock()
	tr.Step = func(st tune.Step) {
		t.mu.Lock()
		t.step = &st
		t.mu.Unlock()
	}
	tr.Line = func(l string) {
		t.mu.Lock()
		t.lines = append(t.lines, l)
		if n := len(t.lines); n > tuneLines {
			t.lines = append([]string(nil), t.lines[n-tuneLines:]...)
		}
		t.mu.Unlock()
	}
	s.log().Info("web: tune started", "section", req.Section, "server", req.Server, "profile", req.Profile, "detect", req.Detect)
	go func() {
		// The link is released last, once the outcome is recorded: a
		// test started right after sees the tune finished.
		defer s.release()
		defer cancel()
		res, err := s.Tune(ctx, tr)
		var svg bytes.Buffer
		if err == nil {
			title := fmt.Sprintf("sqm tune | section %s | %s %+d", req.Section, res.Linklayer, res.Overhead)
			if perr := plot.WriteTradeoff(&svg, "tune.svg", tune.Tradeoff(res, title)); perr != nil {
				s.log().Warn("web tune: plot failed", "err", perr)
			}
		}
		t.mu.Lock()
		defer t.mu.Unlock()
		t.running, t.cancel = false, nil
		if err != nil {
			t.err = err.Error()
			if ctx.Err() != nil {
				t.err = "cancelled (" + t.err + "); the shaping from before is back unless this says otherwise"
			}
			s.log().Warn("web: tune failed", "err", err)
			return
		}
		t.result, t.svg = res, svg.Bytes()
		s.log().Info("web: tune done", "section", req.Section, "download_kbit", res.DownloadKbit, "upload_kbit", res.UploadKbit)
	}()
	writeJSON(w, httpd.StatusAccepted, s.tuneState())
}

func (s *Server) tunePlot(w httpd.ResponseWriter, r *httpd.Request, _ *session) {
	s.tune.mu.Lock()
	svg := s.tune.svg
	s.tune.mu.Unlock()
	if len(svg) == 0 {
		jsonError(w, httpd.StatusNotFound, "no finished tune")
		return
	}
	w.Header().Set("Content-Type", "image/svg+xml")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'")
	w.Write(svg)
}

// postTuneSave writes the finished tune's rates (and the framing, if it
// detected it) into its section with tune.Result.WriteConfig, the writer
// of `sqm tune --write`: only those option lines change, comments, order
// and unknown options stay. Then it is checked and applied as a form
// change is, and rolled back the same way if the kernel refuses it.
func (s *Server) postTuneSave(w httpd.ResponseWriter, r *httpd.Request, _ *session) {
	var req struct{}
	if !readJSON(w, r, &req) {
		return
	}
	t := &s.tune
	t.mu.Lock()
	res, section, running := t.result, t.req.Section, t.running
	t.mu.Unlock()
	if running || res == nil {
		jsonError(w, httpd.StatusConflict, "no finished tune to save")
		return
	}
	s.cfgMu.Lock()
	defer s.cfgMu.Unlock()
	old, err := os.ReadFile(s.ConfigPath)
	if err != nil {
		jsonError(w, httpd.StatusInternalServerError, err.Error())
		return
	}
	nu, err := res.WriteConfig(s.ConfigPath, old, section)
	if err != nil {
		writeJSON(w, httpd.StatusBadRequest, saveReply{Errors: []fieldError{{Section: section, Message: err.Error()}}})
		return
	}
	what := fmt.Sprintf("tune: section %s download %d upload %d kbit/s", section, res.DownloadKbit, res.UploadKbit)
	code, rep := s.commit(r.Context(), section, old, nu, what)
	if rep.OK {
		msg := fmt.Sprintf("saved %d/%d kbit/s in section %s", res.DownloadKbit, res.UploadKbit, section)
		if len(rep.Outcomes) > 0 {
			msg += ": " + rep.Outcomes[0]
			for _, o := range rep.Outcomes[1:] {
				msg += "; " + o
			}
		}
		t.mu.Lock()
		if t.result == res {
			t.saved = msg
		}
		t.mu.Unlock()
	}
	writeJSON(w, code, rep)
}

// claim reserves the link for what ("test" or "tune"): both load it (and
// a tune changes its shaping), so each would spoil the other's numbers.
func (s *Server) claim(what string) error {
	s.busyMu.Lock()
	defer s.busyMu.Unlock()
	switch s.busy {
	case "":
		s.busy = what
		return nil
	case "tune":
		return errTuneBusy
	}
	return errBusy
}

func (s *Server) release() {
	s.busyMu.Lock()
	s.busy = ""
	s.busyMu.Unlock()
}

func (s *Server) tuning() bool {
	s.busyMu.Lock()
	defer s.busyMu.Unlock()
	return s.busy == "tune"
}

var errTuneBusy = errors.New("a tune is running (it changes the shaping as it measures); wait for it or cancel it")
