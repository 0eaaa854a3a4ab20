package trafficwake

import (
	"net"
	"net/netip"
	"testing"
	"time"

	"sqm/internal/netns"
	"sqm/internal/testutil"
)

// pair is two namespaces joined by a veth (a in one, b in the other),
// 10.77.0.1 and 10.77.0.2, with a Waker on a.
func pair(t *testing.T) (w *Waker, sendAB, sendBA func(size int)) {
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
	if err := na.Do(func() (err error) { w, err = Open(int(idx), MinLen); return err }); err != nil {
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
	return w, sender(na, "10.77.0.2:9"), sender(nb, "10.77.0.1:9")
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
	w, ab, ba := pair(t)
	ab(1200) // resolves the neighbour; not armed yet
	if woke(w, 100*time.Millisecond) {
		t.Fatal("woke while never armed")
	}
	if err := w.Arm(); err != nil {
		t.Fatal(err)
	}
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
}

func TestOpenBadArgs(t *testing.T) {
	for _, c := range [][2]int{{0, MinLen}, {1, 0}, {1, 70000}} {
		if w, err := Open(c[0], c[1]); err == nil {
			w.Close()
			t.Errorf("Open(%d, %d) accepted", c[0], c[1])
		}
	}
}
