package luci

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// busybox finds the busybox that scripts/setup.sh installs
// (busybox-static): OpenWrt's shell is busybox ash, and the dist scripts
// must run under it, not only under Debian's dash.
func busybox(t *testing.T) string {
	t.Helper()
	bb, err := exec.LookPath("busybox")
	if err != nil {
		t.Fatalf("busybox not found (%v): scripts/setup.sh installs busybox-static", err)
	}
	if out, err := exec.Command(bb, "ash", "-c", "echo ok").CombinedOutput(); err != nil || string(out) != "ok\n" {
		t.Fatalf("busybox ash does not run: %v %q", err, out)
	}
	return bb
}

// initFake is a directory with procd's state and the log of
// testdata/rc.common, and stand-ins for ubus, jsonfilter and sqm.
type initFake struct {
	t   *testing.T
	dir string
}

// sqmScript is the fake sqm: it logs its arguments and environment, and
// `sqm qdiscs` writes one qdisc into the list (or fails when FAKE/qdiscs-fail
// exists).
const sqmScript = `#!/bin/sh
echo "sqm $* SQM_STATE_DIR=$SQM_STATE_DIR" >> "$FAKE/log"
if [ "$1" = qdiscs ]; then
	[ ! -e "$FAKE/qdiscs-fail" ] || { echo "probe failed" >&2; exit 1; }
	mkdir -p "$SQM_STATE_DIR/available_qdiscs" && : > "$SQM_STATE_DIR/available_qdiscs/cake"
fi
`

// ubus answers "call service list" from procd's state, as procd does:
// an instance with "running": true or false, or no service at all.
const ubusScript = `#!/bin/sh
echo "ubus $*" >> "$FAKE/log"
[ "$1 $2 $3 $4" = 'call service list {"name":"sqm"}' ] || { echo "ubus stand-in: unexpected call: $*" >&2; exit 2; }
case "$(cat "$FAKE/instance" 2>/dev/null)" in
running) echo '{ "sqm": { "instances": { "instance1": { "running": true, "pid": 42 } } } }' ;;
dead) echo '{ "sqm": { "instances": { "instance1": { "running": false, "exit_code": 1 } } } }' ;;
*) echo '{ }' ;;
esac
`

// jsonfilter knows only the one expression the init script asks.
const jsonfilterScript = `#!/bin/sh
[ "$*" = '-l 1 -e @.sqm.instances[*].running' ] || { echo "jsonfilter stand-in: unexpected: $*" >&2; exit 2; }
in=$(cat)
case "$in" in
*'"running": true'*) echo true ;;
*'"running": false'*) echo false ;;
esac
`

func newInitFake(t *testing.T, instance string) *initFake {
	t.Helper()
	f := &initFake{t: t, dir: t.TempDir()}
	bin := filepath.Join(f.dir, "bin")
	if err := os.Mkdir(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, body := range map[string]string{"sqm": sqmScript, "ubus": ubusScript, "jsonfilter": jsonfilterScript} {
		if err := os.WriteFile(filepath.Join(bin, name), []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if instance != "" {
		f.write("instance", instance+"\n")
	}
	return f
}

func (f *initFake) write(name, body string) {
	f.t.Helper()
	if err := os.WriteFile(filepath.Join(f.dir, name), []byte(body), 0o644); err != nil {
		f.t.Fatal(err)
	}
}

func (f *initFake) read(name string) string {
	b, _ := os.ReadFile(filepath.Join(f.dir, name))
	return strings.ReplaceAll(string(b), f.dir, "FAKE")
}

// run runs `/etc/init.d/sqm ACTION` as OpenWrt does (/bin/sh /etc/rc.common
// /etc/init.d/sqm ACTION), with busybox ash and the stand-in rc.common.
func (f *initFake) run(action string) string {
	f.t.Helper()
	script, err := filepath.Abs("../../dist/openwrt/sqm.init")
	if err != nil {
		f.t.Fatal(err)
	}
	cmd := exec.Command(busybox(f.t), "ash", "testdata/rc.common", script, action)
	cmd.Env = []string{"PATH=" + filepath.Join(f.dir, "bin") + ":/usr/bin:/bin", "FAKE=" + f.dir}
	if out, err := cmd.CombinedOutput(); err != nil {
		f.t.Fatalf("%s: %v\n%s\nlog:\n%s", action, err, out, f.read("log"))
	}
	return f.read("log")
}

// TestInitScript runs dist/openwrt/sqm.init's start, stop, reload and
// triggers under busybox ash against a stand-in procd (testdata/rc.common,
// ubus, jsonfilter). reload once only sent SIGHUP, so when the daemon had
// died (a crash, procd giving up after its respawns, a kill), LuCI's Save
// & Apply did nothing and the WAN stayed unshaped; and start returned
// before anything had written available_qdiscs, so LuCI's "Enable SQM"
// button reloaded into its "service seems to be disabled" banner. What
// procd itself does with the calls needs OpenWrt; the daemon's side of a
// reload (SIGHUP -> config reloaded, available_qdiscs refreshed) is
// TestDaemonRefreshesAvailableQdiscs.
func TestInitScript(t *testing.T) {
	for _, c := range []struct {
		name, instance, action string
		qdiscsFail             bool
		want, not              []string // in order; must not appear
		after                  string   // procd's instance afterwards
	}{
		{name: "reload signals a running daemon", instance: "running", action: "reload",
			want: []string{"ubus call service list", "send_signal sqm * HUP", "procd: HUP delivered"},
			not:  []string{"open_instance"}, after: "running"},
		{name: "reload starts a daemon that died", instance: "dead", action: "reload",
			want: []string{"sqm qdiscs SQM_STATE_DIR=FAKE/state", "open_instance", "procd: instance started"},
			not:  []string{"send_signal"}, after: "running"},
		{name: "reload starts a daemon that was stopped", action: "reload",
			want: []string{"open_instance", "procd: instance started"}, not: []string{"send_signal"}, after: "running"},
		{name: "start writes the qdisc list, then starts the daemon", action: "start",
			want: []string{
				"sqm qdiscs SQM_STATE_DIR=FAKE/state",
				"open_instance",
				"set_param command FAKE/bin/sqm daemon --config /etc/config/sqm --stop-on-exit",
				// The daemon keeps available_qdiscs in its state
				// directory, which must be where luci-app-sqm looks
				// (the stand-in moves it; TestInitScriptPaths checks
				// the real one).
				"set_param env SQM_STATE_DIR=FAKE/state",
				"set_param respawn",
				"close_instance",
				"procd: instance started",
			}, after: "running"},
		{name: "start with a failing probe still starts the daemon", action: "start", qdiscsFail: true,
			want:  []string{"sqm qdiscs", "logger -t sqm -p daemon.warn | sqm: could not write FAKE/state/available_qdiscs", "procd: instance started"},
			after: "running"},
		{name: "start of a running daemon leaves it alone", instance: "running", action: "start",
			want: []string{"procd: instance unchanged, left running"}, after: "running"},
		{name: "stop", instance: "running", action: "stop", want: []string{"procd: instance stopped"}},
		// uci commit sqm (LuCI's Save & Apply) raises config.change
		// for package sqm; procd then runs the init script's reload.
		{name: "triggers", action: "service_triggers", want: []string{"reload_trigger sqm"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := newInitFake(t, c.instance)
			if c.qdiscsFail {
				f.write("qdiscs-fail", "")
			}
			log := f.run(c.action)
			rest := log
			for _, w := range c.want {
				i := strings.Index(rest, w)
				if i < 0 {
					t.Fatalf("log lacks %q (after the earlier lines):\n%s", w, log)
				}
				rest = rest[i+len(w):]
			}
			for _, n := range c.not {
				if strings.Contains(log, n) {
					t.Errorf("log has %q:\n%s", n, log)
				}
			}
			if got := strings.TrimSpace(f.read("instance")); got != c.after {
				t.Errorf("procd's instance afterwards %q, want %q\nlog:\n%s", got, c.after, log)
			}
			if strings.Contains(log, "open_instance") && !c.qdiscsFail {
				// The list is there before procd has the daemon.
				if _, err := os.Stat(filepath.Join(f.dir, "state/available_qdiscs/cake")); err != nil {
					t.Errorf("start left no qdisc list: %v", err)
				}
			}
		})
	}
}

// TestInitScriptPaths: the paths the stand-in replaces are the ones
// luci-app-sqm and the package use.
func TestInitScriptPaths(t *testing.T) {
	b, err := os.ReadFile("../../dist/openwrt/sqm.init")
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{"\nPROG=/usr/sbin/sqm\n", "\nSTATE_DIR=" + filepath.Dir(QdiscDir) + "\n", "#!/bin/sh /etc/rc.common\n"} {
		if !strings.Contains(string(b), w) {
			t.Errorf("sqm.init lacks %q", w)
		}
	}
}

// TestOpenWrtPackage checks the package definition for what luci-app-sqm
// and opkg need of it; building it needs the OpenWrt SDK, which this
// machine does not have.
func TestOpenWrtPackage(t *testing.T) {
	b, err := os.ReadFile("../../dist/openwrt/Makefile")
	if err != nil {
		t.Fatal(err)
	}
	mk := string(b)
	for _, want := range []string{
		"PROVIDES:=sqm-scripts\n", // luci-app-sqm: LUCI_DEPENDS:=+sqm-scripts
		"CONFLICTS:=sqm-scripts\n",
		"GO_PKG_BUILD_PKG:=sqm/cmd/sqm\n",
		"$(INSTALL_BIN) $(GO_PKG_BUILD_BIN_DIR)/sqm $(1)/usr/sbin/sqm\n",
		"$(INSTALL_BIN) ./sqm.init $(1)/etc/init.d/sqm\n",
		"$(INSTALL_DATA) ./sqm.hotplug $(1)/etc/hotplug.d/iface/11-sqm\n",
		"$(INSTALL_CONF) ./sqm.config $(1)/etc/config/sqm\n",
		"$(INSTALL_DATA) ./recipes/*.qos ./recipes/*.qos.help $(1)/usr/lib/sqm/\n",
		"/etc/config/sqm\nendef", // conffiles: an edited config survives upgrades
		"$(eval $(call BuildPackage,sqm))",
	} {
		if !strings.Contains(mk, want) {
			t.Errorf("dist/openwrt/Makefile lacks %q", want)
		}
	}
	// The packages' tags are dist/build.mk's, checked against the code by
	// cmd/sqm's TestPackageTagsKnown and TestOpenWrtPackages.
	// The module path it builds must be go.mod's.
	gomod, err := os.ReadFile("../../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(gomod), "module sqm\n") || !strings.Contains(mk, "GO_PKG:=sqm\n") {
		t.Errorf("GO_PKG does not match go.mod's module line")
	}
	for _, f := range []string{"sqm.init", "sqm.hotplug", "sqm.config"} {
		if _, err := os.Stat(filepath.Join("../../dist/openwrt", f)); err != nil {
			t.Errorf("the package installs %s: %v", f, err)
		}
	}
	// QdiscDir and RecipeDir are luci-app-sqm's paths.
	if QdiscDir != "/var/run/sqm/available_qdiscs" || RecipeDir != "/usr/lib/sqm" {
		t.Errorf("QdiscDir %s, RecipeDir %s: not where luci-app-sqm reads", QdiscDir, RecipeDir)
	}
}

// buildTagUsed reports whether a //go:build line of a Go file in dir names tag.
func buildTagUsed(t *testing.T, dir, tag string) bool {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no Go files in %s: %v", dir, err)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(string(b), "\n") {
			if c, ok := strings.CutPrefix(line, "//go:build "); ok {
				for _, w := range strings.FieldsFunc(c, func(r rune) bool { return strings.ContainsRune("!&|() ", r) }) {
					if w == tag {
						return true
					}
				}
			}
		}
	}
	return false
}
