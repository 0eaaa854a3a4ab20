package web_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"sqm/internal/httpd/httpdtest"
	"sqm/internal/tune"
	"sqm/internal/web"
)

const tunePageConfig = `# sqm config for the page's tune
config queue 'wan'
	option enabled '1'
	option interface 'wan0'   # the DSL modem
	option download '6089'    # guessed in 2014
	option upload '737'
	option script 'simple.qos'
	option qdisc 'pfifo'
	option linklayer 'atm'
	option overhead '44'
	option vendor_flag 'kept'

config queue 'lte'
	option enabled '0'
	option interface 'wwan0'
`

// slowLink is the simulated seed-004 line, a little slow per point so the
// page's progress can be watched.
type slowLink struct {
	*tune.SimLink
	delay time.Duration
}

func (l slowLink) Load(ctx context.Context, d tune.Dir) (tune.Measurement, error) {
	select {
	case <-time.After(l.delay):
	case <-ctx.Done():
		return tune.Measurement{}, ctx.Err()
	}
	return l.SimLink.Load(ctx, d)
}

// TestBrowserTune drives headless Chromium through a tune from the page:
// start it, watch its progress, read the result table and the trade-off
// plot, save the rates and see the config file change with its comments
// kept and the change applied; a read-only login can look but not start
// or save. The Tune hook is a fake that tunes the simulated seed-004
// ADSL line (a real tune takes minutes; the cli tests show the hook the
// daemon installs is sqm tune itself), so this needs no root.
func TestBrowserTune(t *testing.T) {
	chrome := chromiumOrSkip(t)
	dir := t.TempDir()
	shots := shotsDir(t)
	t.Logf("screenshots in %s", shots)

	cfg := filepath.Join(dir, "sqm")
	must(t, os.WriteFile(cfg, []byte(tunePageConfig), 0o644))
	ah, _ := web.HashPassword(adminPass)
	rh, _ := web.HashPassword(readPass)
	users, err := web.ParseUsers("users", []byte("admin "+ah+"\nread "+rh+"\n"))
	must(t, err)

	var mu sync.Mutex
	var reqs []web.TuneRequest
	applies := 0
	srv := &web.Server{
		ConfigPath: cfg, Users: users, TestServer: "192.0.2.7",
		Status: func(context.Context) (any, error) {
			return map[string]any{"devices": []any{}, "last": map[string]string{"wan0": `applied (section "wan")`}}, nil
		},
		Apply: func(context.Context) ([]string, error) {
			mu.Lock()
			defer mu.Unlock()
			applies++
			return []string{`wan0: applied (section "wan")`}, nil
		},
		Tune: func(ctx context.Context, req web.TuneRequest) (*tune.Result, error) {
			mu.Lock()
			reqs = append(reqs, req)
			mu.Unlock()
			sim := &tune.SimLink{DownKbit: 7616, UpKbit: 864, ATM: true, Overhead: 44, ShaperATM: true, ShaperOverhead: 44,
				BufferPkts: 300, BaseMs: 29, JitterMs: 0.5, Seed: 4}
			l := slowLink{sim, 120 * time.Millisecond}
			return tune.Run(ctx, l, tune.Options{Profile: req.Profile, Linklayer: "atm", Overhead: 44, Now: sim.Now, OnStep: req.Step, Progress: req.Line})
		},
	}
	ts := httpdtest.NewServer(srv)
	defer ts.Close()

	ctx := newBrowser(t, chrome, 2*time.Minute)
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	pg := &page{t: t, ctx: ctx, shots: shots}
	fail, do, text, truth, waitTrue := pg.fail, pg.do, pg.text, pg.truth, pg.waitTrue
	login := func(pw string) {
		t.Helper()
		do("log in",
			chromedp.Navigate(ts.URL+"/"),
			waitVisible("#login-form"),
			chromedp.SendKeys(chromedp.CSS("#password"), pw),
			chromedp.Click(chromedp.CSS("#login-form button")),
			waitVisible("#tune-form"))
	}

	login(adminPass)
	waitTrue("the sections are offered", `document.querySelectorAll('#u-section option').length === 2 && document.getElementById('u-section').value === 'wan'`, 10*time.Second)
	if !truth(`document.getElementById('u-server').value === '192.0.2.7'`) {
		t.Error("the server field does not default to the daemon's test server")
	}
	if truth(`document.getElementById('nav-tune').hidden`) {
		t.Error("no Tune link in the navigation")
	}
	do("start a tune",
		jsDo(`(() => { const p = document.getElementById('u-profile'); p.value = 'throughput'; p.dispatchEvent(new Event('change')); return true; })()`),
		chromedp.Click(chromedp.CSS("#u-start")),
		waitVisible("#u-progress"))
	waitTrue("progress shows a point", `/point \d+ of about \d+/.test(document.getElementById('u-live').textContent)`, 20*time.Second)
	live := text("#u-live")
	t.Logf("progress: %s", live)
	if !strings.Contains(live, "of 5:00") || !truth(`document.getElementById('u-start').disabled && !document.getElementById('u-cancel').hidden`) {
		t.Errorf("while running: live %q, start not disabled or cancel hidden", live)
	}
	waitTrue("the bar moves", `parseFloat(document.getElementById('u-bar').style.width) > 0`, 10*time.Second)
	shot(ctx, t, shots, "tune-running-desktop")

	waitTrue("the result", `!document.getElementById('u-result').hidden`, 60*time.Second)
	waitTrue("the plot loads", `document.getElementById('u-plot').complete && document.getElementById('u-plot').naturalWidth > 0`, 10*time.Second)
	mu.Lock()
	req := reqs[0]
	mu.Unlock()
	if req.Section != "wan" || req.Server != "192.0.2.7" || req.Profile != "throughput" || req.Detect {
		t.Errorf("tune asked for %+v", req)
	}
	rows, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll('#u-tables tr.chosen')].map(r => r.dataset.dir + ' ' + r.cells[0].textContent)`))
	if err != nil {
		fail("chosen rows", err)
	}
	n, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll('#u-tables tbody tr').length`))
	if err != nil {
		fail("table rows", err)
	}
	summary := text("#u-summary")
	t.Logf("%d rows; chosen %v; summary %s", n, rows, summary)
	if n < 15 || len(rows) < 3 {
		t.Errorf("result table: %d rows, chosen rows %v; want every point and the chosen rate per direction and pair", n, rows)
	}
	var down, up int
	if _, err := fmt.Sscanf(summary[strings.Index(summary, "Chosen download")+len("Chosen download"):], "%d kbit/s", &down); err != nil {
		t.Fatalf("summary %q: %v", summary, err)
	}
	if i := strings.Index(summary, "Chosen upload"); i >= 0 {
		fmt.Sscanf(summary[i+len("Chosen upload"):], "%d kbit/s", &up)
	}
	if down < 6000 || down > 7616 || up < 600 || up > 864 {
		t.Errorf("chosen %d/%d kbit/s", down, up)
	}
	shot(ctx, t, shots, "tune-result-desktop")

	do("save the rates", chromedp.Click(chromedp.CSS("#u-save")))
	waitTrue("saved", `document.getElementById('u-saved').textContent.startsWith('saved')`, 10*time.Second)
	if s := text("#u-saved"); !strings.Contains(s, fmt.Sprintf("saved %d/%d kbit/s in section wan", down, up)) || !strings.Contains(s, "applied") {
		t.Errorf("saved message %q", s)
	}
	want := strings.NewReplacer("'6089'", fmt.Sprintf("'%d'", down), "'737'", fmt.Sprintf("'%d'", up)).Replace(tunePageConfig)
	if b, _ := os.ReadFile(cfg); string(b) != want {
		t.Errorf("config after save:\n%s\nwant:\n%s", b, want)
	}
	mu.Lock()
	if applies != 1 {
		t.Errorf("applied %d times; want 1", applies)
	}
	mu.Unlock()
	waitTrue("the form shows the saved rate", fmt.Sprintf(`document.querySelector('form[data-section="wan"] [data-opt="download"]').value === '%d'`, down), 10*time.Second)
	if e := text("#u-save-err"); e != "" {
		t.Errorf("save error shown: %q", e)
	}

	do("phone size", chromedp.EmulateViewport(390, 844, chromedp.EmulateScale(2), chromedp.EmulateMobile))
	time.Sleep(time.Second)
	do("scroll to the tune", jsDo(`document.getElementById('tune').scrollIntoView(), true`))
	screen(ctx, t, shots, "phone-tune")
	do("scroll to the table", jsDo(`document.getElementById('u-tables').scrollIntoView(), true`))
	screen(ctx, t, shots, "phone-tune-table")
	if truth(`document.documentElement.scrollWidth > window.innerWidth + 1`) {
		t.Error("the page is wider than a 390 px phone screen")
	}
	do("desktop again", chromedp.EmulateReset())

	// Read-only: sees the result, cannot start or save.
	do("log out", chromedp.Click(chromedp.CSS("#logout")), waitVisible("#login-form"))
	do("read-only login",
		chromedp.SendKeys(chromedp.CSS("#password"), readPass),
		chromedp.Click(chromedp.CSS("#login-form button")),
		waitVisible("#u-result"))
	if !truth(`document.getElementById('u-start').disabled && document.getElementById('u-save').disabled`) {
		t.Error("a read-only login can start a tune or save")
	}
	shot(ctx, t, shots, "tune-read-only-desktop")
}
