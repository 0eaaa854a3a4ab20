package cli

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestOpenWrtHotplug runs dist/openwrt/sqm.hotplug with fake sqm, init
// script and logger. The hook once ran `sqm plan ... >/dev/null 2>&1 ||
// exit 0`, so a broken /etc/config/sqm left the interface unshaped with no
// trace and a zero exit; it must be logged and exit non-zero.
func TestOpenWrtHotplug(t *testing.T) {
	// /bin/sh, not busybox sh: Debian's busybox runs its own logger applet
	// before looking at PATH, so the fake logger would not be called. The
	// hook uses only POSIX sh, which OpenWrt's ash runs the same way.
	shell, args := "/bin/sh", []string(nil)
	hook, err := filepath.Abs("../../dist/openwrt/sqm.hotplug")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name                  string
		action, enabled       string
		planAll, planDev      int
		start                 int
		wantRC                int
		wantCalls, wantLogged string // substrings; "" = none at all
	}{
		{"broken config", "ifup", "0", 1, 0, 0, 1,
			"plan --config CONFIG\n", "-t sqm-hotplug -p daemon.err|not shaping eth1: CONFIG is broken:\nCONFIG:3: queue \"wan\": option download: bad value\n"},
		{"no section for the device", "ifup", "0", 0, 1, 0, 0,
			"plan --config CONFIG\nplan --config CONFIG eth1\n", ""},
		{"start fails", "ifup", "0", 0, 0, 1, 1,
			"start --config CONFIG eth1\n", "-t sqm-hotplug -p daemon.err|sqm start eth1 failed (exit 1):\nsqm start: apply failed\n"},
		{"started", "ifup", "0", 0, 0, 0, 0,
			"start --config CONFIG eth1\n", "-t sqm-hotplug|eth1: applied (section \"wan\")\n"},
		{"init script disabled", "ifup", "1", 1, 1, 1, 0, "", ""},
		{"ifdown", "ifdown", "0", 1, 1, 1, 0, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			calls, logged := filepath.Join(dir, "calls"), filepath.Join(dir, "logged")
			conf := filepath.Join(dir, "sqm.conf")
			write := func(name, body string) string {
				p := filepath.Join(dir, name)
				if err := os.WriteFile(p, []byte("#!/bin/sh\n"+body), 0o755); err != nil {
					t.Fatal(err)
				}
				return p
			}
			sqm := write("sqm", `echo "$*" >> `+calls+`
case "$1 $#" in
"plan 3") [ `+itoa(tt.planAll)+` = 0 ] || { echo "$3:3: queue \"wan\": option download: bad value" >&2; exit 1; } ;;
"plan 4") exit `+itoa(tt.planDev)+` ;;
start*) [ `+itoa(tt.start)+` = 0 ] || { echo "sqm start: apply failed" >&2; exit 1; }; echo "$4: applied (section \"wan\")" ;;
esac
`)
			initScript := write("init", "exit "+tt.enabled+"\n")
			write("logger", `{ printf "%s|" "$*"; cat; } >> `+logged+"\n")
			cmd := exec.Command(shell, append(args, hook)...)
			cmd.Env = []string{"PATH=" + dir + ":/usr/bin:/bin", "ACTION=" + tt.action, "DEVICE=eth1",
				"SQM_HOTPLUG_BIN=" + sqm, "SQM_HOTPLUG_CONFIG=" + conf, "SQM_HOTPLUG_INIT=" + initScript}
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
			for _, c := range []struct{ file, want string }{{calls, tt.wantCalls}, {logged, tt.wantLogged}} {
				got := read(c.file)
				if (c.want == "") != (got == "") || !strings.Contains(got, c.want) {
					t.Errorf("%s = %q; want it to contain %q", filepath.Base(c.file), got, c.want)
				}
			}
		})
	}
}

func itoa(n int) string { return string(rune('0' + n)) }
