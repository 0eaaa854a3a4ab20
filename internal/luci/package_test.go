package luci

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"sqm/internal/features"
)

// mkPackage is what OpenWrt's metadata scripts read of a package
// definition (include/package-dumpinfo.mk writes it, scripts/metadata.pm
// parses it).
type mkPackage struct {
	name                         string
	depends, provides, conflicts []string
	variant                      string
	defaultVariant               bool // DEFAULT_VARIANT:=1
}

// variantDefault is metadata.pm's variant_default: dumpinfo writes
// "Default-Variant:" only inside "$(if $(VARIANT),...)", so DEFAULT_VARIANT
// without a VARIANT is lost.
func (p mkPackage) variantDefault() bool { return p.variant != "" && p.defaultVariant }

// selectedBy models what another package's `+dep` selects in buildroot's
// Kconfig, as scripts/package-metadata.pl's mconf_depends does it: the
// providers of dep are the package named dep (metadata.pm unshifts it to
// the front) and then every package whose PROVIDES names dep, in the
// order they were read; those with a default variant are moved to the
// front; the first one is selected (unless another provider is already
// selected, which a fresh configuration does not have).
func selectedBy(dep string, universe []mkPackage) string {
	var providers []mkPackage
	for _, p := range universe {
		if p.name == dep {
			providers = append([]mkPackage{p}, providers...)
		} else if slices.Contains(p.provides, dep) {
			providers = append(providers, p)
		}
	}
	var order []string
	for _, p := range providers {
		if p.variantDefault() {
			order = append([]string{p.name}, order...)
		} else {
			order = append(order, p.name)
		}
	}
	if len(order) == 0 {
		return ""
	}
	return order[0]
}

// TestSelectedByModel pins the model to cases whose outcome OpenWrt shows:
// iproute2's tc-tiny (VARIANT, DEFAULT_VARIANT, PROVIDES:=tc) is what
// `+tc` pulls in, and a plain provider loses to the package it provides.
func TestSelectedByModel(t *testing.T) {
	tc := []mkPackage{
		{name: "tc-full", variant: "tcfull", provides: []string{"tc"}},
		{name: "tc-tiny", variant: "tctiny", defaultVariant: true, provides: []string{"tc"}},
		{name: "tc-bpf", variant: "tcbpf", provides: []string{"tc"}},
	}
	if got := selectedBy("tc", tc); got != "tc-tiny" {
		t.Errorf("+tc selects %s, want tc-tiny", got)
	}
	plain := []mkPackage{{name: "other", provides: []string{"dnsmasq"}}, {name: "dnsmasq"}}
	if got := selectedBy("dnsmasq", plain); got != "dnsmasq" {
		t.Errorf("+dnsmasq selects %s, want dnsmasq", got)
	}
	lost := []mkPackage{{name: "sqm-scripts"}, {name: "sqm", defaultVariant: true, provides: []string{"sqm-scripts"}}}
	if got := selectedBy("sqm-scripts", lost); got != "sqm-scripts" {
		t.Errorf("DEFAULT_VARIANT without VARIANT: +sqm-scripts selects %s, want sqm-scripts (dumpinfo drops it)", got)
	}
}

// parseMakefile reads the `define Package/NAME` blocks of an OpenWrt
// package Makefile (with `$(call Package/X)` lines expanded) and the names
// it calls BuildPackage for.
func parseMakefile(t *testing.T, mk string) (pkgs []mkPackage, built []string) {
	t.Helper()
	mk = strings.ReplaceAll(mk, "\\\n", " ")
	blocks := map[string]string{}
	var order []string
	def := regexp.MustCompile(`(?ms)^define (\S+)\n(.*?)^endef`)
	for _, m := range def.FindAllStringSubmatch(mk, -1) {
		blocks[m[1]] = m[2]
		order = append(order, m[1])
	}
	call := regexp.MustCompile(`(?m)^\$\(call (Package/[^)]+)\)\s*$`)
	assign := regexp.MustCompile(`(?m)^\s*([A-Z_]+)\s*(:=|\+=)(.*)$`)
	for _, name := range order {
		pkg, ok := strings.CutPrefix(name, "Package/")
		if !ok || strings.Contains(pkg, "/") {
			continue
		}
		body := call.ReplaceAllStringFunc(blocks[name], func(c string) string {
			inner, ok := blocks[call.FindStringSubmatch(c)[1]]
			if !ok {
				t.Errorf("%s calls %s, which is not defined", name, c)
			}
			return inner
		})
		vars := map[string]string{}
		for _, a := range assign.FindAllStringSubmatch(body, -1) {
			v := strings.TrimSpace(a[3])
			if a[2] == "+=" {
				v = strings.TrimSpace(vars[a[1]] + " " + v)
			}
			vars[a[1]] = v
		}
		pkgs = append(pkgs, mkPackage{
			name:           pkg,
			depends:        strings.Fields(vars["DEPENDS"]),
			provides:       strings.Fields(vars["PROVIDES"]),
			conflicts:      strings.Fields(vars["CONFLICTS"]),
			variant:        vars["VARIANT"],
			defaultVariant: vars["DEFAULT_VARIANT"] == "1",
		})
	}
	for _, m := range regexp.MustCompile(`\$\(eval \$\(call BuildPackage,([^)]+)\)\)`).FindAllStringSubmatch(mk, -1) {
		built = append(built, m[1])
	}
	return pkgs, built
}

// TestOpenWrtPackageLayout checks dist/openwrt/Makefile for what an image
// with luci-app-sqm needs. With PROVIDES:=sqm-scripts alone, buildroot's
// `+sqm-scripts` (luci-app-sqm's LUCI_DEPENDS) selected the real
// sqm-scripts, which CONFLICTS:=sqm-scripts then forbade next to sqm: no
// image could have both. Building an image needs the OpenWrt SDK, which
// this machine does not have; the rules are those of OpenWrt's metadata
// scripts (see selectedBy).
func TestOpenWrtPackageLayout(t *testing.T) {
	b, err := os.ReadFile("../../dist/openwrt/Makefile")
	if err != nil {
		t.Fatal(err)
	}
	ours, built := parseMakefile(t, string(b))
	if len(ours) == 0 {
		t.Fatal("no define Package/NAME blocks found")
	}
	universe := append([]mkPackage{
		{name: "sqm-scripts"}, // the packages feed's
		{name: "luci-app-sqm", depends: []string{"+sqm-scripts"}},
	}, ours...)
	defaults := 0
	for _, p := range ours {
		if !slices.Contains(built, p.name) {
			t.Errorf("Package/%s has no $(eval $(call BuildPackage,%s))", p.name, p.name)
		}
		if len(ours) > 1 && p.variant == "" {
			t.Errorf("%s: several packages from one Makefile need a VARIANT each", p.name)
		}
		if p.defaultVariant {
			defaults++
		}
		// Every sqm package owns sqm-scripts' files: it must stand in
		// for it and keep it out.
		if !slices.Contains(p.provides, "sqm-scripts") || !slices.Contains(p.conflicts, "sqm-scripts") {
			t.Errorf("%s: PROVIDES %v, CONFLICTS %v; want sqm-scripts in both", p.name, p.provides, p.conflicts)
		}
		// The kernel modules of the kinds the recipes build
		// (cake, htb, ingress + u32 + mirred into an ifb, police for
		// police/codel_police, cls_bpf for codel_police).
		for _, k := range []struct {
			typ  features.Type
			name string
		}{
			{features.TypeQdisc, "cake"}, {features.TypeQdisc, "htb"}, {features.TypeQdisc, "fq_codel"},
			{features.TypeQdisc, "ingress"}, {features.TypeClassifier, "u32"}, {features.TypeClassifier, "bpf"},
			{features.TypeAction, "mirred"}, {features.TypeAction, "police"}, {features.TypeLink, "ifb"},
		} {
			f, ok := features.Lookup(k.typ, k.name)
			if !ok {
				t.Fatalf("features has no %s %s", k.typ, k.name)
			}
			if f.OpenWrt != "" && !slices.Contains(p.depends, "+"+f.OpenWrt) {
				t.Errorf("%s: DEPENDS %v lacks +%s (%s)", p.name, p.depends, f.OpenWrt, f)
			}
		}
	}
	if defaults != 1 {
		t.Errorf("%d packages with DEFAULT_VARIANT:=1; want exactly one, the one luci-app-sqm pulls in", defaults)
	}
	got := selectedBy("sqm-scripts", universe)
	if !slices.ContainsFunc(ours, func(p mkPackage) bool { return p.name == got }) {
		t.Errorf("luci-app-sqm's +sqm-scripts selects %q in buildroot, which conflicts with sqm; want one of this Makefile's packages", got)
	}
}
