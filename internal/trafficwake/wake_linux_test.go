package trafficwake

import (
	"net"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"

	"sqm/internal/netns"
	"sqm/internal/testutil"
)

// pair is two namespaces joined by a veth (a in one, b in the other),
// 10.77.0.1 and 10.77.0.2, with a Waker on a.
func pair(t *testing.T) (w *Waker, sendAB, sendBA func(size int), tapped func() bool) {
	t.Helper()
	na, nb := netns.NewT(t, "wakea"), netns.NewT(t, "wakeb")
	if err := na.Veth("a", nb, "b"); err != nil {
		t.Fatal(err)
	}
	for _, s := range []struct {
		ns        *netns.NS
		dev, addr string
	}{{na, "a", "10.77.0.1/24"}, {nb, "b", "10.77.0.2/24"}} {
		if err := s.ns.Up(s.dev); err != nil {
			t.Fatal(err)
		}
		if err := s.ns.AddAddr(s.dev, s.addr); err != nil {
			t.Fatal(err)
		}
	}
	idx, err := na.Index("a")
	if err != nil {
		t.Fatal(err)
	}
	if w, err = Open(int(idx), MinLen, na.Do); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	sender := func(ns *netns.NS, to string) func(int) {
		// Unconnected: the port unreachable that answers each datagram
		// does not fail the next write.
		var c net.PacketConn
		if err := ns.Do(func() (err error) { c, err = net.ListenPacket("udp4", ":0"); return err }); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		dst := net.UDPAddrFromAddrPort(netip.MustParseAddrPort(to))
		return func(size int) {
			if _, err := c.WriteTo(make([]byte, size), dst); err != nil {
				t.Fatal(err)
			}
		}
	}
	// tapped reads the namespace's packet sockets (/proc/net/packet:
	// sk RefCnt Type Proto Iface R ...): is one running, a tap on the
	// interface? A disarmed Waker has none open.
	tapped = func() bool {
		var b []byte
		if err := na.Do(func() (err error) { b, err = os.ReadFile("/proc/thread-self/net/packet"); return err }); err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(strings.TrimSpace(string(b)), "\n")[1:]
		if len(lines) > 1 {
			t.Fatalf("packet sockets in the namespace: %q, want ours alone", lines)
		}
		for _, l := range lines {
			if f := strings.Fields(l); len(f) > 5 && f[5] == "1" {
				return true
			}
		}
		return false
	}
	return w, sender(na, "10.77.0.2:9"), sender(nb, "10.77.0.1:9"), tapped
}

func woke(w *Waker, within time.Duration) bool {
	select {
	case <-w.C():
		return true
	case <-time.After(within):
		return false
	}
}

// TestWake: an armed Waker wakes once for a packet of load size either
// way across its interface, not for small ones, and not while disarmed;
// a wake disarms it until Arm.
func TestWake(t *testing.T) {
	testutil.RequireRoot(t)
	w, ab, ba, tapped := pair(t)
	tap := func(want bool, when string) {
		t.Helper()
		if got := tapped(); got != want {
			t.Fatalf("%s: tap on the interface %v, want %v", when, got, want)
		}
	}
	tap(false, "opened")
	ab(1200) // resolves the neighbour; not armed yet
	if woke(w, 100*time.Millisecond) {
		t.Fatal("woke while never armed")
	}
	if err := w.Arm(); err != nil {
		t.Fatal(err)
	}
	tap(true, "armed")
	for range 20 {
		ab(200) // 200 bytes of payload: well under MinLen on the wire
		ba(200)
	}
	if woke(w, 200*time.Millisecond) {
		t.Fatal("woke for small packets")
	}
	ab(1200)
	if !woke(w, 2*time.Second) {
		t.Fatal("no wake for an outgoing 1200-byte datagram")
	}
	ab(1200)
	ba(1200)
	if woke(w, 200*time.Millisecond) {
		t.Fatal("woke again without Arm")
	}
	tap(false, "after a wake")
	if err := w.Arm(); err != nil {
		t.Fatal(err)
	}
	ba(1400)
	if !woke(w, 2*time.Second) {
		t.Fatal("no wake for an incoming 1400-byte datagram")
	}
	if err := w.Arm(); err != nil {
		t.Fatal(err)
	}
	if err := w.Disarm(); err != nil {
		t.Fatal(err)
	}
	ba(1400)
	if woke(w, 200*time.Millisecond) {
		t.Fatal("woke after Disarm")
	}
	tap(false, "disarmed")
}

func TestOpenBadArgs(t *testing.T) {
	for _, c := range [][2]int{{0, MinLen}, {1, 0}, {1, 70000}} {
		if w, err := Open(c[0], c[1], nil); err == nil {
			w.Close()
			t.Errorf("Open(%d, %d) accepted", c[0], c[1])
		}
	}
}
