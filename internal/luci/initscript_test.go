package luci

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestInitScript sources dist/openwrt/sqm.init with procd's helpers
// stubbed to print their calls, as /etc/rc.common would call it. What
// procd does with the calls (run the reload on a config.change event for
// package sqm, deliver the signal) needs OpenWrt; the daemon's side of the
// reload (SIGHUP -> config reloaded, available_qdiscs refreshed) is
// TestDaemonRefreshesAvailableQdiscs.
func TestInitScript(t *testing.T) {
	script, err := filepath.Abs("../../dist/openwrt/sqm.init")
	if err != nil {
		t.Fatal(err)
	}
	stubs := `
procd_open_instance() { echo "open_instance $*"; }
procd_close_instance() { echo "close_instance"; }
procd_set_param() { echo "set_param $*"; }
procd_add_reload_trigger() { echo "reload_trigger $*"; }
procd_send_signal() { echo "send_signal $*"; }
. "$1"
"$2"
`
	run := func(fn string) string {
		t.Helper()
		out, err := exec.Command("/bin/sh", "-c", stubs, "sh", script, fn).CombinedOutput()
		if err != nil {
			t.Fatalf("%s: %v\n%s", fn, err, out)
		}
		return string(out)
	}
	for _, c := range []struct {
		fn   string
		want []string
	}{
		// uci commit sqm (LuCI's Save & Apply) raises config.change
		// for package sqm; procd then runs the init script's reload.
		{"service_triggers", []string{"reload_trigger sqm\n"}},
		// The reload is sqm's: SIGHUP makes the daemon re-read the
		// config, re-apply what changed and re-probe the qdiscs.
		{"reload_service", []string{"send_signal sqm * HUP\n"}},
		{"start_service", []string{
			"open_instance \n",
			"set_param command /usr/sbin/sqm daemon --config /etc/config/sqm",
			// The daemon keeps available_qdiscs in its state
			// directory, which must be where luci-app-sqm looks.
			"set_param env SQM_STATE_DIR=" + filepath.Dir(QdiscDir) + "\n",
			"close_instance\n",
		}},
	} {
		out := run(c.fn)
		for _, w := range c.want {
			if !strings.Contains(out, w) {
				t.Errorf("%s: output lacks %q:\n%s", c.fn, w, out)
			}
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
	// The router build's tags must be ones the code knows: a misspelt tag
	// would silently build the full binary into a router image.
	tags := ""
	for _, line := range strings.Split(mk, "\n") {
		if v, ok := strings.CutPrefix(line, "GO_PKG_TAGS:="); ok {
			tags = v
		}
	}
	if tags == "" {
		t.Errorf("dist/openwrt/Makefile sets no GO_PKG_TAGS (the router build)")
	}
	for _, tag := range strings.FieldsFunc(tags, func(r rune) bool { return r == ',' || r == ' ' }) {
		if !buildTagUsed(t, "../../internal/cli", tag) {
			t.Errorf("GO_PKG_TAGS names %q, which no internal/cli file's build constraint uses", tag)
		}
	}
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
