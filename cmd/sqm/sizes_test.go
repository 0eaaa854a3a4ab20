package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// runSizes runs scripts/sizes.sh, as `make router` does, on main for
// linux/mipsle softfloat with the router package's budget set to budget,
// and returns its exit status, output and the binary's size.
func runSizes(t *testing.T, goTool, main, budget string) (code int, stdout, stderr string, size int64) {
	t.Helper()
	vars := buildVars(t)
	out := t.TempDir()
	cmd := exec.Command("sh", "scripts/sizes.sh")
	cmd.Dir = filepath.Join("..", "..")
	cmd.Env = append(os.Environ(), "GO="+goTool, "MAIN="+main, "OUT="+out,
		"SIZE_TARGETS=linux/mipsle/softfloat", "BUILDS=router", "ROUTER_BUDGET="+budget,
		"ROUTER_TAGS="+vars["SQM_ROUTER_TAGS"], "ROUTER_GCFLAGS="+vars["SQM_ROUTER_GCFLAGS"],
		"LDFLAGS="+vars["SQM_GO_LDFLAGS"])
	var o, e strings.Builder
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		code = ee.ExitCode()
	default:
		t.Fatalf("scripts/sizes.sh: %v", err)
	}
	if fi, err := os.Stat(filepath.Join(out, "sqm-linux-mipsle-softfloat-sqm")); err == nil {
		size = fi.Size()
	}
	return code, o.String(), e.String(), size
}

// TestSizesCheck shows that `make sizes` fails on a build over its budget:
// with a 3 MB budget, an empty program (1.4 MB on mipsle) passes and
// testdata/creep, which imports net/http (and the metrics handler)
// (6.6 MB), fails with exit 1, naming the target, the package and the
// excess in bytes; a budget that is not a number is refused.
func TestSizesCheck(t *testing.T) {
	if testing.Short() {
		t.Skip("builds two mipsle binaries; skipped with -short")
	}
	g := goTool(t)
	const budget = 3000000

	code, stdout, stderr, size := runSizes(t, g, "./cmd/sqm/testdata/light", fmt.Sprint(budget))
	if code != 0 || !strings.Contains(stdout, "every package within its budget") {
		t.Errorf("an empty program (%d bytes) under a %d-byte budget: exit %d\n%s%s", size, budget, code, stdout, stderr)
	}
	if size == 0 || size > budget {
		t.Fatalf("the empty program is %d bytes: the test needs it under %d", size, budget)
	}

	code, stdout, stderr, size = runSizes(t, g, "./cmd/sqm/testdata/creep", fmt.Sprint(budget))
	if size <= budget {
		t.Fatalf("testdata/creep is %d bytes: the test needs it over %d", size, budget)
	}
	want := fmt.Sprintf("sizes: over budget: linux/mipsle/softfloat sqm: %d bytes, %d over its budget of %d\n", size, size-budget, budget)
	if code != 1 || !strings.Contains(stderr, want) {
		t.Errorf("testdata/creep (%d bytes) under a %d-byte budget: exit %d; want 1 and %q\nstdout:\n%s\nstderr:\n%s", size, budget, code, want, stdout, stderr)
	}
	if !strings.Contains(stdout, fmt.Sprintf(" %d! ", size)) {
		t.Errorf("the table does not mark the size over budget with !:\n%s", stdout)
	}

	code, _, stderr, _ = runSizes(t, g, "./cmd/sqm/testdata/light", "3.5MB")
	if code != 2 || !strings.Contains(stderr, "sqm budget '3.5MB' is not a number of bytes") {
		t.Errorf("budget 3.5MB: exit %d, %q; want exit 2 and an error", code, stderr)
	}
}
