//go:build linux && !sqm_noweb && !sqm_notest

package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"sqm/internal/tune"
	"sqm/internal/web"
)

// pageTune runs the page's Tune hook on link with tuneConfig, as the
// daemon wires it: what the link was opened with, the steps and lines the
// page got, and how often the daemon was asked to reload.
type pageTune struct {
	opened   []tuneLinkOptions
	steps    []tune.Step
	lines    []string
	reapply  int
	heldSeen bool // the daemon's lock refused while the tune ran
	cfg      string
}

func runPageTune(t *testing.T, ctx context.Context, link *simTuneLink, req web.TuneRequest) (*tune.Result, *pageTune, error) {
	t.Helper()
	dir := t.TempDir()
	path := filepath.Join(dir, "sqm")
	if err := os.WriteFile(path, []byte(tuneConfig), 0o600); err != nil {
		t.Fatal(err)
	}
	pt := &pageTune{}
	var held atomic.Bool
	daemonLock := lockAroundTune(context.Background(), func() (func(), error) { return func() {}, nil }, &held)
	old := openTuneLink
	t.Cleanup(func() { openTuneLink = old })
	openTuneLink = func(env *Env, fs *flag.FlagSet, o tuneLinkOptions) (tuneLink, error) {
		pt.opened = append(pt.opened, o)
		if got := stateDir(env, fs); got != filepath.Join(dir, "run") {
			t.Errorf("the tune's state dir %s; want the daemon's", got)
		}
		if _, err := daemonLock(); errors.Is(err, errPageTune) {
			pt.heldSeen = true
		}
		return link, nil
	}
	req.Step = func(s tune.Step) { pt.steps = append(pt.steps, s) }
	req.Line = func(l string) { pt.lines = append(pt.lines, l) }
	env := &Env{Stdout: &bytes.Buffer{}, Stderr: &bytes.Buffer{}, Getenv: func(string) string { return "" }}
	hook := webTune(env, path, filepath.Join(dir, "run"), &held, func() error { pt.reapply++; return nil })
	res, err := hook(ctx, req)
	if held.Load() {
		t.Error("the lock is still marked held after the tune")
	}
	if _, err := daemonLock(); err != nil {
		t.Errorf("the daemon's lock after the tune: %v", err)
	}
	b, _ := os.ReadFile(path)
	pt.cfg = string(b)
	return res, pt, err
}

// TestWebTuneIsTheCommand: the page's tune is sqm tune: the same section,
// server, defaults and link, and on the same simulated line the same
// result as `sqm tune --json`; the old shaping is restored and nothing
// written (the page saves separately), the progress reaches the page, and
// the daemon is asked to reload after it.
func TestWebTuneIsTheCommand(t *testing.T) {
	link := seed004Link()
	res, pt, err := runPageTune(t, context.Background(), link, web.TuneRequest{Section: "wan", Server: "192.0.2.7", Profile: "balanced"})
	if err != nil {
		t.Fatal(err)
	}
	if len(pt.opened) != 1 {
		t.Fatalf("link opened %d times", len(pt.opened))
	}
	o := pt.opened[0]
	if o.q.Name != "wan" || o.q.Interface != "eth9" || o.bo.Addr != "192.0.2.7" || o.bo.Streams != 5 || o.point != 10*time.Second || o.idle != 10*time.Second {
		t.Errorf("link opened with %+v", o)
	}
	if link.restored != 1 || len(link.applied) != 0 || link.closed != 1 || pt.cfg != tuneConfig {
		t.Errorf("restored %d, applied %d, closed %d, config changed %v", link.restored, len(link.applied), link.closed, pt.cfg != tuneConfig)
	}
	if pt.reapply != 1 || !pt.heldSeen {
		t.Errorf("reapply %d, daemon lock refused during the tune %v; want 1, true", pt.reapply, pt.heldSeen)
	}
	if len(pt.steps) != len(res.Points)+1 || pt.steps[0].Phase != "idle" {
		t.Errorf("%d steps for %d points", len(pt.steps), len(res.Points))
	}
	joined := strings.Join(pt.lines, "\n")
	for _, want := range []string{"sweep", "chosen", "shaping of eth9 restored", "my_note"} {
		if !strings.Contains(joined, want) {
			t.Errorf("lines lack %q:\n%s", want, joined)
		}
	}

	// The command on the same line, from the same start.
	code, out, errs, _, _ := runTune(t, context.Background(), seed004Link(), "--json", "--section", "wan", "--profile", "balanced", "192.0.2.7")
	if code != 0 {
		t.Fatalf("sqm tune: exit %d: %s", code, errs)
	}
	var cmd tune.Result
	if err := json.Unmarshal([]byte(out), &cmd); err != nil {
		t.Fatal(err)
	}
	page, _ := json.Marshal(res)
	var pageRes tune.Result
	json.Unmarshal(page, &pageRes)
	if !reflect.DeepEqual(cmd, pageRes) {
		t.Errorf("the page's result differs from sqm tune's:\npage %d/%d, %d points\ncmd  %d/%d, %d points", pageRes.DownloadKbit, pageRes.UploadKbit, len(pageRes.Points), cmd.DownloadKbit, cmd.UploadKbit, len(cmd.Points))
	}
}

// TestWebTuneRequests: the page's choices become the command's flags, and
// what the command refuses the page gets as the error, before the link is
// opened.
func TestWebTuneRequests(t *testing.T) {
	for _, tc := range []struct {
		name string
		req  web.TuneRequest
		want string // error; "" ok
		lo   func(tuneLinkOptions) bool
	}{
		{"detect", web.TuneRequest{Section: "wan", Server: "192.0.2.7", Profile: "throughput", Detect: true}, "",
			func(o tuneLinkOptions) bool {
				return o.probe.Target.String() == "192.0.2.7" && o.probe.Repeat == 10 && len(o.probe.Sizes) > 0
			}},
		{"server with a port", web.TuneRequest{Section: "wan", Server: "192.0.2.7:9000", Profile: "gaming"}, "",
			func(o tuneLinkOptions) bool { return o.bo.Addr == "192.0.2.7:9000" && !o.probe.Target.IsValid() }},
		{"no such section", web.TuneRequest{Section: "lte", Server: "192.0.2.7", Profile: "balanced"}, `no queue section "lte"`, nil},
		{"unknown profile", web.TuneRequest{Section: "wan", Server: "192.0.2.7", Profile: "fast"}, `unknown profile "fast"`, nil},
		{"a server that looks like a flag", web.TuneRequest{Section: "wan", Server: "--write", Profile: "balanced"}, "", func(o tuneLinkOptions) bool { return o.bo.Addr == "--write" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			link := seed004Link()
			_, pt, err := runPageTune(t, context.Background(), link, tc.req)
			if tc.want != "" {
				if err == nil || !strings.Contains(err.Error(), tc.want) || len(pt.opened) != 0 {
					t.Errorf("error %v, link opened %d times; want %q before opening", err, len(pt.opened), tc.want)
				}
				return
			}
			if len(pt.opened) != 1 || !tc.lo(pt.opened[0]) {
				t.Errorf("link opened %d times with %+v", len(pt.opened), pt.opened)
			}
			if pt.cfg != tuneConfig {
				t.Errorf("the page's tune wrote the config:\n%s", pt.cfg)
			}
		})
	}
}

// TestWebTuneCancel: cancel mid-sweep (the page's Cancel, or the daemon
// stopping) restores the old shaping and still has the daemon reload.
func TestWebTuneCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	link := seed004Link()
	link.cancelAfter, link.cancel = 5, cancel
	_, pt, err := runPageTune(t, ctx, link, web.TuneRequest{Section: "wan", Server: "192.0.2.7", Profile: "balanced"})
	if !errors.Is(err, context.Canceled) {
		t.Errorf("error %v; want cancelled", err)
	}
	if link.restored != 1 || len(link.applied) != 0 || pt.cfg != tuneConfig || pt.reapply != 1 {
		t.Errorf("restored %d, applied %d, config changed %v, reapply %d", link.restored, len(link.applied), pt.cfg != tuneConfig, pt.reapply)
	}
}

// TestLockAroundTune: the daemon's operations are refused at once while a
// page tune holds the lock, and wait for the lock as usual when the daemon
// is stopping (its stop-on-exit must follow the tune's restore).
func TestLockAroundTune(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var held atomic.Bool
	calls := 0
	lock := lockAroundTune(ctx, func() (func(), error) { calls++; return func() {}, nil }, &held)
	for _, tc := range []struct {
		held, stopping bool
		refused        bool
	}{
		{false, false, false},
		{true, false, true},
		{false, false, false},
		{true, true, false},
	} {
		held.Store(tc.held)
		if tc.stopping {
			cancel()
		}
		before := calls
		_, err := lock()
		if refused := errors.Is(err, errPageTune); refused != tc.refused || (calls > before) == tc.refused {
			t.Errorf("held %v, stopping %v: err %v, lock taken %v", tc.held, tc.stopping, err, calls > before)
		}
	}
}
