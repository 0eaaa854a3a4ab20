package web_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"sqm/internal/service"
	"sqm/internal/web"
)

// autorateReplay serves the cake recording's first status document with
// the daemon's autorate record (service.AutorateStatus, as sqm status
// --json carries it) on wan0, its download rate and delay moving by poll:
// the page must show the latest rate and draw the rate and the delay over
// time.
type autorateReplay struct {
	mu   sync.Mutex
	base map[string]any
	n    int
}

// autorateRate is the download rate of poll n, kbit/s.
func autorateRate(n int) uint64 { return 15000 + uint64(n%10)*500 }

func (r *autorateReplay) status(context.Context) (any, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := r.n
	r.n++
	ar := service.AutorateStatus{
		Interface: "wan0", Section: "wan", Running: true, UpdatedAt: time.Now().UTC(),
		Download: &service.AutorateDir{RateKbit: autorateRate(n), BaseKbit: 20000, MinKbit: 5000, MaxKbit: 40000,
			AchievedKbit: autorateRate(n) * 9 / 10, Load: 0.9, DelayMs: float64(n%7) + 0.5, TargetMs: 15, Reason: "increase", LastChange: "increase"},
		Upload: &service.AutorateDir{RateKbit: 10000, BaseKbit: 10000, MinKbit: 2500, MaxKbit: 20000, DelayMs: -1, TargetMs: 15, Reason: "idle", LastChange: "start"},
		Reflectors: []service.AutorateReflector{
			{Target: "udp-sqm 192.0.2.1:12866", OneWay: true, Replied: true},
			{Target: "icmp-timestamp 192.0.2.1", OneWay: true},
		},
		RateChanges: uint64(n),
	}
	b, err := json.Marshal(ar)
	if err != nil {
		return nil, err
	}
	doc := map[string]any{}
	for k, v := range r.base {
		doc[k] = v
	}
	var devs []any
	for _, d := range r.base["devices"].([]any) {
		dm := map[string]any{}
		for k, v := range d.(map[string]any) {
			dm[k] = v
		}
		if dm["device"] == "wan0" {
			dm["autorate"] = json.RawMessage(b)
		}
		devs = append(devs, dm)
	}
	doc["devices"] = devs
	return doc, nil
}

// TestBrowserAutorate: with autorate on a queue, the status card shows
// each direction's rate set now (the latest poll's), the state and the
// reflectors answering, and after a few polls two graphs with lines: the
// rates set, and the delay rise with its target.
func TestBrowserAutorate(t *testing.T) {
	chrome := chromiumOrSkip(t)
	b, err := os.ReadFile(cakeRecording)
	must(t, err)
	var docs []map[string]any
	must(t, json.Unmarshal(b, &docs))
	fc := &autorateReplay{base: docs[0]}
	srv := &web.Server{Status: fc.status, Qdiscs: func() []string { return []string{"cake"} }}
	p := fakeDaemonPage(t, chrome, cakeConfig, srv, `.queue[data-device="wan0"] [data-autorate="download"]`)
	ctx, shots := p.ctx, p.shots
	// The graphs need polls; each line needs two points.
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](`(() => { const ar = [...document.querySelectorAll('.queue[data-device="wan0"] [data-autorate-section] .graph-wrap')];
		return ar.length === 2 && ar[0].querySelectorAll('polyline').length === 2 && ar[1].querySelectorAll('polyline').length === 2; })()`,
		chromedp.WithPollingTimeout(20*time.Second))); err != nil {
		dbg, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`[...document.querySelectorAll('.queue[data-device="wan0"] [data-autorate-section] .graph-wrap')].map(g => g.querySelectorAll('polyline').length + ':' + g.textContent).join(' | ')`))
		t.Fatalf("the autorate graphs have no lines after %d polls: %v (graphs: %s)", fc.n, err, dbg)
	}
	fc.mu.Lock()
	last := fc.n - 1
	fc.mu.Unlock()
	got, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll('.queue[data-device="wan0"] [data-autorate]')].map(e => e.textContent)`))
	must(t, err)
	// A poll may have landed between reading n and the page.
	want := map[string]bool{fmtKbitTest(autorateRate(last)): true, fmtKbitTest(autorateRate(last + 1)): true}
	if len(got) != 2 || !want[got[0]] || got[1] != "10.0 Mbit/s" {
		t.Errorf("rates shown (download, upload) %q; want the latest poll's download %v and 10.0 Mbit/s", got, want)
	}
	state, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector('.queue[data-device="wan0"] [data-autorate-state]').textContent`))
	must(t, err)
	if !strings.Contains(state, "following the link") || !strings.Contains(state, "1 of 2 reflectors answering") {
		t.Errorf("autorate state %q", state)
	}
	// The delay graph's upload line is absent (no delay yet, -1), its
	// target line is there: two lines, checked above; the scale is ms.
	scale, err := chromedp.Run(ctx, chromedp.Evaluate[string](`[...document.querySelectorAll('.queue[data-device="wan0"] [data-autorate-section] .graph-wrap .graph-max')].pop().textContent`))
	must(t, err)
	if !strings.HasSuffix(scale, " ms delay rise") {
		t.Errorf("delay graph scale %q", scale)
	}
	shot(ctx, t, shots, "autorate-status-desktop")
}

// fmtKbitTest is the page's fmtKbit for rates of 10-100 Mbit/s.
func fmtKbitTest(k uint64) string { return fmt.Sprintf("%.1f Mbit/s", float64(k)/1000) }
