package main

import (
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// openwrtStub stands in for the parts of an OpenWrt buildroot that
// dist/openwrt/Makefile includes: BuildPackage prints each package's
// metadata, the Go flags golang-package.mk would be given, and the
// install recipe with $(1) set to /pkg, one `name: field=value` line each.
var openwrtStub = map[string]string{
	"rules.mk": ".PHONY: stub\nstub: ;@:\n",
	"include/package.mk": `INSTALL_DIR:=install -d
INSTALL_BIN:=install -m0755
INSTALL_DATA:=install -m0644
INSTALL_CONF:=install -m0600
GO_PKG_BUILD_BIN_DIR:=/go/bin
define BuildPackage
$(eval VARIANT:=)$(eval DEFAULT_VARIANT:=)$(eval TITLE:=)$(eval PROVIDES:=)$(eval CONFLICTS:=)$(eval DEPENDS:=)
$(eval $(Package/$(1)))
$(info $(1): VARIANT=$(VARIANT))
$(info $(1): DEFAULT_VARIANT=$(DEFAULT_VARIANT))
$(info $(1): TITLE=$(TITLE))
$(info $(1): PROVIDES=$(strip $(PROVIDES)))
$(info $(1): CONFLICTS=$(strip $(CONFLICTS)))
$(info $(1): DEPENDS=$(strip $(DEPENDS)))
$(info $(1): CONFFILES=$(strip $(Package/$(1)/conffiles)))
$(info $(1): INSTALL=$(strip $(subst $(newline), ; ,$(call Package/$(1)/install,/pkg))))
$(info $(1): TAGS=$(GO_PKG_TAGS))
$(info $(1): GCFLAGS=$(GO_PKG_GCFLAGS))
$(info $(1): LDFLAGS=$(GO_PKG_LDFLAGS))
$(info $(1): BUILD_DIR=$(PKG_BUILD_DIR))
endef
define newline


endef
`,
	"feeds/packages/lang/golang/golang-package.mk": "",
}

// openwrtPackages evaluates dist/openwrt/Makefile for one BUILD_VARIANT,
// as the buildroot does once per variant, and returns package -> field ->
// value.
func openwrtPackages(t *testing.T, variant string) map[string]map[string]string {
	t.Helper()
	top := t.TempDir()
	for name, text := range openwrtStub {
		p := filepath.Join(top, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command("make", "-s", "-C", filepath.Join("..", "..", "dist", "openwrt"),
		"TOPDIR="+top, "INCLUDE_DIR="+filepath.Join(top, "include"), "BUILD_DIR=/build", "BUILD_VARIANT="+variant)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("make -C dist/openwrt BUILD_VARIANT=%s: %v\n%s", variant, err, out)
	}
	line := regexp.MustCompile(`^([a-z-]+): ([A-Z_]+)=(.*)$`)
	pkgs := map[string]map[string]string{}
	for _, l := range strings.Split(string(out), "\n") {
		if m := line.FindStringSubmatch(l); m != nil {
			if pkgs[m[1]] == nil {
				pkgs[m[1]] = map[string]string{}
			}
			pkgs[m[1]][m[2]] = m[3]
		}
	}
	return pkgs
}

// TestOpenWrtPackages checks dist/openwrt/Makefile without an SDK, on stub
// includes: it defines sqm (VARIANT router) and sqm-full (VARIANT full);
// each variant builds with dist/build.mk's tags and flags (the ones `make
// sizes` checks) in its own directory; sqm-full is never the default
// variant, installs exactly sqm's files and conffiles, keeps sqm's
// dependencies and sqm-scripts PROVIDES/CONFLICTS, and provides and
// conflicts with sqm, so only one of the two can be installed.
func TestOpenWrtPackages(t *testing.T) {
	if _, err := exec.LookPath("make"); err != nil {
		t.Skip("no make in PATH")
	}
	vars := buildVars(t)
	for _, tt := range []struct {
		variant, pkg, tags, gcflags string
	}{
		{"router", "sqm", vars["SQM_ROUTER_TAGS"], vars["SQM_ROUTER_GCFLAGS"]},
		{"full", "sqm-full", vars["SQM_FULL_TAGS"], vars["SQM_FULL_GCFLAGS"]},
	} {
		t.Run(tt.variant, func(t *testing.T) {
			pkgs := openwrtPackages(t, tt.variant)
			sqm, full := pkgs["sqm"], pkgs["sqm-full"]
			if sqm == nil || full == nil {
				t.Fatalf("packages defined: %v; want sqm and sqm-full", pkgs)
			}
			if sqm["VARIANT"] != "router" || full["VARIANT"] != "full" {
				t.Errorf("VARIANT sqm=%q sqm-full=%q; want router and full", sqm["VARIANT"], full["VARIANT"])
			}
			if full["DEFAULT_VARIANT"] != "" {
				t.Errorf("sqm-full has DEFAULT_VARIANT=%q: luci-app-sqm's +sqm-scripts would pull in the big package", full["DEFAULT_VARIANT"])
			}
			got := pkgs[tt.pkg]
			if got["TAGS"] != tt.tags || got["GCFLAGS"] != tt.gcflags || got["LDFLAGS"] != vars["SQM_GO_LDFLAGS"] {
				t.Errorf("BUILD_VARIANT=%s builds with tags %q gcflags %q ldflags %q; dist/build.mk says %q %q %q",
					tt.variant, got["TAGS"], got["GCFLAGS"], got["LDFLAGS"], tt.tags, tt.gcflags, vars["SQM_GO_LDFLAGS"])
			}
			if !strings.Contains(got["BUILD_DIR"], tt.variant) {
				t.Errorf("BUILD_VARIANT=%s builds in %q: the variants must not share a build directory", tt.variant, got["BUILD_DIR"])
			}
			for _, f := range []string{"INSTALL", "CONFFILES", "DEPENDS"} {
				if sqm[f] == "" || full[f] != sqm[f] {
					t.Errorf("%s: sqm %q, sqm-full %q; want the same, not empty", f, sqm[f], full[f])
				}
			}
			for _, f := range []string{"PROVIDES", "CONFLICTS"} {
				want := strings.TrimSpace(sqm[f] + " sqm")
				if full[f] != want {
					t.Errorf("sqm-full %s=%q; want %q (sqm's, and sqm)", f, full[f], want)
				}
			}
		})
	}
}

// TestPackageTagsKnown: every tag of dist/build.mk's packages must be one
// a //go:build line in this module uses; a misspelt tag would silently
// build more into a router's package than its tags say.
func TestPackageTagsKnown(t *testing.T) {
	vars := buildVars(t)
	used := map[string]bool{}
	word := regexp.MustCompile(`[A-Za-z0-9_.]+`)
	err := filepath.WalkDir(filepath.Join("..", ".."), func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".") && path != filepath.Join("..", "..")) {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, line := range strings.Split(string(b), "\n") {
			if c, ok := strings.CutPrefix(line, "//go:build "); ok {
				for _, w := range word.FindAllString(c, -1) {
					used[w] = true
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"SQM_ROUTER_TAGS", "SQM_FULL_TAGS"} {
		for _, tag := range strings.FieldsFunc(vars[k], func(r rune) bool { return r == ',' || r == ' ' }) {
			if !used[tag] {
				t.Errorf("dist/build.mk %s names %q, which no //go:build line uses", k, tag)
			}
		}
	}
}
