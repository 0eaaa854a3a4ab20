package luci_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"sqm/internal/clitest"
)

// hotplugConfig has a good section for eth1 and one for eth2 that parses
// but does not plan (cake's overhead range), and nothing for eth9.
const hotplugConfig = `config queue 'wan'
	option enabled '1'
	option interface 'eth1'
	option download '10000'
	option upload '5000'
	option script 'simple.qos'
	option qdisc 'fq_codel'

config queue 'lan'
	option enabled '1'
	option interface 'eth2'
	option download '10000'
	option upload '5000'
	option script 'piece_of_cake.qos'
	option qdisc 'cake'
	option linklayer 'atm'
	option overhead '-1400'
`

// TestOpenWrtHotplug runs dist/openwrt/sqm.hotplug as OpenWrt's
// hotplug-call does (sourced in a subshell of busybox ash) with the real
// `sqm plan` and stand-ins for `sqm start`, the init script and logger.
// The hook once planned the whole file first, so eth2's broken section
// kept eth1, which was fine, unshaped ("not shaping eth1: ... is broken");
// it must handle only the device that came up, by its own sections. (An
// older version ran `sqm plan ... >/dev/null 2>&1 || exit 0`, so a broken
// section left its interface unshaped with no trace and a zero exit: the
// "broken section" case keeps that from coming back.)
func TestOpenWrtHotplug(t *testing.T) {
	bb, err := exec.LookPath("busybox")
	if err != nil {
		t.Fatalf("busybox not found (%v): scripts/setup.sh installs busybox-static", err)
	}
	hook, err := filepath.Abs("../../dist/openwrt/sqm.hotplug")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, action, device string
		enabled, startRC     int
		wantRC               int
		wantCalls            []string // lines of the sqm calls log, in order
		wantLogged           string   // substring of what went to logger; "" = nothing
	}{
		{name: "good section next to a broken one", action: "ifup", device: "eth1",
			wantCalls:  []string{"plan --config CONFIG eth1", "start --config CONFIG eth1 SQM_STATE_DIR=/var/run/sqm"},
			wantLogged: "-t sqm-hotplug|eth1: applied\n"},
		{name: "broken section", action: "ifup", device: "eth2", wantRC: 1,
			wantCalls:  []string{"plan --config CONFIG eth2"},
			wantLogged: "-t sqm-hotplug -p daemon.err|not shaping eth2:\nsqm plan: CONFIG:17: queue \"lan\" option overhead: overhead -1400 is outside cake's range"},
		{name: "no section for the device", action: "ifup", device: "eth9",
			wantCalls: []string{"plan --config CONFIG eth9"}},
		{name: "start fails", action: "ifup", device: "eth1", startRC: 1, wantRC: 1,
			wantCalls:  []string{"plan --config CONFIG eth1", "start --config CONFIG eth1 SQM_STATE_DIR=/var/run/sqm"},
			wantLogged: "-t sqm-hotplug -p daemon.err|sqm start eth1 failed (exit 1):\nsqm start: apply failed\n"},
		{name: "init script disabled", action: "ifup", device: "eth1", enabled: 1},
		{name: "ifdown", action: "ifdown", device: "eth1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			calls, logged := filepath.Join(dir, "calls"), filepath.Join(dir, "logged")
			conf := filepath.Join(dir, "sqm.conf")
			if err := os.WriteFile(conf, []byte(hotplugConfig), 0o644); err != nil {
				t.Fatal(err)
			}
			write := func(name, body string) string {
				p := filepath.Join(dir, name)
				if err := os.WriteFile(p, []byte("#!/bin/sh\n"+body), 0o755); err != nil {
					t.Fatal(err)
				}
				return p
			}
			// plan is the real one (the test binary as sqm); start is
			// a stand-in: shaping is not what this test is about.
			sqm := write("sqm", `case "$1" in
plan) echo "$*" >> `+calls+`; exec "$SQM_REAL" "$@" ;;
start) echo "$* SQM_STATE_DIR=$SQM_STATE_DIR" >> `+calls+`
	[ "$SQM_START_RC" = 0 ] || { echo "sqm start: apply failed" >&2; exit "$SQM_START_RC"; }
	echo "$4: applied" ;;
*) echo "$*" >> `+calls+`; exit 2 ;;
esac
`)
			initScript := write("init", `[ "$1" = enabled ] || exit 2; exit `+string(rune('0'+tt.enabled))+"\n")
			// hotplug-call sources each hook in a subshell; logger is
			// a function because Debian's busybox would run its own
			// applet before PATH.
			runner := `logger() { { printf "%s|" "$*"; cat; } >> "$LOGGED"; }
( . "$1" )
`
			cmd := exec.Command(bb, "ash", "-c", runner, "hotplug-call", hook)
			cmd.Env = append(clitest.Env(), "PATH="+dir+":/usr/bin:/bin", "ACTION="+tt.action, "DEVICE="+tt.device,
				"SQM_HOTPLUG_BIN="+sqm, "SQM_HOTPLUG_CONFIG="+conf, "SQM_HOTPLUG_INIT="+initScript,
				"SQM_REAL="+clitest.Binary(), "SQM_START_RC="+string(rune('0'+tt.startRC)), "LOGGED="+logged)
			out, err := cmd.CombinedOutput()
			rc := 0
			if ee, ok := err.(*exec.ExitError); ok {
				rc = ee.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
			if rc != tt.wantRC {
				t.Errorf("exit %d, want %d (output %q)", rc, tt.wantRC, out)
			}
			read := func(p string) string {
				b, _ := os.ReadFile(p)
				return strings.ReplaceAll(string(b), conf, "CONFIG")
			}
			gotCalls := strings.TrimSuffix(read(calls), "\n")
			if want := strings.Join(tt.wantCalls, "\n"); gotCalls != want {
				t.Errorf("sqm calls:\n%s\nwant:\n%s", gotCalls, want)
			}
			got := read(logged)
			if (tt.wantLogged == "") != (got == "") || !strings.Contains(got, tt.wantLogged) {
				t.Errorf("logged %q; want it to contain %q", got, tt.wantLogged)
			}
		})
	}
}
