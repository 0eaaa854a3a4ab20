// Package testutil decides where a test may run. Tests that need root, or
// the full Debian kernel in the project's VM, call Require* first and are
// skipped with a reason elsewhere: `go test ./...` passes anywhere, and
// `make test` runs them all (the VM ones inside qemu).
package testutil

import (
	"os"
	"testing"
)

// VMEnv is set to "1" by the VM harness inside the VM (see internal/vm).
const VMEnv = "SQM_VM"

// InVM reports whether the test runs inside the project's VM, on Debian's
// kernel with every qdisc, classifier and action available as a module.
func InVM() bool { return os.Getenv(VMEnv) == "1" }

// RequireRoot skips the test unless it runs as root (it creates network
// namespaces and devices).
func RequireRoot(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root (creates network namespaces and devices); run 'make test' as root")
	}
}

// RequireVM skips the test unless it runs inside the project's VM. Such
// tests need kernel features this machine's kernel lacks (cake, fq_codel,
// netem, police, ...); `make test` runs them in qemu.
func RequireVM(t testing.TB) {
	t.Helper()
	if !InVM() {
		t.Skipf("needs the VM kernel (set by 'make test' via internal/vm; %s=1)", VMEnv)
	}
	RequireRoot(t)
}
