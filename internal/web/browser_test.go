package web_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"sqm/internal/netns"
	"sqm/internal/testutil"
	"sqm/internal/web"
)

// The config the page edits: comments and an option sqm does not know
// must survive every change the page makes.
const browserConfig = `# sqm config for the browser test
config queue 'wan'
	option enabled '1'
	# the router's WAN port
	option interface 'wan0'
	option download '20000'   # kbit/s
	option upload '5000'
	option script 'simple.qos'
	option qdisc 'pfifo'      # this kernel has no fq_codel
	option vendor_flag 'kept'
`

const (
	webPort   = "8480"
	adminPass = "browser-test-password"
	readPass  = "browser-read-password"
)

// TestBrowser drives headless Chromium against `sqm daemon --http`
// shaping a veth link between two namespaces with the simple recipe (htb;
// this kernel lacks cake and fq_codel, so per-tin cake tables are covered
// by the unit tests' JSON, not here). The browser runs in the host
// namespace and reaches the daemon's loopback listener through a proxy
// whose upstream sockets are opened inside the router namespace.
//
// Screenshots go to $SQM_WEB_ARTIFACTS, or to a directory under $TMPDIR
// named in the log; they are kept after the test.
func TestBrowser(t *testing.T) {
	testutil.RequireRoot(t)
	chrome := chromiumOrSkip(t)
	dir := t.TempDir()
	bin := buildSQM(t, dir)
	shots := shotsDir(t)
	t.Logf("screenshots in %s", shots)

	router := netns.NewT(t, "webr")
	isp := netns.NewT(t, "webi")
	must(t, router.Veth("wan0", isp, "isp0"))
	must(t, router.AddAddr("wan0", "10.77.0.1/24"))
	must(t, isp.AddAddr("isp0", "10.77.0.2/24"))
	must(t, router.Up("lo", "wan0"))
	must(t, isp.Up("lo", "isp0"))

	cfg := filepath.Join(dir, "sqm")
	must(t, os.WriteFile(cfg, []byte(browserConfig), 0o644))
	ah, _ := web.HashPassword(adminPass)
	rh, _ := web.HashPassword(readPass)
	users := filepath.Join(dir, "web-users")
	must(t, os.WriteFile(users, []byte("admin "+ah+"\nread "+rh+"\n"), 0o600))

	server := exec.Command(bin, "server", "--listen", "10.77.0.2:12866")
	var serverLog bytes.Buffer
	server.Stdout, server.Stderr = &serverLog, &serverLog
	must(t, isp.Start(server))
	t.Cleanup(func() { server.Process.Kill(); server.Wait() })

	daemon := exec.Command(bin, "daemon", "--config", cfg, "--state-dir", filepath.Join(dir, "run"),
		"--http", webPort, "--http-users", users, "--test-server", "10.77.0.2", "--stop-on-exit")
	daemonLog := startDaemon(t, router, daemon, 10*time.Second, func() string { return "server log:\n" + serverLog.String() })

	base := proxy(t, router, "127.0.0.1:"+webPort)
	waitHTTP(t, base+"/", daemonLog)
	tc := func(args ...string) string {
		out, err := router.Output(exec.Command("tc", args...))
		if err != nil {
			t.Fatalf("tc %v: %v", args, err)
		}
		return string(out)
	}
	ingress := func() string { return tc("class", "show", "dev", "ifb4wan0") }
	waitFor(t, "the daemon shapes wan0", func() bool {
		out, err := router.Output(exec.Command("tc", "class", "show", "dev", "ifb4wan0"))
		return err == nil && strings.Contains(string(out), "rate 20Mbit")
	})

	// Refused without a session, and changes refused without the token.
	anon := &http.Client{}
	if code := get(t, anon, base+"/api/status"); code != http.StatusUnauthorized {
		t.Errorf("GET /api/status without login: %d; want 401", code)
	}
	if code := post(t, anon, base+"/api/config", `{"section":"wan","set":{"download":"1000"}}`, ""); code != http.StatusUnauthorized {
		t.Errorf("change without login: %d; want 401", code)
	}

	ctx := newBrowser(t, chrome, 3*time.Minute)
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("start chromium: %v", err)
	}

	pg := &page{t: t, ctx: ctx, shots: shots, log: func() string { return "daemon log:\n" + daemonLog.String() }}
	fail, do, text, truth, waitTrue := pg.fail, pg.do, pg.text, pg.truth, pg.waitTrue
	// setv sets a field as a user would leave it: value, then input and
	// change events (the form listens for change on selects).
	setv := func(sel, v string) chromedp.Action[chromedp.Void] {
		js := fmt.Sprintf(`(() => { const e = document.querySelector(%q); e.value = %q; e.dispatchEvent(new Event('input', {bubbles: true})); e.dispatchEvent(new Event('change', {bubbles: true})); return e.value === %q; })()`, sel, v, v)
		return func(ctx context.Context, tg *chromedp.Target) (chromedp.Void, error) {
			ok, err := chromedp.Evaluate[bool](js)(ctx, tg)
			if err == nil && !ok {
				err = fmt.Errorf("%s did not take the value %q", sel, v)
			}
			return chromedp.Void{}, err
		}
	}
	visible := func(sel string) chromedp.Action[chromedp.Void] { return waitVisible(sel) }

	// Log in with a wrong password, then the right one.
	do("wrong password",
		chromedp.Navigate(base+"/"),
		visible("#login-form"),
		chromedp.SendKeys(chromedp.CSS("#password"), "not-the-password"),
		chromedp.Click(chromedp.CSS("#login-form button")),
		visible("#login-err"))
	if e := text("#login-err"); !strings.Contains(e, "wrong password") {
		t.Errorf("login error shown: %q", e)
	}
	card := `.queue[data-device="wan0"]`
	do("log in",
		setv("#password", ""),
		chromedp.SendKeys(chromedp.CSS("#password"), adminPass),
		chromedp.Click(chromedp.CSS("#login-form button")),
		visible(card+` .pill[data-state="working"]`))
	pill, facts := text(card+" .pill"), text(card+" .facts")
	if pill != "Shaping is working" || !strings.Contains(facts, "simple/pfifo") || !strings.Contains(facts, "20.0 Mbit/s") {
		t.Errorf("queue card: %q / %q", pill, facts)
	}

	// The page's session cookie, without the CSRF token, changes nothing.
	ck, err := chromedp.Call(ctx, network.GetCookies, network.GetCookiesParams{})
	if err != nil {
		t.Fatal(err)
	}
	var session string
	for _, c := range ck.Cookies {
		if c.Name == "sqm_session" {
			session = c.Value
			if !c.HTTPOnly || c.SameSite != network.CookieSameSiteStrict {
				t.Errorf("session cookie: HttpOnly %v, SameSite %q", c.HTTPOnly, c.SameSite)
			}
		}
	}
	if session == "" {
		t.Fatal("no sqm_session cookie after login")
	}
	if code := post(t, anon, base+"/api/config", `{"section":"wan","set":{"download":"1000"}}`, "sqm_session="+session); code != http.StatusForbidden {
		t.Errorf("change with the session but no CSRF token: %d; want 403", code)
	}
	if code := get(t, anon, base+"/api/status", "sqm_session="+session); code != http.StatusOK {
		t.Errorf("GET status with the session cookie: %d", code)
	}

	// An invalid overhead: an inline error, nothing written or applied.
	form := `form[data-section="wan"]`
	do("invalid overhead",
		visible(form+` [data-opt="overhead"]`),
		setv(form+` [data-opt="overhead"]`, "abc"),
		chromedp.Click(chromedp.CSS(form+` button[type="submit"]`)),
		visible(form+` [data-err="overhead"]:not(:empty)`))
	if e := text(form + ` [data-err="overhead"]`); !strings.Contains(e, "abc") {
		t.Errorf("overhead error: %q", e)
	}
	shot(ctx, t, shots, "invalid-overhead-desktop")
	if b, _ := os.ReadFile(cfg); string(b) != browserConfig {
		t.Errorf("an invalid overhead changed the file:\n%s", b)
	}
	if !strings.Contains(ingress(), "rate 20Mbit") {
		t.Errorf("an invalid overhead changed the kernel:\n%s", ingress())
	}

	// A new download rate: the file keeps its comments, the kernel has it.
	do("change the download rate",
		chromedp.Click(chromedp.CSS(form+` button.secondary`)), // undo the bad overhead
		chromedp.WaitNotPresent(chromedp.CSS(`[data-err="overhead"]:not(:empty)`)),
		setv(form+` [data-opt="download"]`, "30000"),
		chromedp.Click(chromedp.CSS(form+` button[type="submit"]`)),
		visible(form+` .ok-msg`))
	if saved := text(form + " .ok-msg"); !strings.Contains(saved, "Saved and applied") {
		t.Errorf("save status: %q", saved)
	}
	want := strings.Replace(browserConfig, "'20000'", "'30000'", 1)
	if b, _ := os.ReadFile(cfg); string(b) != want {
		t.Errorf("config after the change:\n%s\nwant:\n%s", b, want)
	}
	if out := ingress(); !strings.Contains(out, "rate 30Mbit") {
		t.Errorf("kernel after the change:\n%s", out)
	}
	// A change the kernel refuses (cake: this kernel has none; the form
	// lists only what the kernel offers, so the choice is injected as a
	// stale list would offer it): the error is shown, the old file is put
	// back and the old tree stays.
	do("a change the kernel refuses",
		jsDo(`(() => { const s = document.querySelector('form[data-section="wan"] [data-opt="qdisc"]'); s.append(new Option('cake', 'cake')); return true; })()`),
		setv(form+` [data-opt="qdisc"]`, "cake"),
		chromedp.Click(chromedp.CSS(form+` button[type="submit"]`)),
		visible(form+` [data-form-err]`))
	if e := text(form + " [data-form-err]"); !strings.Contains(e, "not applied") || !strings.Contains(e, "previous settings were restored") {
		t.Errorf("refused change: %q", e)
	}
	shot(ctx, t, shots, "refused-change-desktop")
	if b, _ := os.ReadFile(cfg); string(b) != want {
		t.Errorf("config after the refused change:\n%s\nwant:\n%s", b, want)
	}
	if out := ingress(); !strings.Contains(out, "rate 30Mbit") {
		t.Errorf("kernel after the refused change:\n%s", out)
	}
	do("undo", chromedp.Click(chromedp.CSS(form+` button.secondary`)), chromedp.WaitNotPresent(chromedp.CSS(form+` [data-form-err]:not(:empty)`)))

	waitTrue("the card shows the new rate", `document.querySelector('.queue[data-device="wan0"] .facts').textContent.includes('30.0 Mbit/s')`, 10*time.Second)
	shot(ctx, t, shots, "status-desktop")

	// A test from the page: phases, counters moving, the grade.
	packets := func() string { return text(card + ` [data-live="packets"]`) }
	before := packets()
	do("start a test",
		setv("#t-mode", "speedtest"),
		setv("#t-duration", "3"),
		chromedp.Click(chromedp.CSS("#t-start")),
		visible("#t-phases li.now"))
	var phases []string
	seen := map[string]bool{}
	moved := false
	deadline := time.Now().Add(90 * time.Second)
	for {
		now, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll('#t-phases li.now')].map(e => e.dataset.phase)`))
		if err != nil {
			fail("read the phases", err)
		}
		for _, p := range now {
			if !seen[p] {
				seen[p] = true
				phases = append(phases, p)
			}
		}
		if !moved && packets() != before {
			moved = true
		}
		if truth(`!document.getElementById('t-result').hidden`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no grade within 90 s (phases %v, error %q)", phases, text("#t-err"))
		}
		time.Sleep(300 * time.Millisecond)
	}
	grade := text("#t-grade")
	t.Logf("grade %s; phases seen running: %v", grade, phases)
	if !strings.Contains(" A+ A B C D F ", " "+grade+" ") {
		t.Errorf("grade %q", grade)
	}
	if !seen["download"] || !seen["upload"] {
		t.Errorf("phases shown while running: %v; want download and upload", phases)
	}
	if !moved {
		t.Errorf("the packet counter stayed at %s while the test ran", before)
	}
	// /metrics (no login, like node_exporter) has the shaped queue and
	// the page's test.
	res, err := anon.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	prom, _ := io.ReadAll(res.Body)
	res.Body.Close()
	for _, want := range []string{`sqm_queue_dropped_packets_total{`, `interface="wan0"`, `sqm_test_info{`, `grade="` + grade + `"`} {
		if !strings.Contains(string(prom), want) {
			t.Errorf("/metrics lacks %s:\n%s", want, prom)
		}
	}
	waitTrue("the plot loads", `document.getElementById('t-plot').complete && document.getElementById('t-plot').naturalWidth > 0`, 10*time.Second)
	shot(ctx, t, shots, "after-test-desktop")
	do("phone size", chromedp.EmulateViewport(390, 844, chromedp.EmulateScale(2), chromedp.EmulateMobile))
	time.Sleep(1500 * time.Millisecond) // two status polls at the new width
	shot(ctx, t, shots, "phone-full")
	for _, part := range []string{"status", "settings", "test"} {
		do("scroll to "+part, jsDo(`document.getElementById('`+part+`').scrollIntoView(), true`))
		screen(ctx, t, shots, "phone-"+part)
	}
	if truth(`document.documentElement.scrollWidth > window.innerWidth + 1`) {
		t.Error("the page is wider than a 390 px phone screen")
	}

	// Read-only: sees the page, cannot save.
	do("log out", chromedp.EmulateReset(), chromedp.Click(chromedp.CSS("#logout")), visible("#login-form"))
	do("read-only login",
		chromedp.SendKeys(chromedp.CSS("#password"), readPass),
		chromedp.Click(chromedp.CSS("#login-form button")),
		visible(card), visible(form))
	if !truth(`document.querySelector('form[data-section="wan"] button[type=submit]').disabled`) {
		t.Error("read-only login can press save")
	}
}

// waitVisible waits until an element matching sel is rendered.
func waitVisible(sel string) chromedp.Action[chromedp.Void] {
	return waitVisibleFor(sel, 30*time.Second)
}

// waitVisibleFor waits at most d until an element matching sel is rendered.
func waitVisibleFor(sel string, d time.Duration) chromedp.Action[chromedp.Void] {
	js := fmt.Sprintf(`[...document.querySelectorAll(%q)].some(e => e.getClientRects().length > 0 && getComputedStyle(e).visibility !== 'hidden')`, sel)
	return func(ctx context.Context, tg *chromedp.Target) (chromedp.Void, error) {
		_, err := chromedp.Poll[bool](js, chromedp.WithPollingTimeout(d))(ctx, tg)
		if err != nil {
			err = fmt.Errorf("waiting for %s to be visible: %w", sel, err)
		}
		return chromedp.Void{}, err
	}
}

// jsDo runs a JavaScript expression as a step of chromedp.Do.
func jsDo(expr string) chromedp.Action[chromedp.Void] {
	return func(ctx context.Context, tg *chromedp.Target) (chromedp.Void, error) {
		_, err := chromedp.Evaluate[bool](expr)(ctx, tg)
		return chromedp.Void{}, err
	}
}

// screen saves what the viewport shows.
func screen(ctx context.Context, t *testing.T, dir, name string) {
	png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	if err != nil {
		t.Logf("screenshot %s: %v", name, err)
		return
	}
	if err := os.WriteFile(filepath.Join(dir, name+".png"), png, 0o644); err != nil {
		t.Error(err)
	}
}

// shot saves the whole page, scrolled to the top first so the sticky
// header is drawn where it belongs.
func shot(ctx context.Context, t *testing.T, dir, name string) {
	chromedp.Run(ctx, chromedp.Evaluate[bool](`window.scrollTo(0, 0), true`))
	// Quality 100 makes chromedp ask for PNG.
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Logf("screenshot %s: %v", name, err)
		return
	}
	if err := os.WriteFile(filepath.Join(dir, name+".png"), png, 0o644); err != nil {
		t.Error(err)
	}
}

func buildSQM(t *testing.T, dir string) string {
	t.Helper()
	bin := filepath.Join(dir, "sqm-bin")
	goBin := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := os.Stat(goBin); err != nil {
		goBin = "go"
	}
	cmd := exec.Command(goBin, "build", "-o", bin, "sqm/cmd/sqm")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// proxy listens on the host's loopback and forwards each connection to
// addr inside ns: the upstream socket is created on a thread in ns and
// stays there.
func proxy(t *testing.T, ns *netns.NS, addr string) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				var up net.Conn
				if err := ns.Do(func() error {
					var err error
					up, err = net.Dial("tcp", addr)
					return err
				}); err != nil {
					return
				}
				defer up.Close()
				go func() { io.Copy(up, c); up.(*net.TCPConn).CloseWrite() }()
				io.Copy(c, up)
			}()
		}
	}()
	return "http://" + ln.Addr().String()
}

func waitHTTP(t *testing.T, url string, log fmt.Stringer) {
	t.Helper()
	waitHTTPFor(t, url, log, 20*time.Second)
}

// waitHTTPFor is waitHTTP with a bound: the VM's emulated daemon starts
// slower than the host's.
func waitHTTPFor(t *testing.T, url string, log fmt.Stringer, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		res, err := http.Get(url)
		if err == nil {
			res.Body.Close()
			if res.StatusCode == 200 {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the page did not answer within %s: %v\ndaemon log:\n%s", d, err, log.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for: %s", what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func get(t *testing.T, c *http.Client, url string, cookie ...string) int {
	req, _ := http.NewRequest("GET", url, nil)
	if len(cookie) > 0 {
		req.Header.Set("Cookie", cookie[0])
	}
	res, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	return res.StatusCode
}

func post(t *testing.T, c *http.Client, url, body, cookie string) int {
	req, _ := http.NewRequest("POST", url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if cookie != "" {
		req.Header.Set("Cookie", cookie)
	}
	res, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	return res.StatusCode
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// startDaemon starts the sqm daemon cmd in ns with its output kept, and on
// cleanup interrupts it (killing it after wait) and, if the test failed,
// logs that output and what extra, if set, adds.
func startDaemon(t *testing.T, ns *netns.NS, cmd *exec.Cmd, wait time.Duration, extra func() string) *syncBuf {
	t.Helper()
	log := &syncBuf{}
	cmd.Stdout, cmd.Stderr = log, log
	must(t, ns.Start(cmd))
	t.Cleanup(func() {
		cmd.Process.Signal(os.Interrupt)
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(wait):
			cmd.Process.Kill()
		}
		if t.Failed() {
			more := ""
			if extra != nil {
				more = "\n" + extra()
			}
			t.Logf("daemon log:\n%s%s", log.String(), more)
		}
	})
	return log
}
