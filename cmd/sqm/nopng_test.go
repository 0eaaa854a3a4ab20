package main

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestNoPNG builds sqm with -tags sqm_nopng (sqm-full's): image/png and
// x/image are gone, and `sqm test` and `sqm tune` refuse a .png picture
// before measuring, with a usage error naming the tag.
func TestNoPNG(t *testing.T) {
	if testing.Short() {
		t.Skip("builds sqm; skipped with -short")
	}
	g := goTool(t)
	const tags = "sqm_nolab,sqm_nopng"
	graph := importGraph(t, g, "sqm/cmd/sqm", tags)
	for p := range graph {
		if p == "image/png" || strings.HasPrefix(p, "golang.org/x/image/") {
			t.Errorf("-tags %s still links %s: %s", tags, p, strings.Join(importChain(graph, "sqm/cmd/sqm", p), " -> "))
		}
	}
	if _, ok := importGraph(t, g, "sqm/cmd/sqm", "sqm_nolab")["image/png"]; !ok {
		t.Errorf("-tags sqm_nolab does not link image/png: sqm_nopng saves nothing and this test is stale")
	}
	bin := filepath.Join(t.TempDir(), "sqm")
	build := exec.Command(g, "build", "-buildvcs=false", "-tags", tags, "-o", bin, ".")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build -tags %s: %v\n%s", tags, err, out)
	}
	for _, args := range [][]string{{"test", "--plot", "x.png", "192.0.2.1"}, {"tune", "--plot", "x.png", "192.0.2.1"}} {
		var stderr strings.Builder
		cmd := exec.Command(bin, args...)
		cmd.Stderr = &stderr
		err := cmd.Run()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 2 {
			t.Errorf("sqm %s: %v; want exit status 2 (usage)", strings.Join(args, " "), err)
		}
		want := "--plot x.png: use a file name ending in .svg (PNG is not in this build: -tags sqm_nopng)"
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("sqm %s says %q; want %q", strings.Join(args, " "), stderr.String(), want)
		}
	}
}
