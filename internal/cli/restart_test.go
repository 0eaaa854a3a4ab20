//go:build linux

package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sqm/internal/netns"
	"sqm/internal/testutil"
)

// TestRestartFailureKeepsShaping runs `sqm restart` in a namespace where the
// new config cannot be applied: it adds ingress shaping, and the IFB name
// it needs (ifb4wan0) is taken by a veth, which the kernel layer refuses.
// restart used to stop first and then start, leaving wan0 unshaped; now the
// old tree and state must survive, and status must say the tree is as
// applied.
func TestRestartFailureKeepsShaping(t *testing.T) {
	testutil.RequireRoot(t)
	ns := netns.NewT(t, "sqmcli")
	for _, pair := range [][2]string{{"wan0", "wan1"}, {"ifb4wan0", "decoy0"}} {
		if err := ns.Veth(pair[0], ns, pair[1]); err != nil {
			t.Fatal(err)
		}
		if err := ns.Up(pair[0], pair[1]); err != nil {
			t.Fatal(err)
		}
	}
	dir := t.TempDir()
	conf, state := filepath.Join(dir, "sqm"), filepath.Join(dir, "state")
	section := func(download string) {
		t.Helper()
		c := "config queue 'wan'\n\toption enabled '1'\n\toption interface 'wan0'\n\toption download '" + download +
			"'\n\toption upload '10000'\n\toption script 'simple.qos'\n\toption qdisc 'pfifo'\n"
		if err := os.WriteFile(conf, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	sqm := func(args ...string) (int, string, string) {
		t.Helper()
		var out, errb bytes.Buffer
		code := 0
		err := ns.Do(func() error {
			code = run(context.Background(), &Env{Stdout: &out, Stderr: &errb, Getenv: func(string) string { return "" }}, args)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return code, out.String(), errb.String()
	}
	section("0")
	if code, out, errs := sqm("start", "--config", conf, "--state-dir", state); code != 0 {
		t.Fatalf("start: status %d\n%s%s", code, out, errs)
	}
	section("5000")
	code, out, errs := sqm("restart", "--config", conf, "--state-dir", state)
	if code != 1 || !strings.Contains(errs, "ifb4wan0") {
		t.Fatalf("restart with an unusable IFB name: status %d, want 1 naming ifb4wan0\n%s%s", code, out, errs)
	}
	t.Logf("restart refused as expected: %s", strings.TrimSpace(errs))
	code, out, errs = sqm("status", "--json", "--state-dir", state, "wan0")
	if code != 0 {
		t.Fatalf("status: %d\n%s%s", code, out, errs)
	}
	var doc statusDoc
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatal(err)
	}
	d := doc.Devices[0]
	if d.Shaping == nil || d.Shaping.Options.Download != 0 || d.TreeMatches == nil || !*d.TreeMatches {
		t.Errorf("after the failed restart wan0 is not shaped as before: %s", out)
	}
	// And a restart that can work rebuilds it.
	section("0")
	if code, out, errs := sqm("restart", "--config", conf, "--state-dir", state); code != 0 || !strings.Contains(out, "wan0: applied") {
		t.Errorf("restart: status %d, want 0 and 'wan0: applied'\n%s%s", code, out, errs)
	}
	if code, out, errs := sqm("stop", "--state-dir", state); code != 0 {
		t.Errorf("stop: %d\n%s%s", code, out, errs)
	}
}
