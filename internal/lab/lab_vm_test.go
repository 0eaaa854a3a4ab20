package lab

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"sqm/internal/netns"
	"sqm/internal/testutil"
)

// TestVMLabDefault runs the default lab (20/5 Mbit/s, 20 ms, 1000-packet
// FIFO) and checks the promise on the real measurements: the bloat
// shows (induced p90 latency without SQM above 100 ms), sqm removes it
// (below 15 ms) and the shaped goodput keeps at least 80 % of the emulated
// rate each way.
func TestVMLabDefault(t *testing.T) {
	testutil.RequireVM(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	start := time.Now()
	o := DefaultOptions()
	o.Progress = func(p string) { t.Logf("[%5.1fs] %s", time.Since(start).Seconds(), p) }
	rep, err := Run(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := rep.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	t.Logf("lab report:\n%s", b.String())

	before, after := SideOf(rep.Before), SideOf(rep.After)
	if r := before.DownMbps * 1e6 / float64(rep.Link.DownBits); r < 0.8 {
		// Not a pass: said so the failures below can be read. Under TCG the
		// VM needs most of two host cores to move 20 Mbit/s through four
		// namespaces; a loaded host shows up as low unshaped goodput.
		t.Logf("note: even unshaped, the link carried only %.0f%% of its rate: the VM is short of CPU (host load?), so latency and goodput below are not the link's", 100*r)
	}
	if got := before.InducedMs(90); !(got > 100) {
		t.Errorf("induced p90 latency without SQM = %.1f ms, want > 100 ms (the emulated modem is not bloated)", got)
	}
	if got := after.InducedMs(90); !(got < 15) {
		t.Errorf("induced p90 latency with SQM = %.1f ms, want < 15 ms", got)
	}
	l := rep.Link.Link
	if r := after.DownMbps * 1e6 / float64(l.DownBits); !(r >= 0.80) {
		t.Errorf("shaped download goodput %.2f Mbit/s is %.0f%% of the emulated %s, want >= 80%%", after.DownMbps, 100*r, FormatRate(l.DownBits))
	}
	if r := after.UpMbps * 1e6 / float64(l.UpBits); !(r >= 0.80) {
		t.Errorf("shaped upload goodput %.2f Mbit/s is %.0f%% of the emulated %s, want >= 80%%", after.UpMbps, 100*r, FormatRate(l.UpBits))
	}
	if rep.Shaping.Plan == nil || rep.Shaping.Plan.Egress == nil || rep.Shaping.Plan.Ingress == nil {
		t.Errorf("shaping plan %+v lacks egress or ingress", rep.Shaping.Plan)
	}
	js, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	var back map[string]json.RawMessage
	if err := json.Unmarshal(js, &back); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"before", "after", "link", "shaping"} {
		if len(back[k]) < 3 {
			t.Errorf("--json lacks %q", k)
		}
	}
	if len(rep.Link.Namespaces) != 4 {
		t.Errorf("namespaces = %v, want client, router, isp, server", rep.Link.Namespaces)
	}
	for _, n := range rep.Link.Namespaces {
		if _, err := os.Stat(filepath.Join(netns.Dir, n)); err == nil {
			t.Errorf("namespace %s still exists after Run returned", n)
		}
	}
	if len(rep.Link.nsIDs) != 4 {
		t.Errorf("namespace ids = %v", rep.Link.nsIDs)
	}
	if n := ourNetNSRefs(t, rep.Link.nsIDs...); n != 0 {
		t.Errorf("after Run returned, this process still holds %d references to lab namespaces", n)
	}
}
