package web_test

import (
	"context"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"sqm/internal/web"
)

const cakeConfig = `# cake on the WAN
config queue 'wan'
	option enabled '1'
	option interface 'eth1'
	option download '85000'
	option upload '10000'
	option qdisc 'cake'
	option script 'layer_cake.qos'
	option eqdisc_opts 'memlimit 32mb'   # keep: not one of the page's words
`

// fakeCake is a status source whose cake counters grow on every call, as
// under load: the host kernel has no cake, so the per-tin table and graph
// are driven from the documented JSON layout here, and from a real cake
// tree only in the VM (which has no browser).
type fakeCake struct {
	mu sync.Mutex
	n  uint64
}

func (f *fakeCake) status(context.Context) (any, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.n++
	n := f.n
	tins := func(k int, rate uint64) []map[string]any {
		var out []map[string]any
		for i := 0; i < k; i++ {
			out = append(out, map[string]any{
				"threshold_rate": rate / uint64(k-i), "target_us": 5000, "interval_us": 100000,
				"peak_delay_us": 900 + 400*i + int(n%7)*150, "avg_delay_us": 200 + 300*i + int(n%5)*120, "base_delay_us": 40 + 10*i,
				"sent_packets": n * uint64(1000*(i+1)), "sent_bytes": n * uint64(1400000*(i+1)),
				"dropped_packets": n * uint64(i), "ecn_marks": n * uint64(2*i), "ack_drops": n * uint64(i%2),
				"backlog_bytes": 1514 * (i + 1), "sparse_flows": i + 1, "bulk_flows": 2 * i, "unresponsive_flows": 0,
			})
		}
		return out
	}
	dev := func(name, of string, k int, rate uint64) map[string]any {
		d := map[string]any{"device": name, "kernel": map[string]any{"device": name, "qdiscs": []map[string]any{{
			"kind": "cake", "handle": "1:", "parent": "root", "bytes": n * rate / 8, "packets": n * 1000,
			"drops": n, "overlimits": 0, "requeues": 0, "backlog_bytes": 3000, "backlog_packets": 2, "ecn_marks": 3 * n,
			"cake": map[string]any{"tins": tins(k, rate/8)},
		}}, "filters": 0}}
		if of != "" {
			d["ifb_of"] = of
		} else {
			d["shaping"] = map[string]any{"section": "wan", "source": "/etc/config/sqm", "applied_at": time.Now().Add(-5 * time.Minute).UTC().Format(time.RFC3339),
				"options": map[string]any{"script": "layer_cake", "qdisc": "cake", "download": 85000, "upload": 10000, "linklayer": "ethernet", "overhead": 34}}
			d["tree_matches"] = true
		}
		return d
	}
	return map[string]any{
		"schema": 1, "devices": []any{dev("eth1", "", 4, 10_000_000), dev("ifb4eth1", "eth1", 3, 85_000_000)},
		"links": map[string]any{"eth1": map[string]bool{"exists": true, "up": true, "running": true}},
		"last":  map[string]string{"eth1": "eth1: applied (section \"wan\")"},
	}, nil
}

// TestBrowserCake checks what the host kernel cannot show: cake's per-tin
// table and delay history, and the form's cake controls and link presets,
// written into the file as eqdisc_opts/iqdisc_opts words and tcMPU.
func TestBrowserCake(t *testing.T) {
	chrome, err := exec.LookPath("chromium")
	if err != nil {
		t.Skip("needs Debian's chromium (apt-get install chromium; scripts/setup.sh installs it)")
	}
	if testing.Short() {
		t.Skip("starts a browser; skipped with -short")
	}
	shots := os.Getenv("SQM_WEB_ARTIFACTS")
	if shots == "" {
		if shots, err = os.MkdirTemp("", "sqm-web-shots-"); err != nil {
			t.Fatal(err)
		}
	}
	must(t, os.MkdirAll(shots, 0o755))
	cfg := filepath.Join(t.TempDir(), "sqm")
	must(t, os.WriteFile(cfg, []byte(cakeConfig), 0o644))
	h, _ := web.HashPassword(adminPass)
	users, err := web.ParseUsers("users", []byte("admin "+h))
	must(t, err)
	fc := &fakeCake{}
	applied := 0
	srv := &web.Server{
		ConfigPath: cfg, Users: users, Status: fc.status,
		Apply:  func(context.Context) ([]string, error) { applied++; return []string{"eth1: applied"}, nil },
		Qdiscs: func() []string { return []string{"cake", "fq_codel"} },
	}
	ts := httptest.NewServer(srv)
	defer ts.Close()

	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(chrome), chromedp.NoSandbox, chromedp.DisableGPU, chromedp.WindowSize(1280, 900))
	actx, cancel := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancel()
	ctx, cancel := chromedp.NewContext(actx)
	defer cancel()
	ctx, cancel = context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	do := func(what string, steps ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		if err := chromedp.Do(ctx, steps...); err != nil {
			shot(ctx, t, shots, "failed-cake-"+strings.ReplaceAll(what, " ", "-"))
			t.Fatalf("%s: %v", what, err)
		}
	}
	css := func(s string) chromedp.CSS { return chromedp.CSS(s) }
	do("log in", chromedp.Navigate(ts.URL+"/"), waitVisible("#login-form"),
		chromedp.SendKeys(css("#password"), adminPass), chromedp.Click(css("#login-form button")),
		waitVisible(`.queue[data-device="eth1"] table.tins`))
	heads, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll('.queue table.tins')].map(t => [...t.querySelectorAll('thead th')].map(th => th.textContent).join('|'))`))
	must(t, err)
	if len(heads) != 2 || heads[0] != "|Bulk|Best effort|Voice" || heads[1] != "|Bulk|Best effort|Video|Voice" {
		t.Errorf("tin tables (download, upload): %q", heads)
	}
	// Five polls give the delay graphs lines.
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](`document.querySelectorAll('.queue .graph-wrap')[1].querySelectorAll('polyline').length === 3`, chromedp.WithPollingTimeout(15*time.Second))); err != nil {
		t.Errorf("the ingress tin delay graph has no three lines: %v", err)
	}
	time.Sleep(3 * time.Second)
	shot(ctx, t, shots, "cake-status-desktop")

	form := `form[data-section="wan"]`
	do("cake controls and a preset",
		waitVisible(form+` [data-cake="diffserv"]`),
		jsDo(`(() => { const f = document.querySelector('`+form+`');
			const set = (sel, v) => { const e = f.querySelector(sel); e.value = v; e.dispatchEvent(new Event('change', {bubbles: true})); };
			set('[data-cake=diffserv]', 'diffserv4'); set('[data-cake=isolation]', 'dual-nat'); set('[data-cake=ack]', 'ack-filter');
			set('[data-preset]', 'docsis'); return true; })()`),
		chromedp.Click(css(form+` button[type="submit"]`)),
		waitVisible(form+` .ok-msg`))
	b, _ := os.ReadFile(cfg)
	for _, want := range []string{
		"option eqdisc_opts 'memlimit 32mb diffserv4 nat dual-srchost ack-filter'   # keep: not one of the page's words",
		"option iqdisc_opts 'diffserv4 nat dual-dsthost'",
		"option linklayer 'ethernet'", "option overhead '18'", "option tcMPU '64'", "option linklayer_advanced '1'",
		"# cake on the WAN",
	} {
		if !strings.Contains(string(b), want) {
			t.Errorf("config lacks %q:\n%s", want, b)
		}
	}
	if applied != 1 {
		t.Errorf("applied %d times; want 1", applied)
	}
	// Add a queue section from the page, then remove it (two clicks).
	before, _ := os.ReadFile(cfg)
	do("add a queue", chromedp.SendKeys(css("#add-name"), "lte"), chromedp.Click(css("#add-form button")),
		waitVisible(`form[data-section="lte"]`))
	if b, _ := os.ReadFile(cfg); string(b) != string(before)+"\nconfig queue 'lte'\n\toption enabled '0'\n" {
		t.Errorf("after adding lte:\n%s", b)
	}
	shot(ctx, t, shots, "cake-added-queue-desktop")
	lte := `form[data-section="lte"] [data-remove]`
	do("remove it", chromedp.Click(css(lte)), waitVisible(`form[data-section="lte"] [data-remove][data-armed="1"]`),
		chromedp.Click(css(lte)), chromedp.WaitNotPresent(css(`form[data-section="lte"]`)))
	if b, _ := os.ReadFile(cfg); string(b) != string(before) {
		t.Errorf("after removing lte:\n%s\nwant:\n%s", b, before)
	}
	do("phone size", chromedp.EmulateViewport(390, 844, chromedp.EmulateScale(2), chromedp.EmulateMobile))
	time.Sleep(1500 * time.Millisecond)
	do("scroll", jsDo(`document.querySelector('table.tins').scrollIntoView(), true`))
	screen(ctx, t, shots, "cake-phone-tins")
}
