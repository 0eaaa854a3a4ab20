package lab

import (
	"os"
	"path/filepath"
	"testing"
)

// TestCountCakeChanges: the rate changes of a cake-autorate run are its
// SHAPER log lines (log_msg's "TYPE; date; EPOCHREALTIME; message"), one
// per direction changed; nothing else in its log counts.
func TestCountCakeChanges(t *testing.T) {
	log := `INFO; 2026-12-02-15:30:01; 1764689401.120001; Starting cake-autorate with PID: 4242 and config: /tmp/x/config.lab.sh
SHAPER; 2026-12-02-15:30:02; 1764689402.000100; tc qdisc change root dev ifb4wan0 cake bandwidth 6480Kbit
SHAPER; 2026-12-02-15:30:02; 1764689402.000200; tc qdisc change root dev wan0 cake bandwidth 1800Kbit
DEBUG; 2026-12-02-15:30:02; 1764689402.000300; adjust_ul_shaper_rate set to 0 in config, so skipping the corresponding tc qdisc change call.
DATA; 2026-12-02-15:30:03; 1764689403.1; cake bandwidth 7000Kbit in a data line
SHAPER; 2026-12-02-15:30:04; 1764689404.000100; tc qdisc change root dev ifb4wan0 cake bandwidth 5832Kbit
`
	p := filepath.Join(t.TempDir(), "cake-autorate.lab.log")
	if err := os.WriteFile(p, []byte(log), 0o644); err != nil {
		t.Fatal(err)
	}
	n, err := countCakeChanges(p)
	if err != nil || n != 3 {
		t.Fatalf("countCakeChanges = %d, %v; want 3", n, err)
	}
	if _, err := countCakeChanges(filepath.Join(t.TempDir(), "none")); err == nil {
		t.Fatal("a missing log: no error")
	}
}
