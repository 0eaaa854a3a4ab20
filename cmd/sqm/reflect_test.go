package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"
)

// reflectMethodSym matches the reflect functions that look a method up at
// run time. When one of them is reachable, the linker cannot tell which
// methods are called and keeps every exported method of every type that
// is converted to an interface: +1.6 MB on mipsle when the issue measured
// it. text/template and html/template's Execute do it, and so may a
// dependency; TestForbiddenDeps catches the templates, this catches the
// rest.
var reflectMethodSym = regexp.MustCompile(`(?m) T (reflect\.Value\.MethodByName|reflect\.Value\.Method|reflect\.\(\*rtype\)\.MethodByName|reflect\.\(\*rtype\)\.Method)$`)

// reflectMethods builds pkg with tags (not stripped) and returns the
// run-time method lookups it links.
func reflectMethods(t *testing.T, goTool, pkg, tags string) []string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "bin")
	build := exec.Command(goTool, "build", "-buildvcs=false", "-trimpath", "-tags", tags, "-o", bin, pkg)
	build.Dir = filepath.Join("..", "..")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build -tags %q %s: %v\n%s", tags, pkg, err, out)
	}
	out, err := exec.Command(goTool, "tool", "nm", bin).Output()
	if err != nil {
		t.Fatalf("go tool nm: %v", err)
	}
	var syms []string
	for _, m := range reflectMethodSym.FindAllStringSubmatch(string(out), -1) {
		syms = append(syms, m[1])
	}
	return syms
}

// TestNoReflectMethod keeps the linker's dead-code removal working in both
// packages: neither may link a run-time method lookup. testdata/reflectcreep
// (a text/template Execute) shows the check sees one.
func TestNoReflectMethod(t *testing.T) {
	if testing.Short() {
		t.Skip("builds sqm twice; skipped with -short")
	}
	g := goTool(t)
	vars := buildVars(t)
	if got := reflectMethods(t, g, "./cmd/sqm/testdata/reflectcreep", ""); len(got) == 0 {
		t.Errorf("testdata/reflectcreep links no run-time method lookup the check sees: the check is broken")
	}
	for _, b := range []struct{ name, tags string }{
		{"sqm", vars["SQM_ROUTER_TAGS"]},
		{"sqm-full", vars["SQM_FULL_TAGS"]},
	} {
		if got := reflectMethods(t, g, "./cmd/sqm", b.tags); len(got) != 0 {
			t.Errorf("%s (-tags %s) links %v: every exported method of every reachable type is kept; find the caller with go build -ldflags=-dumpdep", b.name, b.tags, got)
		}
	}
}
