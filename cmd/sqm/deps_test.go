package main

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// A rule keeps a package (or, with a trailing "/", every package under a
// path) out of a build; why is said when it is broken.
type rule struct {
	pkg, why string
}

// routerForbidden is what the sqm package (the router build, dist/build.mk's
// SQM_ROUTER_TAGS) must never link: each of these costs hundreds of KB on
// mipsle (docs/testing.md, "Package sizes") and none is needed to shape.
var routerForbidden = []rule{
	{pkg: "net/http", why: "an HTTP client or server (~3.7 MB on mipsle with what it pulls in)"},
	{pkg: "crypto/tls", why: "TLS (~1.5 MB with x509 and the curves)"},
	{pkg: "crypto/x509", why: "certificates"},
	{pkg: "html/template", why: "templates keep every exported method reachable by reflection"},
	{pkg: "text/template", why: "templates keep every exported method reachable by reflection"},
	{pkg: "image/png", why: "raster pictures"},
	{pkg: "golang.org/x/image/", why: "fonts for raster pictures"},
	{pkg: "github.com/chromedp/", why: "the browser tests' driver"},
	{pkg: "sqm/internal/web", why: "the daemon's page is sqm-full's"},
	{pkg: "sqm/internal/httpd", why: "the page's and /metrics' HTTP server is sqm-full's"},
	{pkg: "sqm/internal/rpm", why: "the RPM test is sqm-full's"},
	{pkg: "sqm/internal/bloat", why: "the tester is sqm-full's"},
	{pkg: "sqm/internal/plot", why: "pictures are sqm-full's"},
	{pkg: "sqm/internal/tune", why: "tune is sqm-full's"},
	{pkg: "sqm/internal/lab", why: "the lab is the developer build's"},
	{pkg: "sqm/internal/vm", why: "the VM harness is the developer build's"},
	{pkg: "debug/elf", why: "ELF parsing at run time (the eBPF object is prepared at build time: internal/codelpolice/gen.go)"},
	{pkg: "regexp", why: "0.13 MB for a few line shapes (uci matches them by hand)"},
	{pkg: "text/tabwriter", why: "11 KB of mipsle text and rodata for status's two tables (internal/cli's columns prints them the same)"},
	{pkg: "math/big", why: "66 KB; crypto/rand links it (use math/rand/v2 where a value need only be unique)"},
	{pkg: "github.com/florianl/go-tc", why: "sqm encodes its tc requests itself (internal/kernel; ~0.33 MB)"},
	{pkg: "github.com/jsimonetti/rtnetlink/", why: "sqm encodes its link requests itself (internal/rtlink; ~0.2 MB)"},
	{pkg: "log/slog", why: "~90 KB on mipsle, and it links encoding/json for its JSON handler; internal/logger writes slog's text lines"},
	{pkg: "encoding/base64", why: "6 KB of mipsle code and an init building four encodings for []byte in JSON; internal/json has its own loops (held to it by FuzzBase64)"},
	{pkg: "encoding/json", why: "~0.1 MB of mipsle code on top of internal/json, which writes the same bytes with one reflect walk instead of per-type generated coders"},
	{pkg: "github.com/mdlayher/", why: "mdlayher/netlink with mdlayher/socket and golang.org/x/net/bpf; sqm has its own NETLINK_ROUTE socket (internal/netlink; 120 KB of sections on mipsle, and it links net)"},
	// A rule without a trailing "/" matches one package: net and
	// net/netip are two rules.
	{pkg: "net/netip", why: "with package unique, which its init links, 22 KB of mipsle text and 42 KB of rodata (one 64 KiB step); rtlink.RouteOut takes the address's bytes"},
	{pkg: "net", why: "the whole net package (resolver, dialer; 122 KB of sections on mipsle) for a link lookup: use rtlink.Lookup"},
}

// fullForbidden is what sqm-full (SQM_FULL_TAGS) must not link: the parts
// only a development machine can use, and what is there twice.
var fullForbidden = []rule{
	{pkg: "sqm/internal/lab", why: "the lab needs netem and veth, not a router"},
	{pkg: "sqm/internal/vm", why: "the VM harness needs qemu"},
	{pkg: "sqm/internal/netns", why: "only the lab makes namespaces"},
	{pkg: "github.com/chromedp/", why: "the browser tests' driver"},
	{pkg: "golang.org/x/net/http2", why: "net/http has HTTP/2 built in (+0.66 MB for a second copy)"},
	{pkg: "net/http", why: "the page and /metrics serve on sqm/internal/httpd (net/http costs ~3.5 MB on mipsle: it always links crypto/tls)"},
	{pkg: "crypto/tls", why: "sqm_notls: no HTTPS page and no RPM in sqm-full (~3 MB on mipsle with crypto/x509)"},
	{pkg: "github.com/jsimonetti/rtnetlink/", why: "the page's WAN route check asks the kernel through sqm/internal/rtlink"},
	{pkg: "html/template", why: "templates keep every exported method reachable by reflection"},
	{pkg: "text/template", why: "templates keep every exported method reachable by reflection"},
	{pkg: "image/png", why: "sqm-full draws SVG only (-tags sqm_nopng)"},
	{pkg: "golang.org/x/image/", why: "fonts for PNG pictures (-tags sqm_nopng)"},
	{pkg: "debug/elf", why: "ELF parsing at run time (the eBPF object is prepared at build time: internal/codelpolice/gen.go)"},
	{pkg: "encoding/json", why: "a second JSON codec beside sqm/internal/json"},
	{pkg: "log/slog", why: "a second logger beside sqm/internal/logger (and it links encoding/json)"},
}

// buildVars reads the make assignments of dist/build.mk, the file both the
// repository's Makefile and dist/openwrt/Makefile take the packages' tags
// from, so this test checks the builds that ship.
func buildVars(t *testing.T) map[string]string {
	t.Helper()
	f, err := os.Open(filepath.Join("..", "..", "dist", "build.mk"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	assign := regexp.MustCompile(`^([A-Z_]+)\s*:=\s*(.*?)\s*$`)
	vars := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if m := assign.FindStringSubmatch(sc.Text()); m != nil {
			vars[m[1]] = m[2]
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"SQM_ROUTER_TAGS", "SQM_FULL_TAGS"} {
		if vars[k] == "" {
			t.Fatalf("dist/build.mk does not set %s", k)
		}
	}
	return vars
}

// importGraph lists every package pkg links for linux/mipsle with tags,
// with its imports: `go list -deps`, which is what the linker is given.
func importGraph(t *testing.T, goTool, pkg, tags string) map[string][]string {
	t.Helper()
	cmd := exec.Command(goTool, "list", "-buildvcs=false", "-deps", "-tags", tags,
		"-f", `{{.ImportPath}} {{join .Imports " "}}`, pkg)
	cmd.Env = append(os.Environ(), "GOOS=linux", "GOARCH=mipsle", "GOMIPS=softfloat", "CGO_ENABLED=0")
	out, err := cmd.Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			t.Fatalf("go list -deps -tags %q %s: %v\n%s", tags, pkg, err, ee.Stderr)
		}
		t.Fatalf("go list: %v", err)
	}
	g := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		g[f[0]] = f[1:]
	}
	return g
}

// forbidden returns one line per rule that root's import graph g breaks,
// each with the chain of imports that brings the package in, so the
// message names the import to remove.
func forbidden(g map[string][]string, root string, rules []rule) []string {
	var bad []string
	for _, r := range rules {
		var hits []string
		for p := range g {
			if p == r.pkg || (strings.HasSuffix(r.pkg, "/") && strings.HasPrefix(p, r.pkg)) {
				hits = append(hits, p)
			}
		}
		if len(hits) == 0 {
			continue
		}
		slices.Sort(hits)
		msg := fmt.Sprintf("links %s (%s): %s", hits[0], r.why, strings.Join(importChain(g, root, hits[0]), " -> "))
		if len(hits) > 1 {
			msg += fmt.Sprintf(" (and %d more under %s)", len(hits)-1, r.pkg)
		}
		bad = append(bad, msg)
	}
	return bad
}

// importChain is a shortest import path from root to pkg in g.
func importChain(g map[string][]string, root, pkg string) []string {
	prev := map[string]string{root: ""}
	queue := []string{root}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		if p == pkg {
			var chain []string
			for ; p != ""; p = prev[p] {
				chain = append(chain, p)
			}
			slices.Reverse(chain)
			return chain
		}
		for _, q := range g[p] {
			if _, seen := prev[q]; !seen {
				prev[q] = p
				queue = append(queue, q)
			}
		}
	}
	return []string{root, "?", pkg}
}

// TestForbiddenDeps fails when a package creeps into a package's build
// that the build must not link (tailscale's deptest is the model): the
// router package sqm must stay small (no HTTP, no TLS, no tester), and
// sqm-full must not carry the developer's lab. The lists are above; the
// tags come from dist/build.mk.
func TestForbiddenDeps(t *testing.T) {
	g := goTool(t)
	vars := buildVars(t)
	for _, b := range []struct {
		name, tags string
		rules      []rule
	}{
		{"sqm", vars["SQM_ROUTER_TAGS"], routerForbidden},
		{"sqm-full", vars["SQM_FULL_TAGS"], fullForbidden},
	} {
		t.Run(b.name, func(t *testing.T) {
			graph := importGraph(t, g, "sqm/cmd/sqm", b.tags)
			for _, msg := range forbidden(graph, "sqm/cmd/sqm", b.rules) {
				t.Errorf("%s (-tags %s) %s", b.name, b.tags, msg)
			}
		})
	}
}

// TestForbiddenDepsCatches runs the check on testdata/creep, a program
// that imports the metrics HTTP handler and net/http as a command might
// by mistake: the router rules must name the page's server (httpd) with
// the import chain through sqm/internal/metrics/metricshttp, and net/http,
// crypto/tls and crypto/x509 with theirs; a program without them (this
// one's own cmd/sqm under the router tags is checked above) passes.
func TestForbiddenDepsCatches(t *testing.T) {
	g := goTool(t)
	const root = "sqm/cmd/sqm/testdata/creep"
	graph := importGraph(t, g, root, "")
	bad := forbidden(graph, root, routerForbidden)
	for _, want := range []struct{ msg, chain string }{
		{"links sqm/internal/httpd (", root + " -> sqm/internal/metrics/metricshttp -> sqm/internal/httpd"},
		{"links net/http (", root + " -> net/http"},
		{"links crypto/tls (", root + " -> net/http -> crypto/tls"},
		{"links crypto/x509 (", root + " -> net/http -> crypto/tls -> crypto/x509"},
	} {
		i := slices.IndexFunc(bad, func(s string) bool { return strings.HasPrefix(s, want.msg) })
		if i < 0 {
			t.Errorf("the check misses %q in testdata/creep; it said:\n%s", want.msg, strings.Join(bad, "\n"))
			continue
		}
		if !strings.Contains(bad[i], want.chain) {
			t.Errorf("%q does not show the import chain %s", bad[i], want.chain)
		}
	}
	if got := forbidden(map[string][]string{root: {"fmt"}, "fmt": nil}, root, routerForbidden); len(got) != 0 {
		t.Errorf("a program importing only fmt breaks rules: %v", got)
	}
}

// TestForbiddenNetIsExact: the router may link a net/... package not
// listed (net/url here) but not net itself, nor net/netip, which has a
// rule of its own, and every mdlayher package is caught by the one prefix
// rule.
func TestForbiddenNetIsExact(t *testing.T) {
	const root = "sqm/cmd/sqm"
	g := map[string][]string{root: {"net/url"}, "net/url": nil}
	if bad := forbidden(g, root, routerForbidden); len(bad) != 0 {
		t.Errorf("net/url alone breaks rules: %v", bad)
	}
	g = map[string][]string{root: {"sqm/internal/linkwatch"}, "sqm/internal/linkwatch": {"net"}, "net": {"internal/nettrace"}, "internal/nettrace": nil}
	bad := forbidden(g, root, routerForbidden)
	if len(bad) != 1 || !strings.HasPrefix(bad[0], "links net (") || !strings.Contains(bad[0], root+" -> sqm/internal/linkwatch -> net") {
		t.Errorf("importing net: %v, want one break naming net and its chain", bad)
	}
	g = map[string][]string{root: {"sqm/internal/rtlink"}, "sqm/internal/rtlink": {"net/netip"}, "net/netip": nil}
	bad = forbidden(g, root, routerForbidden)
	if len(bad) != 1 || !strings.HasPrefix(bad[0], "links net/netip (") || !strings.Contains(bad[0], root+" -> sqm/internal/rtlink -> net/netip") {
		t.Errorf("importing net/netip: %v, want one break naming net/netip and its chain", bad)
	}
	g = map[string][]string{root: {"github.com/mdlayher/socket"}, "github.com/mdlayher/socket": nil}
	if bad := forbidden(g, root, routerForbidden); len(bad) != 1 || !strings.HasPrefix(bad[0], "links github.com/mdlayher/socket (") {
		t.Errorf("importing mdlayher/socket: %v", bad)
	}
}
