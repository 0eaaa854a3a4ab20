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

// QEMUUserEnv is set to "1" by make test's big-endian step, which runs
// unit tests as GOARCH=mips binaries under qemu-user (qemu-mips-static).
const QEMUUserEnv = "SQM_QEMU_USER"

// RequireRoot skips the test unless it runs as root (it creates network
// namespaces and devices). Under qemu-user it always skips: qemu forwards
// the guest's system calls to the host kernel but does not translate
// netlink sockets ("socket operation on non-socket") or bpf(2) ("function
// not implemented"), so a root test there would fail on the emulator,
// not on sqm; the router VMs (tools/routervm) run sqm on those CPUs'
// kernels instead.
func RequireRoot(t testing.TB) {
	t.Helper()
	if os.Getenv(QEMUUserEnv) == "1" {
		t.Skip("runs under qemu-user, which does not translate netlink or bpf(2); the router VMs cover the kernel (" + QEMUUserEnv + "=1)")
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root (creates network namespaces and devices); run 'make test' as root")
	}
}

// RequireHostReplies skips a test that decodes the host kernel's
// NETLINK_ROUTE replies (a link dump) when it runs under qemu-user: qemu
// rewrites such replies for the guest's byte order and garbles the
// attributes it does not know (seen: a link dump's attribute of type 384
// and length 1024 under qemu-mips-static), so the test would fail on the
// emulator, not on sqm. The socket itself (deadlines, close, sequence
// checks) works there and its tests still run.
func RequireHostReplies(t testing.TB) {
	t.Helper()
	if os.Getenv(QEMUUserEnv) == "1" {
		t.Skip("decodes the host kernel's link replies, which qemu-user rewrites for the guest's byte order (" + QEMUUserEnv + "=1); the router VMs run sqm on little-endian kernels, and Debian has no big-endian MIPS one")
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
