package kernel

import (
	"os"
	"testing"

	"github.com/jsimonetti/rtnetlink/v2"
	"github.com/jsimonetti/rtnetlink/v2/driver"
	"golang.org/x/sys/unix"

	"sqm/internal/netns"
	"sqm/internal/testutil"
)

// testNS is a fresh network namespace (internal/netns) for one test; Do
// runs functions inside it (sockets opened there live in the namespace).
// The namespace, and every device in it, vanishes when the test ends.
type testNS struct {
	t  testing.TB
	ns *netns.NS
}

func newTestNS(t testing.TB) *testNS {
	t.Helper()
	testutil.RequireRoot(t)
	return &testNS{t: t, ns: netns.NewT(t, "sqmk")}
}

// Do runs fn inside the namespace and waits for it.
func (ns *testNS) Do(fn func()) {
	if err := ns.ns.Do(func() error { fn(); return nil }); err != nil {
		ns.t.Fatal(err)
	}
}

// open opens a Conn inside the namespace.
func (ns *testNS) open(t testing.TB) *Conn {
	t.Helper()
	var c *Conn
	var err error
	ns.Do(func() { c, err = Open() })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// veth creates a veth pair a<->b inside the namespace, both up.
func (ns *testNS) veth(t testing.TB, a, b string) {
	t.Helper()
	var err error
	ns.Do(func() {
		var rt *rtnetlink.Conn
		rt, err = rtnetlink.Dial(nil)
		if err != nil {
			return
		}
		defer rt.Close()
		err = rt.Link.New(&rtnetlink.LinkMessage{
			Family: unix.AF_UNSPEC,
			Attributes: &rtnetlink.LinkAttributes{
				Name: a,
				Info: &rtnetlink.LinkInfo{Kind: "veth", Data: &driver.Veth{
					PeerInfo: &rtnetlink.LinkMessage{Attributes: &rtnetlink.LinkAttributes{Name: b}},
				}},
			},
		})
		if err != nil {
			return
		}
		// No IPv6 autoconfiguration chatter (router solicitations, MLD)
		// in counters the tests check.
		for _, n := range []string{a, b} {
			if werr := os.WriteFile("/proc/sys/net/ipv6/conf/"+n+"/disable_ipv6", []byte("1"), 0); werr != nil && !os.IsNotExist(werr) {
				err = werr
				return
			}
		}
		links, lerr := rt.Link.List()
		if lerr != nil {
			err = lerr
			return
		}
		for _, l := range links {
			if l.Attributes.Name == a || l.Attributes.Name == b {
				if err = rt.Link.Set(&rtnetlink.LinkMessage{Family: unix.AF_UNSPEC, Index: l.Index, Flags: unix.IFF_UP, Change: unix.IFF_UP}); err != nil {
					return
				}
			}
		}
	})
	if err != nil {
		t.Fatalf("create veth %s/%s: %v", a, b, err)
	}
}

// sh runs a command inside the namespace (tests only: tc -s cross-checks).
func (ns *testNS) sh(t testing.TB, name string, args ...string) string {
	t.Helper()
	var out []byte
	var err error
	ns.Do(func() {
		out, err = execCommand(name, args...)
	})
	if err != nil {
		t.Fatalf("%s %v: %v\n%s", name, args, err, out)
	}
	return string(out)
}
