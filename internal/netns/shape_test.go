package netns

import (
	"encoding/json"
	"io"
	"net"
	"os/exec"
	"strings"
	"testing"
	"time"

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
	if err := Link(End{NS: a, Dev: "vlA", Addrs: []string{"10.79.0.1/24", "fd79::1/64"}}, End{NS: b, Dev: "vlB", Addrs: []string{"10.79.0.2/24"}}); err != nil {
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
		// 10 ms of the rate for burst and cburst (linkBurst).
		{a, []string{"class", "show", "dev", "vlA"}, []string{"class htb 1:1 root leaf 10: prio 0 rate 2500Kbit ceil 2500Kbit burst 3125b cburst 3125b"}},
		{b, []string{"class", "show", "dev", "vlB"}, []string{"class htb 1:1 root prio 0 rate 7Mbit ceil 7Mbit burst 8750b cburst 8750b"}},
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
	// TCP sent from b's own sockets waits in vlB's htb one segment per
	// packet. Without gso_max_segs 1 the kernel queues GSO packets there
	// (9 kB on average in an RRUL run here), and a packet limit holds
	// several times the bytes it says. The backlog shows it; the Sent
	// counters do not (they count a GSO packet's segments).
	done := make(chan struct{})
	go func() { defer close(done); sendTCP(t, b, a, "10.79.0.1:5999", 2<<20) }()
	seen := 0
	for running := true; running; {
		select {
		case <-done:
			running = false
		case <-time.After(50 * time.Millisecond):
		}
		out, err := b.Output(exec.Command("tc", "-s", "-j", "qdisc", "show", "dev", "vlB", "root"))
		if err != nil {
			t.Fatal(err)
		}
		var q []struct {
			Backlog int `json:"backlog"`
			Qlen    int `json:"qlen"`
		}
		if err := json.Unmarshal(out, &q); err != nil || len(q) != 1 {
			t.Fatalf("tc -s -j qdisc show: %v in %s", err, out)
		}
		bytes, pkts := q[0].Backlog, q[0].Qlen
		if pkts == 0 {
			continue
		}
		seen++
		if bytes > pkts*1514 {
			t.Errorf("vlB's htb holds %d bytes in %d packets: more than one Ethernet frame each, so TCP's GSO packets reach the qdisc", bytes, pkts)
			break
		}
	}
	<-done
	if seen == 0 {
		t.Error("the bulk transfer never left a backlog in vlB's htb to look at")
	}
	// A class under 1:1 gets the ceil's 10 ms for both buckets too.
	if err := b.HTBClass("vlB", "1:10", 1000, 7000, 2); err != nil {
		t.Fatal(err)
	}
	out, err := b.Output(exec.Command("tc", "class", "show", "dev", "vlB", "classid", "1:10"))
	if want := "class htb 1:10 parent 1:1 prio 2 rate 1Mbit ceil 7Mbit burst 8750b cburst 8750b"; err != nil || !strings.Contains(string(out), want) {
		t.Errorf("tc class show: %v, no %q in\n%s", err, want, out)
	}
}

// sendTCP writes n bytes over TCP from namespace from to a listener at addr
// in namespace to, and waits until they have all been read.
func sendTCP(t *testing.T, from, to *NS, addr string, n int) {
	t.Helper()
	var ln net.Listener
	if err := to.Do(func() error {
		var err error
		ln, err = net.Listen("tcp4", addr)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	got := make(chan int64, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			got <- -1
			return
		}
		defer c.Close()
		k, _ := io.Copy(io.Discard, c)
		got <- k
	}()
	var c net.Conn
	if err := from.Do(func() error {
		var err error
		c, err = net.Dial("tcp4", addr)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	_, err := c.Write(make([]byte, n))
	c.Close()
	if k := <-got; err != nil || k != int64(n) {
		t.Errorf("sent %d bytes (%v), received %d", n, err, k)
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
