package netns

import (
	"os/exec"
	"strings"
	"testing"

	"sqm/internal/testutil"
)

// TestLinkHTB builds the shaped link the measurement tests use and reads
// back from tc and ping that each piece is there: addresses reachable both
// ways, offloads off, the htb tree at the asked rate with the asked leaf.
func TestLinkHTB(t *testing.T) {
	testutil.RequireRoot(t)
	if _, err := exec.LookPath("tc"); err != nil {
		t.Skip("needs tc (iproute2)")
	}
	a, b := NewT(t, "sqmla"), NewT(t, "sqmlb")
	if err := Link(End{a, "vlA", []string{"10.79.0.1/24", "fd79::1/64"}}, End{b, "vlB", []string{"10.79.0.2/24"}}); err != nil {
		t.Fatal(err)
	}
	if on, err := a.OffloadOn("vlA", TSO); err != nil || on {
		t.Errorf("TSO on vlA: on=%v err=%v, want off", on, err)
	}
	if err := a.HTB("vlA", 2500, "bfifo", "limit", "30000"); err != nil {
		t.Fatal(err)
	}
	if err := b.HTB("vlB", 7000); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		ns   *NS
		args []string
		want []string
	}{
		{a, []string{"qdisc", "show", "dev", "vlA"}, []string{"qdisc htb 1: root", "default 0x1", "qdisc bfifo 10: parent 1:1 limit 30000b"}},
		{a, []string{"class", "show", "dev", "vlA"}, []string{"class htb 1:1 root leaf 10: prio 0 rate 2500Kbit ceil 2500Kbit"}},
		{b, []string{"class", "show", "dev", "vlB"}, []string{"class htb 1:1 root prio 0 rate 7Mbit ceil 7Mbit"}},
	} {
		out, err := c.ns.Output(exec.Command("tc", c.args...))
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range c.want {
			if !strings.Contains(string(out), w) {
				t.Errorf("tc %s: no %q in\n%s", strings.Join(c.args, " "), w, out)
			}
		}
	}
	if out, err := b.Output(exec.Command("ping", "-n", "-c", "1", "-W", "5", "10.79.0.1")); err != nil {
		t.Errorf("ping across the link: %v\n%s", err, out)
	}
}

// TestTCError: a failing tc command stops the list and the error names it.
func TestTCError(t *testing.T) {
	testutil.RequireRoot(t)
	if _, err := exec.LookPath("tc"); err != nil {
		t.Skip("needs tc (iproute2)")
	}
	n := NewT(t, "sqmtc")
	err := n.HTB("nosuch0", 1000, "pfifo")
	if err == nil || !strings.Contains(err.Error(), "nosuch0") || !strings.Contains(err.Error(), "qdisc add") {
		t.Fatalf("HTB on a missing link: err = %v, want one naming the device and the tc command", err)
	}
}
