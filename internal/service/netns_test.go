package service_test

import (
	"bytes"
	"os/exec"
	"strings"
	"testing"

	"sqm/internal/clitest"
	"sqm/internal/netns"
	"sqm/internal/testutil"
)

// netNS is a fresh network namespace (internal/netns) for one test. Do
// runs functions inside it: sockets it opens and processes it starts live in
// the namespace, which vanishes with every device in it when the test ends.
type netNS struct {
	t  testing.TB
	ns *netns.NS
}

func newNetNS(t testing.TB) *netNS {
	t.Helper()
	testutil.RequireRoot(t)
	ns := &netNS{t: t, ns: netns.NewT(t, "sqms")}
	ns.sh(t, "ip link set lo up")
	return ns
}

// Do runs fn inside the namespace and waits for it.
func (ns *netNS) Do(fn func()) {
	if err := ns.ns.Do(func() error { fn(); return nil }); err != nil {
		ns.t.Fatal(err)
	}
}

// sh runs a shell command line inside the namespace and fails the test if
// it fails.
func (ns *netNS) sh(t testing.TB, cmd string) string {
	t.Helper()
	out, err := ns.try(cmd)
	if err != nil {
		t.Fatalf("%s: %v\n%s", cmd, err, out)
	}
	return out
}

func (ns *netNS) try(cmd string) (string, error) {
	var out []byte
	var err error
	ns.Do(func() { out, err = exec.Command("sh", "-c", cmd).CombinedOutput() })
	return string(out), err
}

// start starts cmd inside the namespace (not waiting for it).
func (ns *netNS) start(t testing.TB, cmd *exec.Cmd) {
	t.Helper()
	var err error
	ns.Do(func() { err = cmd.Start() })
	if err != nil {
		t.Fatal(err)
	}
}

// sqm runs the sqm command as a child process inside the namespace.
func (ns *netNS) sqm(args ...string) (stdout, stderr string, err error) {
	cmd := clitest.Command(args...)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	ns.Do(func() { err = cmd.Run() })
	return o.String(), e.String(), err
}

// tc returns `tc` output for a device, trimmed.
func (ns *netNS) tc(t testing.TB, args string) string {
	t.Helper()
	return strings.TrimSpace(ns.sh(t, "tc "+args))
}
