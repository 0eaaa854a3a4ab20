package cli

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"

	"sqm/internal/config"
)

func runApply(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	env := &Env{Stdout: &out, Stderr: &errb, Getenv: func(string) string { return "" }}
	code := run(context.Background(), env, append([]string{"apply", "--state-dir", t.TempDir()}, args...))
	return code, out.String(), errb.String()
}

// TestApplyDryRunValidates: --dry-run built the plan without Validate, so
// it printed commands for input that start refuses (issue 10 item 9).
func TestApplyDryRunValidates(t *testing.T) {
	for _, tt := range []struct {
		name string
		args []string
		want string
	}{
		{"interface name Linux refuses", []string{"--iface", "eth0:1"}, `interface name "eth0:1" contains '/', ':' or white space`},
		{"mpu beyond the kernel's field", []string{"--iface", "eth0", "--mpu", "70000"}, "option tcMPU: 70000 is out of range"},
	} {
		code, out, errs := runApply(t, append(tt.args, "--down", "10mbit", "--up", "2mbit", "--dry-run")...)
		if code != 2 || out != "" || !strings.Contains(errs, tt.want) {
			t.Errorf("%s: exit %d, stdout %q, stderr %q; want exit 2, nothing printed and %q", tt.name, code, out, errs, tt.want)
		}
	}
	code, out, errs := runApply(t, "--iface", "eth0", "--down", "10mbit", "--up", "2mbit", "--overhead", "-4", "--linklayer", "ethernet", "--dry-run")
	if code != 0 || !strings.Contains(out, "tc qdisc") {
		t.Errorf("valid dry run: exit %d, stdout %q, stderr %q", code, out, errs)
	}
}

// TestApplyOverheadBoundsMatchConfig: --overhead had its own bounds
// (-1500..1500) while the config file's had only a lower one; both now
// take config's.
func TestApplyOverheadBoundsMatchConfig(t *testing.T) {
	for _, n := range []int64{config.MinOverhead - 1, config.MinOverhead, 0, config.MaxOverhead, config.MaxOverhead + 1, 1 << 40} {
		v := fmt.Sprint(n)
		code, _, errs := runApply(t, "--iface", "eth0", "--down", "10mbit", "--up", "2mbit", "--script", "simplest", "--qdisc", "fq_codel", "--linklayer", "atm", "--overhead", v, "--dry-run")
		_, cerr := config.Parse("sqm", strings.NewReader("config queue 'wan'\n\toption enabled '1'\n\toption interface 'eth0'\n\toption script 'simplest'\n\toption overhead '"+v+"'\n"))
		if flagOK, fileOK := code == 0, cerr == nil; flagOK != fileOK {
			t.Errorf("overhead %s: flag accepted %v (%s), config file accepted %v (%v)", v, flagOK, strings.TrimSpace(errs), fileOK, cerr)
		}
	}
}

// TestRateFlagsRefuseBareNumbers is issue 23 item 9: `sqm apply --down
// 90000` shaped at 90 kbit/s (tc's bare number is bit/s) while the config
// file's 90000 means kbit/s. Every rate flag now refuses a bare number
// other than 0, naming both spellings; a number with a unit, and 0, still
// work.
func TestRateFlagsRefuseBareNumbers(t *testing.T) {
	base := []string{"--iface", "eth0", "--script", "simplest", "--qdisc", "fq_codel", "--dry-run"}
	for _, tt := range []struct {
		down, up string
		want     string // "" = accepted
	}{
		{"90000", "10mbit", "--down 90000 has no unit: write 90000kbit for kbit/s (as the config file's '90000' means) or 90000bit for bit/s (as tc reads a bare number)"},
		{"90mbit", "18000", "--up 18000 has no unit"},
		{"1.5", "1mbit", "--down 1.5 has no unit"},
		{"9e4", "1mbit", "--down 9e4 has no unit"},
		{"90000kbit", "0", ""},
		{"90mbit", "18mbit", ""},
		{"0", "18000kbit", ""},
	} {
		code, out, errs := runApply(t, append(base, "--down", tt.down, "--up", tt.up)...)
		switch {
		case tt.want == "" && code != 0:
			t.Errorf("--down %s --up %s: exit %d, %s", tt.down, tt.up, code, errs)
		case tt.want != "" && (code != 2 || !strings.Contains(errs, tt.want) || out != ""):
			t.Errorf("--down %s --up %s: exit %d, stdout %q, stderr %q; want exit 2 and %q", tt.down, tt.up, code, out, errs, tt.want)
		}
	}
	// The rate really is what the unit says.
	if _, out, _ := runApply(t, append(base, "--down", "90000kbit", "--up", "0")...); !strings.Contains(out, "rate 90000kbit ceil 90000kbit") {
		t.Errorf("--down 90000kbit did not plan 90 Mbit/s:\n%s", out)
	}
	// sqm lab's rate flags follow the same rule.
	for _, f := range []string{"--down", "--up", "--shape-down", "--shape-up"} {
		var o, e bytes.Buffer
		code := run(context.Background(), &Env{Stdout: &o, Stderr: &e, Getenv: func(string) string { return "" }}, []string{"lab", f, "20000"})
		if code != 2 || !strings.Contains(e.String(), f+" 20000 has no unit") {
			t.Errorf("sqm lab %s 20000: exit %d, stderr %q", f, code, e.String())
		}
	}
}
