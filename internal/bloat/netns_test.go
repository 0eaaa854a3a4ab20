//go:build linux

package bloat_test

// Test-only network namespace plumbing: a pair of namespaces joined by a
// veth, optionally rate-limited with htb (which this machine's kernel has).
// It shells out to ip and tc because internal/netns is not there yet; once
// it lands these helpers should use it.

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"sqm/internal/testutil"
)

type nsPair struct {
	a, b   string // namespace names
	ipA    string // server side address
	ip6A   string
	devA   string
	devB   string
	rateMb int
}

func run(t testing.TB, args ...string) {
	t.Helper()
	out, err := exec.Command(args[0], args[1:]...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// newNSPair creates namespaces A (server) and B (client) joined by a veth,
// with 10.77.0.1/24 and fd77::1/64 in A and .2/::2 in B. rateMb > 0 shapes
// both directions with htb at that rate (a plain pfifo queue behind it, so
// latency under load shows bufferbloat). Everything is removed at cleanup.
func newNSPair(t testing.TB, rateMb int) *nsPair {
	t.Helper()
	testutil.RequireRoot(t)
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("needs the ip command (iproute2)")
	}
	id := fmt.Sprintf("%d%d", os.Getpid()%100000, len(t.Name())%10)
	p := &nsPair{a: "sqmbA" + id, b: "sqmbB" + id, ipA: "10.77.0.1", ip6A: "fd77::1", devA: "vbA" + id, devB: "vbB" + id, rateMb: rateMb}
	run(t, "ip", "netns", "add", p.a)
	t.Cleanup(func() { exec.Command("ip", "netns", "del", p.a).Run() })
	run(t, "ip", "netns", "add", p.b)
	t.Cleanup(func() { exec.Command("ip", "netns", "del", p.b).Run() })
	run(t, "ip", "link", "add", p.devA, "netns", p.a, "type", "veth", "peer", "name", p.devB, "netns", p.b)
	for _, s := range []struct{ ns, dev, ip4, ip6 string }{{p.a, p.devA, "10.77.0.1/24", "fd77::1/64"}, {p.b, p.devB, "10.77.0.2/24", "fd77::2/64"}} {
		run(t, "ip", "-n", s.ns, "link", "set", "lo", "up")
		run(t, "ip", "-n", s.ns, "addr", "add", s.ip4, "dev", s.dev)
		run(t, "ip", "-n", s.ns, "addr", "add", s.ip6, "dev", s.dev, "nodad")
		run(t, "ip", "-n", s.ns, "link", "set", s.dev, "up")
		if rateMb > 0 {
			// Offloads would let htb see 64 KB super-packets and overshoot.
			exec.Command("ip", "netns", "exec", s.ns, "ethtool", "-K", s.dev, "tso", "off", "gso", "off", "gro", "off").Run()
			run(t, "tc", "-n", s.ns, "qdisc", "add", "dev", s.dev, "root", "handle", "1:", "htb", "default", "1")
			run(t, "tc", "-n", s.ns, "class", "add", "dev", s.dev, "parent", "1:", "classid", "1:1", "htb",
				"rate", fmt.Sprintf("%dmbit", rateMb), "ceil", fmt.Sprintf("%dmbit", rateMb))
		}
	}
	return p
}

// do runs fn on an OS thread switched into namespace ns; sockets created in
// fn stay in ns. This is what internal/netns Do will offer.
func do(ns string, fn func() error) error {
	if ns == "" {
		return fn()
	}
	runtime.LockOSThread()
	orig, err := os.Open(fmt.Sprintf("/proc/self/task/%d/ns/net", unix.Gettid()))
	if err != nil {
		runtime.UnlockOSThread()
		return err
	}
	defer orig.Close()
	target, err := os.Open("/run/netns/" + ns)
	if err != nil {
		runtime.UnlockOSThread()
		return err
	}
	defer target.Close()
	if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("setns %s: %w", ns, err)
	}
	ferr := fn()
	if err := unix.Setns(int(orig.Fd()), unix.CLONE_NEWNET); err != nil {
		// Leave the thread locked: it dies with the goroutine instead of
		// running other goroutines in the wrong namespace.
		return fmt.Errorf("setns back: %w", err)
	}
	runtime.UnlockOSThread()
	return ferr
}
