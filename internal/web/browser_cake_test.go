package web_test

import (
	"context"
	"encoding/json"
	"os"
	"regexp"
	"slices"
	"strconv"
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
	option interface 'wan0'
	option download '20000'
	option upload '10000'
	option qdisc 'cake'
	option script 'layer_cake.qos'
	option eqdisc_opts 'memlimit 32mb'   # keep: not one of the page's words
`

// replay serves the status documents TestVMWebCakeTins recorded from a
// daemon shaping with a real cake while traffic ran (cakeRecording), one
// per poll, then the last one: the host kernel has no cake, and what the
// page shows should come from what a real cake reports, not invented
// numbers.
type replay struct {
	mu   sync.Mutex
	docs []json.RawMessage
	n    int
}

func loadReplay(t *testing.T) *replay {
	t.Helper()
	b, err := os.ReadFile(cakeRecording)
	must(t, err)
	r := &replay{}
	must(t, json.Unmarshal(b, &r.docs))
	if len(r.docs) < 5 {
		t.Fatalf("%s has %d polls; the graph needs five", cakeRecording, len(r.docs))
	}
	return r
}

func (r *replay) status(context.Context) (any, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	d := r.docs[min(r.n, len(r.docs)-1)]
	r.n++
	return d, nil
}

// packetRows is, per recorded poll, the tin tables' "packets" rows as the
// page should print them: download (ifb4wan0) then upload (wan0), tins
// in kernel order.
func (r *replay) packetRows(t *testing.T) []string {
	var out []string
	for _, raw := range r.docs {
		var d statusDoc
		must(t, json.Unmarshal(raw, &d))
		var rows []string
		for _, dev := range []string{"ifb4wan0", "wan0"} {
			var cells []string
			for _, tin := range d.tins(dev) {
				cells = append(cells, strconv.FormatFloat(tin["sent_packets"].(float64), 'f', -1, 64))
			}
			rows = append(rows, strings.Join(cells, ","))
		}
		out = append(out, strings.Join(rows, " | "))
	}
	return out
}

// TestBrowserCake checks what the host kernel cannot show: cake's per-tin
// table and delay history, fed the status a real cake gave in the VM
// (TestVMWebCakeTins has a browser watch a live cake's counters rise; a
// replay lets this test check the exact numbers printed, in order), and
// the form's cake controls and link presets, written into the file as
// eqdisc_opts/iqdisc_opts words and tcMPU.
func TestBrowserCake(t *testing.T) {
	chrome := chromiumOrSkip(t)
	fc := loadReplay(t)
	wantRows := fc.packetRows(t)
	applied := 0
	srv := &web.Server{
		Status: fc.status,
		Apply:  func(context.Context) ([]string, error) { applied++; return []string{"eth1: applied"}, nil },
		Qdiscs: func() []string { return []string{"cake", "fq_codel"} },
	}
	p := fakeDaemonPage(t, chrome, cakeConfig, srv, `.queue[data-device="wan0"] table.tins`)
	ctx, do, shots, cfg := p.ctx, p.do, p.shots, srv.ConfigPath
	css := func(s string) chromedp.CSS { return chromedp.CSS(s) }
	heads, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll('.queue table.tins')].map(t => [...t.querySelectorAll('thead th')].map(th => th.textContent).join('|'))`))
	must(t, err)
	if len(heads) != 2 || heads[0] != "|Bulk|Best effort|Voice" || heads[1] != "|Bulk|Best effort|Voice" {
		t.Errorf("tin tables (download, upload): %q", heads)
	}
	// The packets rows show the recorded polls' numbers, in their order,
	// and change as the polls do.
	var seen []int
	deadline := time.Now().Add(30 * time.Second)
	for len(seen) < 3 {
		row, err := chromedp.Run(ctx, chromedp.Evaluate[string](`[...document.querySelectorAll('.queue table.tins')].map(t => {
			const r = [...t.querySelectorAll('tbody tr')].find(r => r.cells[0].textContent === 'packets');
			return r ? [...r.cells].slice(1).map(c => c.textContent).join(',') : '<no packets row>'; }).join(' | ')`))
		must(t, err)
		i := slices.Index(wantRows, row)
		switch {
		case i < 0:
			t.Fatalf("tin packets shown %q are no recorded poll's:\n%s", row, strings.Join(wantRows, "\n"))
		case len(seen) > 0 && i < seen[len(seen)-1]:
			t.Fatalf("tin packets went back from poll %d to poll %d", seen[len(seen)-1], i)
		case len(seen) == 0 || wantRows[i] != wantRows[seen[len(seen)-1]]:
			seen = append(seen, i)
		}
		if time.Now().After(deadline) {
			t.Fatalf("the tin packets shown took %d values in 30 s (polls %v); want 3", len(seen), seen)
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Logf("tin packets shown from polls %v", seen)
	// Five polls give the delay graphs lines.
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](`document.querySelectorAll('.queue .graph-wrap')[1].querySelectorAll('polyline').length === 3`, chromedp.WithPollingTimeout(15*time.Second))); err != nil {
		t.Errorf("the ingress tin delay graph has no three lines: %v", err)
	}
	// The recorded delays are microseconds: the scale says so rather
	// than rounding them to 0.0 ms.
	labels, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll('.queue .graph-wrap .graph-max')].slice(1).map(e => e.textContent)`))
	must(t, err)
	for _, l := range labels {
		if !regexp.MustCompile(`^[1-9]\d* µs avg delay$`).MatchString(l) {
			t.Errorf("tin delay graph scale %q; want microseconds, not zero", l)
		}
	}
	if len(labels) != 2 {
		t.Errorf("tin delay graph scales: %q; want two", labels)
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
