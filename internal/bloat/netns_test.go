//go:build linux

package bloat_test

// Test-only topology: a pair of namespaces joined by a veth, optionally
// rate-limited with htb (which this machine's kernel has). Namespaces,
// links and addresses come from internal/netns; the htb tree from tc.

import (
	"fmt"
	"os/exec"
	"testing"
	"time"

	"sqm/internal/netns"
	"sqm/internal/testutil"
)

type nsPair struct {
	a, b *netns.NS // server side, client side
}

// newNSPair creates namespaces A (server) and B (client) joined by a veth,
// with 10.77.0.1/24 and fd77::1/64 in A and .2/::2 in B. rateMb > 0 shapes
// both directions with htb at that rate (a plain fifo behind it, so latency
// under load shows bufferbloat). Everything is removed at cleanup.
func newNSPair(t testing.TB, rateMb int) *nsPair {
	t.Helper()
	testutil.RequireRoot(t)
	p := &nsPair{a: netns.NewT(t, "sqmbA"), b: netns.NewT(t, "sqmbB")}
	if err := p.a.Veth("vbA", p.b, "vbB"); err != nil {
		t.Fatal(err)
	}
	for _, s := range []struct {
		ns       *netns.NS
		dev      string
		ip4, ip6 string
	}{{p.a, "vbA", "10.77.0.1/24", "fd77::1/64"}, {p.b, "vbB", "10.77.0.2/24", "fd77::2/64"}} {
		// Offloads would let htb see 64 KB super-packets and overshoot.
		if err := s.ns.DisableOffloads(s.dev); err != nil {
			t.Fatal(err)
		}
		for _, cidr := range []string{s.ip4, s.ip6} {
			if err := s.ns.AddAddr(s.dev, cidr); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.ns.Up("lo", s.dev); err != nil {
			t.Fatal(err)
		}
		if rateMb > 0 {
			if _, err := exec.LookPath("tc"); err != nil {
				t.Skip("needs tc (iproute2) for the htb rate limit")
			}
			for _, args := range [][]string{
				{"qdisc", "add", "dev", s.dev, "root", "handle", "1:", "htb", "default", "1"},
				{"class", "add", "dev", s.dev, "parent", "1:", "classid", "1:1", "htb",
					"rate", fmt.Sprintf("%dmbit", rateMb), "ceil", fmt.Sprintf("%dmbit", rateMb)},
			} {
				if out, err := s.ns.Output(exec.Command("tc", args...)); err != nil {
					t.Fatalf("tc %v: %v\n%s", args, err, out)
				}
			}
		}
	}
	for _, s := range []struct {
		ns  *netns.NS
		dev string
	}{{p.a, "vbA"}, {p.b, "vbB"}} {
		if err := s.ns.WaitReady(s.dev, 5*time.Second); err != nil {
			t.Fatal(err)
		}
	}
	return p
}
