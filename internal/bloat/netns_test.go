//go:build linux

package bloat_test

// Test-only topology: a pair of namespaces joined by a veth, optionally
// rate-limited with htb (which this machine's kernel has). Namespaces,
// links, addresses and the htb tree come from internal/netns.

import (
	"os/exec"
	"testing"

	"sqm/internal/netns"
	"sqm/internal/testutil"
)

type nsPair struct {
	a, b *netns.NS // server side, client side
}

// ipNetnsExec is the command prefix that runs a program in ns (nil: on
// the host): the namespaces are iproute2-compatible, so external tools run
// through `ip netns exec` and their Start/Output work as usual.
func ipNetnsExec(ns *netns.NS) []string {
	if ns == nil {
		return nil
	}
	return []string{"ip", "netns", "exec", ns.Name()}
}

// newNSPair creates namespaces A (server) and B (client) joined by a veth,
// with 10.77.0.1/24 and fd77::1/64 in A and .2/::2 in B. rateMb > 0 shapes
// both directions with htb at that rate (a plain fifo behind it, so latency
// under load shows bufferbloat). Everything is removed at cleanup.
func newNSPair(t testing.TB, rateMb int) *nsPair {
	t.Helper()
	testutil.RequireRoot(t)
	if _, err := exec.LookPath("tc"); rateMb > 0 && err != nil {
		t.Skip("needs tc (iproute2) for the htb rate limit")
	}
	p := &nsPair{a: netns.NewT(t, "sqmbA"), b: netns.NewT(t, "sqmbB")}
	ends := []netns.End{
		{NS: p.a, Dev: "vbA", Addrs: []string{"10.77.0.1/24", "fd77::1/64"}},
		{NS: p.b, Dev: "vbB", Addrs: []string{"10.77.0.2/24", "fd77::2/64"}},
	}
	if err := netns.Link(ends[0], ends[1]); err != nil {
		t.Fatal(err)
	}
	for _, e := range ends {
		if rateMb > 0 {
			if err := e.NS.HTB(e.Dev, rateMb*1000); err != nil {
				t.Fatal(err)
			}
		}
	}
	return p
}
