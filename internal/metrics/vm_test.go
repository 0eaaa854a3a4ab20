package metrics_test

import (
	"bytes"
	"fmt"
	"os/exec"
	"regexp"
	"strconv"
	"testing"

	"sqm/internal/clitest"
	"sqm/internal/kernel"
	"sqm/internal/metrics"
	"sqm/internal/testutil"
)

// TestVMCakeTinMetrics shapes the link with layer_cake (cake diffserv3 on
// egress) in the VM, sends pings marked EF (Voice tin), CS1 (Bulk) and
// unmarked (Best Effort), and checks `sqm status --prom`: every tin of
// both directions is there under tc's name, each tin's packet count lies
// between the kernel's before and after the scrape, and the marked pings
// landed in their tins.
func TestVMCakeTinMetrics(t *testing.T) {
	testutil.RequireVM(t)
	l := newShapedLink(t, "layer_cake", "cake")
	const voice, bulk, be = 25, 15, 10
	l.ping(t, voice, "-Q", "0xb8") // EF
	l.ping(t, bulk, "-Q", "0x20")  // CS1
	l.ping(t, be)
	_, conn := l.kernelSource(t)
	before := tins(t, conn)
	out, err := l.router.Output(clitest.Command("status", "--prom", "--state-dir", l.stateDir))
	if err != nil {
		t.Fatalf("sqm status --prom: %v\n%s", err, out)
	}
	after := tins(t, conn)
	for key, b := range before {
		re := regexp.MustCompile(`(?m)^sqm_cake_tin_sent_packets_total\{interface="wan0",direction="` + regexp.QuoteMeta(key.dir) +
			`",tin="` + regexp.QuoteMeta(key.tin) + `"\} (\d+)$`)
		m := re.FindSubmatch(out)
		if m == nil {
			t.Errorf("no sent packets for %s tin %q in\n%s", key.dir, key.tin, out)
			continue
		}
		v, _ := strconv.ParseUint(string(m[1]), 10, 64)
		if v < b || v > after[key] {
			t.Errorf("%s tin %q: metric %d, kernel %d before and %d after", key.dir, key.tin, v, b, after[key])
		}
	}
	for _, w := range []struct {
		tin  string
		min  uint64
		have uint64
	}{{"Voice", voice, before[tinKey{"egress", "Voice"}]}, {"Bulk", bulk, before[tinKey{"egress", "Bulk"}]}, {"Best Effort", be, before[tinKey{"egress", "Best Effort"}]}} {
		if w.have < w.min {
			t.Errorf("egress tin %s sent %d packets, want at least the %d pings marked for it", w.tin, w.have, w.min)
		}
	}
	for _, want := range []string{"sqm_cake_tin_peak_delay_seconds", "sqm_cake_tin_ecn_marked_packets_total", "sqm_cake_tin_ack_dropped_packets_total", "sqm_cake_tin_sparse_flows"} {
		if !bytes.Contains(out, []byte("\n"+want+`{interface="wan0",direction="egress",tin="Voice"} `)) {
			t.Errorf("no %s for the Voice tin", want)
		}
	}
	if promtool, err := exec.LookPath("promtool"); err == nil {
		cmd := exec.Command(promtool, "check", "metrics")
		cmd.Stdin = bytes.NewReader(out)
		if msg, err := cmd.CombinedOutput(); err != nil || len(bytes.TrimSpace(msg)) > 0 {
			t.Errorf("promtool check metrics: %v\n%s", err, msg)
		}
	}
}

type tinKey struct{ dir, tin string }

// tins reads every cake tin's sent packet count on wan0 (egress) and its
// IFB (ingress).
func tins(t *testing.T, conn *kernel.Conn) map[tinKey]uint64 {
	t.Helper()
	out := map[tinKey]uint64{}
	for dir, dev := range map[string]string{"egress": "wan0", "ingress": "ifb4wan0"} {
		ds, err := conn.Status(dev)
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, q := range ds[0].Qdiscs {
			if q.Parent.String() != "root" || q.Cake == nil {
				continue
			}
			found = true
			for i, tin := range q.Cake.Tins {
				out[tinKey{dir, metrics.TinName(len(q.Cake.Tins), i)}] = uint64(tin.SentPackets)
			}
		}
		if !found {
			t.Fatalf("%s: no cake at the root: %s", dev, fmt.Sprint(ds[0].Qdiscs))
		}
	}
	return out
}
