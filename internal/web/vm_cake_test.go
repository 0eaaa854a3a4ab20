package web_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"sqm/internal/clitest"
	"sqm/internal/netns"
	"sqm/internal/testutil"
	"sqm/internal/vm"
	"sqm/internal/web"
)

// vmCakeConfig shapes wan0 with layer_cake: cake diffserv3 both ways
// (squash_ingress 0 keeps the ingress tins that sqm's default folds into
// one, squash_dscp 0 the marks), so EF and CS1 marked pings and their
// replies land in the Voice and Bulk tins.
const vmCakeConfig = `config queue 'wan'
	option enabled '1'
	option interface 'wan0'
	option download '20000'
	option upload '10000'
	option qdisc 'cake'
	option script 'layer_cake.qos'
	option squash_ingress '0'
	option squash_dscp '0'
`

// cakeRecording is the status the daemon served in TestVMWebCakeTins
// while traffic ran, one /api/status "status" document per poll. The host
// kernel has no cake, so TestBrowserCake replays it to the browser.
const cakeRecording = "testdata/cake-status-vm.json"

// TestVMWebCakeTins runs `sqm daemon --http` shaping a veth with a real
// cake in the VM, sends marked pings through it, and reads /api/status
// the way the page does (log in, session cookie, poll) while they run:
// every tin field the page's table shows is there, and the Voice, Bulk and
// Best Effort tins' counters move from poll to poll in both directions.
//
// Then headless Chromium, started at the beginning because under the VM's
// emulation (no KVM) its start-up alone takes about 80 s, logs in to the
// same daemon while the pings still run and must show every tin's packet
// count rising on the page: a browser watching a live cake. TestBrowserCake
// (host) covers the rest of the page's cake parts from the recording this
// test keeps.
func TestVMWebCakeTins(t *testing.T) {
	testutil.RequireVM(t)
	browser := startVMBrowser(t)
	dir := t.TempDir()
	router := netns.NewT(t, "webcr")
	peer := netns.NewT(t, "webcp")
	must(t, router.Veth("wan0", peer, "peer0"))
	must(t, router.AddAddr("wan0", "10.77.0.1/24"))
	must(t, peer.AddAddr("peer0", "10.77.0.2/24"))
	must(t, router.Up("lo", "wan0"))
	must(t, peer.Up("lo", "peer0"))

	cfg := filepath.Join(dir, "sqm")
	must(t, os.WriteFile(cfg, []byte(vmCakeConfig), 0o644))
	h, err := web.HashPassword(adminPass)
	must(t, err)
	users := filepath.Join(dir, "web-users")
	must(t, os.WriteFile(users, []byte("admin "+h+"\n"), 0o600))

	daemon := clitest.Command("daemon", "--config", cfg, "--state-dir", filepath.Join(dir, "run"),
		"--http", webPort, "--http-users", users, "--stop-on-exit")
	daemonLog := startDaemon(t, router, daemon, 20*time.Second, nil)
	base := proxy(t, router, "127.0.0.1:"+webPort)
	waitHTTPFor(t, base+"/", daemonLog, time.Minute)

	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar, Timeout: 30 * time.Second}
	res, err := c.Post(base+"/api/login", "application/json", strings.NewReader(`{"password":"`+adminPass+`"}`))
	must(t, err)
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("login: %s", res.Status)
	}
	poll := func() (json.RawMessage, *statusDoc) {
		t.Helper()
		res, err := c.Get(base + "/api/status")
		must(t, err)
		b, err := io.ReadAll(res.Body)
		res.Body.Close()
		must(t, err)
		if res.StatusCode != http.StatusOK {
			t.Fatalf("GET /api/status: %s: %s", res.Status, b)
		}
		var env struct {
			Status json.RawMessage `json:"status"`
		}
		must(t, json.Unmarshal(b, &env))
		var d statusDoc
		must(t, json.Unmarshal(env.Status, &d))
		return env.Status, &d
	}
	// The daemon applies in the background: wait for cake at both roots.
	deadline := time.Now().Add(time.Minute)
	for {
		r, d := poll()
		if len(d.tins("wan0")) == 3 && len(d.tins("ifb4wan0")) == 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no cake with 3 tins on wan0 and ifb4wan0 within a minute (tins: %d, %d); last status:\n%s",
				len(d.tins("wan0")), len(d.tins("ifb4wan0")), r)
		}
		time.Sleep(200 * time.Millisecond)
	}

	// Marked pings, replies included (the reply keeps the request's TOS),
	// cross both cakes while the page's API is polled, until every tin
	// has been seen moving or the pings' own deadline ends them: how many
	// polls that takes depends on the machine, not on a timer here.
	var pings []*exec.Cmd
	for _, tos := range []string{"0xb8", "0x20", "0"} { // EF: Voice, CS1: Bulk, Best Effort
		p := exec.Command("ping", "-q", "-w", "400", "-i", "0.05", "-Q", tos, "10.77.0.2")
		must(t, router.Start(p))
		pings = append(pings, p)
	}
	t.Cleanup(func() { // on a failure; Kill after the end is harmless
		for _, p := range pings {
			p.Process.Kill()
		}
	})
	done := make(chan error, 1)
	go func() {
		var first error
		for _, p := range pings {
			if err := p.Wait(); err != nil && first == nil {
				first = err
			}
		}
		done <- first
	}()
	stop := func() {
		for _, p := range pings {
			p.Process.Kill()
		}
		<-done
	}
	// seen is, per direction and tin, the packet counts the API showed,
	// each different from the one before.
	devs, names := []string{"wan0", "ifb4wan0"}, []string{"Bulk", "Best Effort", "Voice"}
	seen := make([][][]float64, len(devs))
	for i := range seen {
		seen[i] = make([][]float64, len(names))
	}
	moved := func() bool {
		for i := range devs {
			for j := range names {
				if len(seen[i][j]) < 3 {
					return false
				}
			}
		}
		return true
	}
	// At least recordPolls polls: TestBrowserCake replays them, and the
	// page's delay graph needs several.
	const recordPolls = 10
	var raw []json.RawMessage
	var docs []*statusDoc
	for !moved() || len(docs) < recordPolls {
		select {
		case err := <-done:
			done <- err
			stop()
			t.Fatalf("the pings ended (%v) before every tin moved twice and %d polls were made (%d polls): %v", err, recordPolls, len(docs), seen)
		default:
		}
		r, d := poll()
		raw, docs = append(raw, r), append(docs, d)
		for i, dev := range devs {
			for j := range names {
				v, _ := d.tins(dev)[j]["sent_packets"].(float64)
				if s := seen[i][j]; len(s) == 0 || v != s[len(s)-1] {
					seen[i][j] = append(s, v)
				}
			}
		}
		time.Sleep(250 * time.Millisecond)
	}
	t.Logf("%d polls; the counts each tin showed: %v", len(docs), seen)
	// The pings go on for the browser.
	select {
	case err := <-done:
		t.Fatalf("the pings ended (%v) before the browser's part", err)
	default:
	}
	browserSeesTinsMove(t, <-browser, base)
	stop()

	// Every field the page's tin table and graph read, in every tin.
	fields := pageTinFields(t)
	for _, f := range fields {
		for _, dev := range devs {
			for i, tin := range docs[len(docs)-1].tins(dev) {
				if _, ok := tin[f].(float64); !ok {
					t.Errorf("%s tin %d: the page reads %q, the API has %v", dev, i, f, tin[f])
				}
			}
		}
	}
	// Moving means rising: a counter that went back would be a reset.
	for i, dev := range devs {
		for j, name := range names {
			if !sort.Float64sAreSorted(seen[i][j]) {
				t.Errorf("%s tin %s: sent packets went %v over %d polls; want rising", dev, name, seen[i][j], len(docs))
			}
		}
	}

	// Keep what the page got, for TestBrowserCake (see cakeRecording).
	rec, err := json.MarshalIndent(raw, "", " ")
	must(t, err)
	out := outDir(t)
	must(t, os.WriteFile(filepath.Join(out, "cake-status-vm.json"), rec, 0o644))
	t.Logf("recording in %s/cake-status-vm.json", out)
	// The recording the host replays must have the shape the API serves.
	golden, err := os.ReadFile(cakeRecording)
	must(t, err)
	var old []json.RawMessage
	must(t, json.Unmarshal(golden, &old))
	if len(old) == 0 {
		t.Fatalf("%s is empty", cakeRecording)
	}
	if have, want := jsonPaths(old[len(old)-1]), jsonPaths(raw[len(raw)-1]); have != want {
		t.Errorf("%s no longer has the API's shape; refresh it: flock /tmp/sqm-vm.lock go run ./tools/vmtest -keep -run TestVMWebCakeTins ./internal/web, then copy WORK/cake-status-vm.json there\nrecorded:\n%s\nserved now:\n%s", cakeRecording, have, want)
	}
}

// statusDoc is the part of /api/status's document the test reads, as the
// page reads it (app.js rootQdisc: the qdisc whose parent is root).
type statusDoc struct {
	Devices []struct {
		Device string `json:"device"`
		Kernel struct {
			Qdiscs []struct {
				Parent string `json:"parent"`
				Cake   *struct {
					Tins []map[string]any `json:"tins"`
				} `json:"cake"`
			} `json:"qdiscs"`
		} `json:"kernel"`
	} `json:"devices"`
}

func (d *statusDoc) tins(dev string) []map[string]any {
	for _, x := range d.Devices {
		if x.Device != dev {
			continue
		}
		for _, q := range x.Kernel.Qdiscs {
			if q.Parent == "root" && q.Cake != nil {
				return q.Cake.Tins
			}
		}
	}
	return nil
}

// pageTinFields are the tin fields app.js reads ("(t) => ... t.field" in
// the tin table, "x.avg_delay_us" for the delay graph), taken from the
// page itself so a renamed field cannot slip past.
func pageTinFields(t *testing.T) []string {
	t.Helper()
	js, err := os.ReadFile("assets/app.js")
	must(t, err)
	set := map[string]bool{}
	for _, m := range regexp.MustCompile(`\(t\) => [^\]]*?\bt\.([a-z_]+)`).FindAllSubmatch(js, -1) {
		set[string(m[1])] = true
	}
	for _, m := range regexp.MustCompile(`tins\.map\(\(x\) => x\.([a-z_]+)`).FindAllSubmatch(js, -1) {
		set[string(m[1])] = true
	}
	var out []string
	for f := range set {
		out = append(out, f)
	}
	sort.Strings(out)
	if len(out) < 10 {
		t.Fatalf("found only %v as tin fields in app.js; has the table changed?", out)
	}
	return out
}

// omitEmpty are keys the API leaves out when their value is zero or
// empty (the rate estimator's rates, a problem's text): present in one poll
// and not the next, they are no part of the shape.
var omitEmpty = map[string]bool{"rate_bps": true, "rate_pps": true, "drift": true, "error": true, "last_error": true}

// jsonPaths lists a document's object keys as paths, arrays collapsed to
// [], one per line, sorted: its shape without its values.
func jsonPaths(doc json.RawMessage) string {
	var v any
	dec := json.NewDecoder(bytes.NewReader(doc))
	if err := dec.Decode(&v); err != nil {
		return "invalid JSON: " + err.Error()
	}
	set := map[string]bool{}
	var walk func(p string, v any)
	walk = func(p string, v any) {
		switch x := v.(type) {
		case map[string]any:
			for k, e := range x {
				walk(p+"."+k, e)
			}
		case []any:
			for _, e := range x {
				walk(p+"[]", e)
			}
		default:
			if !omitEmpty[p[strings.LastIndexByte(p, '.')+1:]] {
				set[fmt.Sprintf("%s %T", p, v)] = true
			}
		}
	}
	walk("", v)
	var out []string
	for p := range set {
		out = append(out, p)
	}
	sort.Strings(out)
	return strings.Join(out, "\n")
}

// outDir is the VM's out directory (tools/vmtest -keep keeps it), or a
// temporary one when the test runs elsewhere.
func outDir(t *testing.T) string {
	if fi, err := os.Stat(vm.GuestOutDir); err == nil && fi.IsDir() {
		return vm.GuestOutDir
	}
	return t.TempDir()
}

// vmBrowser is a started headless Chromium, or why it did not start.
type vmBrowser struct {
	ctx context.Context
	err error
}

// startVMBrowser launches Chromium in the background: its start-up under
// the VM's emulation takes longer than the daemon's whole part, so the two
// overlap. Its profile and HOME are on the guest's tmpfs (the shared root
// is read-only).
func startVMBrowser(t *testing.T) <-chan vmBrowser {
	t.Helper()
	chrome, err := exec.LookPath("chromium")
	if err != nil {
		t.Fatalf("no chromium in the VM's root (scripts/setup.sh installs it): %v", err)
	}
	home := t.TempDir()
	ctx := newBrowser(t, chrome, 8*time.Minute, chromedp.UserDataDir(filepath.Join(home, "profile")),
		chromedp.Env("HOME="+home, "XDG_CONFIG_HOME="+home, "XDG_CACHE_HOME="+home))
	out := make(chan vmBrowser, 1)
	go func() {
		start := time.Now()
		// The first Do on ctx starts the browser and binds it to ctx.
		err := chromedp.Do(ctx)
		if err == nil {
			t.Logf("chromium started in %.0f s", time.Since(start).Seconds())
		}
		out <- vmBrowser{ctx, err}
	}()
	return out
}

// browserSeesTinsMove logs in to the page at base and reads the tin
// tables' "packets" rows as they update: three different readings, no
// count ever going back, and every tin of both directions higher at the
// last than at the first. Screenshots (desktop, phone) go to the VM's out
// directory (tools/vmtest -keep keeps it).
func browserSeesTinsMove(t *testing.T, b vmBrowser, base string) {
	t.Helper()
	if b.err != nil {
		t.Fatalf("start chromium: %v", b.err)
	}
	ctx := b.ctx
	shots := outDir(t)
	// Everything is slow under emulation: waits are generous, and only
	// bound how long a failure takes to show.
	slowVisible := func(sel string) chromedp.Action[chromedp.Void] { return waitVisibleFor(sel, 2*time.Minute) }
	tables := `.queue table.tins`
	if err := chromedp.Do(ctx, chromedp.Navigate(base+"/"), slowVisible("#login-form"),
		chromedp.SendKeys(chromedp.CSS("#password"), adminPass), chromedp.Click(chromedp.CSS("#login-form button")),
		slowVisible(`.queue[data-device="wan0"] table.tins`)); err != nil {
		shot(ctx, t, shots, "failed-vm-cake-login")
		t.Fatalf("log in and see the cake: %v", err)
	}
	heads, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll('`+tables+`')].map(t => [...t.querySelectorAll('thead th')].map(th => th.textContent).join('|'))`))
	must(t, err)
	if len(heads) != 2 || heads[0] != "|Bulk|Best effort|Voice" || heads[1] != "|Bulk|Best effort|Voice" {
		t.Errorf("tin tables (download, upload): %q", heads)
	}
	// readRows returns, per table, the packets row's numbers.
	readRows := func() [][]float64 {
		rows, err := chromedp.Run(ctx, chromedp.Evaluate[[][]string](`[...document.querySelectorAll('`+tables+`')].map(t => {
			const r = [...t.querySelectorAll('tbody tr')].find(r => r.cells[0].textContent === 'packets');
			return r ? [...r.cells].slice(1).map(c => c.textContent) : []; })`))
		must(t, err)
		out := make([][]float64, len(rows))
		for i, r := range rows {
			for _, c := range r {
				v, err := strconv.ParseFloat(strings.ReplaceAll(c, ",", ""), 64)
				if err != nil {
					t.Fatalf("tin table %d shows packets %q, not a count", i, r)
				}
				out[i] = append(out[i], v)
			}
		}
		return out
	}
	var seen [][][]float64
	deadline := time.Now().Add(3 * time.Minute)
	for len(seen) < 3 {
		r := readRows()
		if len(r) != 2 || len(r[0]) != 3 || len(r[1]) != 3 {
			t.Fatalf("tin packets rows shown: %v; want 3 tins in each of 2 tables", r)
		}
		if n := len(seen); n == 0 || !reflect.DeepEqual(r, seen[n-1]) {
			if n > 0 {
				for i := range r {
					for j := range r[i] {
						if r[i][j] < seen[n-1][i][j] {
							t.Fatalf("table %d tin %d: packets went back from %v to %v", i, j, seen[n-1][i][j], r[i][j])
						}
					}
				}
			}
			seen = append(seen, r)
		}
		if time.Now().After(deadline) {
			t.Fatalf("the tin packets shown took %d values in 3 minutes: %v; want 3", len(seen), seen)
		}
		time.Sleep(500 * time.Millisecond)
	}
	first, last := seen[0], seen[len(seen)-1]
	for i := range first {
		for j := range first[i] {
			if last[i][j] <= first[i][j] {
				t.Errorf("table %d tin %d: packets shown %v then %v while pings ran through it", i, j, first[i][j], last[i][j])
			}
		}
	}
	t.Logf("the page showed tin packets %v", seen)
	shot(ctx, t, shots, "vm-cake-live-desktop")
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(390, 844, chromedp.EmulateScale(2), chromedp.EmulateMobile)); err != nil {
		t.Errorf("phone size: %v", err)
	}
	shot(ctx, t, shots, "vm-cake-live-phone")
	t.Logf("screenshots in %s", shots)
}
