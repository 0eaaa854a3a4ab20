package httpd

import (
	"os/exec"
	"strings"
	"testing"
)

// TestDeps: the page and /metrics, on this server, link no net/http in
// any build, and no crypto/tls in one with -tags sqm_notls (sqm-full's):
// together they are what made sqm-full 3.5 MB bigger on mipsle.
func TestDeps(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go command to list packages with")
	}
	pkgs := []string{"sqm/internal/httpd", "sqm/internal/web", "sqm/internal/metrics/metricshttp"}
	for _, tc := range []struct {
		tags      string
		forbidden []string
	}{
		{"", []string{"net/http"}},
		{"sqm_notls", []string{"net/http", "crypto/tls", "crypto/x509"}},
	} {
		args := append([]string{"list", "-deps", "-tags", tc.tags}, pkgs...)
		out, err := exec.Command("go", args...).CombinedOutput()
		if err != nil {
			t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		deps := map[string]bool{}
		for _, p := range strings.Fields(string(out)) {
			deps[p] = true
		}
		if !deps["sqm/internal/web"] || !deps["net/textproto"] {
			t.Fatalf("go list -deps -tags %q lists neither web nor net/textproto:\n%s", tc.tags, out)
		}
		for _, f := range tc.forbidden {
			if deps[f] {
				t.Errorf("with -tags %q the page links %s", tc.tags, f)
			}
		}
	}
}
