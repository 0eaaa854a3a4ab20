package web_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"sqm/internal/httpd/httpdtest"
	"sqm/internal/web"
)

// chromiumOrSkip is Debian's chromium, for the host's browser tests; they
// skip without it and with -short.
func chromiumOrSkip(t *testing.T) string {
	t.Helper()
	chrome, err := exec.LookPath("chromium")
	if err != nil {
		t.Skip("needs Debian's chromium (apt-get install chromium; scripts/setup.sh installs it)")
	}
	if testing.Short() {
		t.Skip("starts a browser; skipped with -short")
	}
	return chrome
}

// shotsDir is where a browser test's screenshots go: $SQM_WEB_ARTIFACTS,
// or a new sqm-web-shots-* directory under $TMPDIR. They are kept.
func shotsDir(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("SQM_WEB_ARTIFACTS")
	if dir == "" {
		var err error
		if dir, err = os.MkdirTemp("", "sqm-web-shots-"); err != nil {
			t.Fatal(err)
		}
	}
	must(t, os.MkdirAll(dir, 0o755))
	return dir
}

// newBrowser is a headless Chromium context at desktop size, ended with
// the test or after timeout. The browser starts with the first
// chromedp.Do on the context, which binds it there.
func newBrowser(t *testing.T, chrome string, timeout time.Duration, extra ...chromedp.ExecAllocatorOption) context.Context {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chrome), chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.WindowSize(1280, 900), chromedp.Flag("no-proxy-server", true))
	actx, cancelA := chromedp.NewExecAllocator(context.Background(), append(opts, extra...)...)
	ctx, cancelC := chromedp.NewContext(actx, chromedp.WithLogf(t.Logf))
	ctx, cancelT := context.WithTimeout(ctx, timeout)
	t.Cleanup(func() { cancelT(); cancelC(); cancelA() })
	return ctx
}

// page is a browser test's steps, each failing the test with a
// screenshot (and what log says, if set) when it does not work.
type page struct {
	t     *testing.T
	ctx   context.Context
	shots string
	log   func() string
}

func (p *page) fail(what string, err error) {
	p.t.Helper()
	shot(p.ctx, p.t, p.shots, "failed-"+strings.ReplaceAll(what, " ", "-"))
	if p.log != nil {
		p.t.Fatalf("%s: %v\n%s", what, err, p.log())
	}
	p.t.Fatalf("%s: %v", what, err)
}

func (p *page) do(what string, steps ...chromedp.Action[chromedp.Void]) {
	p.t.Helper()
	if err := chromedp.Do(p.ctx, steps...); err != nil {
		p.fail(what, err)
	}
}

// text looks the element up inside one JavaScript evaluation: the page
// rebuilds its status card every second, and a node chromedp found in
// one round trip may be gone by the next.
func (p *page) text(sel string) string {
	p.t.Helper()
	v, err := chromedp.Run(p.ctx, chromedp.Evaluate[string](fmt.Sprintf(`(e => e ? e.textContent : '<missing>')(document.querySelector(%q))`, sel)))
	if err != nil {
		p.fail("text of "+sel, err)
	}
	return strings.TrimSpace(v)
}

func (p *page) truth(expr string) bool {
	p.t.Helper()
	v, err := chromedp.Run(p.ctx, chromedp.Evaluate[bool](expr))
	if err != nil {
		p.fail(expr, err)
	}
	return v
}

func (p *page) waitTrue(what, expr string, d time.Duration) {
	p.t.Helper()
	if _, err := chromedp.Run(p.ctx, chromedp.Poll[bool](expr, chromedp.WithPollingTimeout(d))); err != nil {
		p.fail(what, err)
	}
}

// fakeDaemonPage serves srv (its ConfigPath set to a file holding config,
// its Users to the admin login alone) to a new headless browser, logs in
// as admin and waits until sel is visible. The server closes at the
// test's end.
func fakeDaemonPage(t *testing.T, chrome, config string, srv *web.Server, sel string) *page {
	t.Helper()
	srv.ConfigPath = filepath.Join(t.TempDir(), "sqm")
	must(t, os.WriteFile(srv.ConfigPath, []byte(config), 0o644))
	h, _ := web.HashPassword(adminPass)
	users, err := web.ParseUsers("users", []byte("admin "+h))
	must(t, err)
	srv.Users = users
	ts := httpdtest.NewServer(srv)
	t.Cleanup(ts.Close)
	p := &page{t: t, ctx: newBrowser(t, chrome, 2*time.Minute), shots: shotsDir(t)}
	p.do("log in", chromedp.Navigate(ts.URL+"/"), waitVisible("#login-form"),
		chromedp.SendKeys(chromedp.CSS("#password"), adminPass), chromedp.Click(chromedp.CSS("#login-form button")),
		waitVisible(sel))
	return p
}
