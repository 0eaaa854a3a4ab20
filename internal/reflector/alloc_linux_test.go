package reflector

import (
	"encoding/binary"
	"net/netip"
	"os"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"sqm/internal/bloat/probewire"
	"sqm/internal/irtt"
	"sqm/internal/netns"
	"sqm/internal/testutil"
)

// TestNoAllocs: sending a probe, matching its reply and emitting the
// sample allocate nothing, for every kind (socketless: the syscalls are
// measured by BenchmarkLoopbackEcho).
func TestNoAllocs(t *testing.T) {
	a := netip.MustParseAddr("192.0.2.1")
	p, _ := socketless(t, time.Second,
		Target{Addr: a, Kind: ICMPTimestamp},
		Target{Addr: a, Kind: UDPSQM},
		Target{Addr: a, Kind: UDPIRTT},
		Target{Addr: a, Kind: ICMPEcho},
		Target{Addr: a, Kind: UDPDNS})
	sess, err := irtt.ParseOpenReply(irttOpenReply(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	p.targets[2].sess = sess
	n := 0
	emit := func(s *Sample) {
		if !s.Lost {
			n++
		}
	}
	buf := make([]byte, 256)
	sqm := netip.AddrPortFrom(a, SQMPort)
	irttFrom := netip.AddrPortFrom(a, IRTTPort)
	dnsFrom := netip.AddrPortFrom(a, DNSPort)
	for _, tt := range []struct {
		name  string
		reply func(sl *pending, now time.Time)
	}{
		{"icmp-timestamp", func(sl *pending, now time.Time) {
			b := appendTimestamp(buf[:0], p.icmpID, uint16(sl.seq), sl.orig)
			b[0] = icmp4TSReply
			binary.BigEndian.PutUint32(b[12:], sl.orig+1)
			binary.BigEndian.PutUint32(b[16:], sl.orig+1)
			p.icmp4(b, a, now, now, emit)
		}},
		{"udp-sqm", func(sl *pending, now time.Time) {
			pk := probewire.Packet{Kind: probewire.EchoReply, Seq: uint64(sl.seq), ClientSend: p.wall(sl.sent), ServerRecv: now.UnixNano(), ServerSend: now.UnixNano()}
			p.udp(pk.Marshal(buf), sqm, now, now, emit)
		}},
		{"udp-irtt", func(sl *pending, now time.Time) {
			pk := irtt.Packet{Flags: irtt.FlagReply, Token: sess.Token, Seqno: sl.seq, Receive: irtt.Time{Wall: now.UnixNano()}, Send: irtt.Time{Wall: now.UnixNano()}}
			p.udp(pk.Append(buf[:0], irtt.Layout{Token: true, Seqno: true, At: irtt.AtBoth, Clock: irtt.Wall}, nil, 0), irttFrom, now, now, emit)
		}},
		{"udp-dns", func(sl *pending, now time.Time) {
			b := appendDNSQuery(buf[:0], uint16(sl.seq))
			b[2] |= 0x80
			p.udp(b, dnsFrom, now, now, emit)
		}},
		{"icmp-echo", func(sl *pending, now time.Time) {
			b := appendEcho(buf[:0], icmp4Echo, p.icmpID, sl.seq)
			b[0] = icmp4EchoReply
			p.icmp4(b, a, now, now, emit)
		}},
	} {
		i := map[string]int{"icmp-timestamp": 0, "udp-sqm": 1, "udp-irtt": 2, "icmp-echo": 3, "udp-dns": 4}[tt.name]
		n = 0
		allocs := testing.AllocsPerRun(100, func() {
			p.send(i, emit)
			sl := &p.ring[(p.next-1)&p.mask]
			tt.reply(sl, time.Now())
			p.expire(time.Now(), emit)
		})
		if n != 101 {
			t.Fatalf("%s: %d replies matched of 101", tt.name, n)
		}
		if allocs != 0 {
			t.Errorf("%s: %.1f allocations per probe, want 0", tt.name, allocs)
		}
	}
}

// irttOpenReply is an irtt server's open reply granting dual wall stamps.
func irttOpenReply(t *testing.T) []byte {
	t.Helper()
	par := irtt.Params{Version: irtt.ProtocolVersion, Duration: time.Hour, Interval: 300 * time.Millisecond, StampAt: irtt.AtBoth, Clock: irtt.Wall}
	pk := irtt.Packet{Flags: irtt.FlagOpen | irtt.FlagReply, Token: 0x1234, Payload: par.Append(nil)}
	return pk.Append(nil, irtt.Layout{Token: true}, nil, 0)
}

// BenchmarkLoopbackEcho: one ICMP echo probe through the kernel and
// back (raw socket, in a namespace of its own): send, poll, receive with
// its kernel stamp, match, emit. Run as root.
func BenchmarkLoopbackEcho(b *testing.B) {
	testutil.RequireRoot(b)
	ns := netns.NewT(b, "reflb")
	if err := ns.Up("lo"); err != nil {
		b.Fatal(err)
	}
	p, err := New(Config{Targets: []Target{{Addr: netip.MustParseAddr("127.0.0.1"), Kind: ICMPEcho}}, Enter: ns.Do})
	if err != nil {
		b.Fatal(err)
	}
	defer p.Close()
	got := 0
	emit := func(s *Sample) {
		if !s.Lost {
			got++
		}
	}
	pfd := []unix.PollFd{{Fd: int32(p.socks[sockICMP4].fd), Events: unix.POLLIN}}
	b.ReportAllocs()
	for b.Loop() {
		p.send(0, emit)
		for want := got + 1; got < want; {
			unix.Poll(pfd, 1000)
			p.drain(sockICMP4, p.cfg.Timeout, emit)
		}
	}
}

// TestKernelStamps: recv finds the kernel's receive stamp (a datagram
// to ourselves on loopback), between the send and the read: the control
// message layout is right on this architecture (run it as GOARCH=386 on
// amd64 for a 32-bit kernel ABI; qemu-user does not translate it).
func TestKernelStamps(t *testing.T) {
	if os.Getenv(testutil.QEMUUserEnv) == "1" {
		t.Skip("qemu-user passes the host's 64-bit timespec to a 32-bit guest untranslated; the router VMs run the real ABI")
	}
	p, err := newProber(Config{Targets: []Target{{Addr: netip.MustParseAddr("127.0.0.1"), Kind: UDPDNS}}, Interval: time.Second, Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.open(sockUDP4, false); err != nil {
		t.Fatal(err)
	}
	defer p.closeFDs()
	fd := p.socks[sockUDP4].fd
	if err := unix.Bind(fd, &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	self, err := unix.Getsockname(fd)
	if err != nil {
		t.Fatal(err)
	}
	sent := time.Now()
	if err := unix.Sendto(fd, []byte("stamp"), 0, self); err != nil {
		t.Fatal(err)
	}
	pf := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	unix.Poll(pf, 1000)
	n, from, at, ok := p.recv(fd)
	read := time.Now()
	if !ok || n != 5 || from.Port() != uint16(self.(*unix.SockaddrInet4).Port) {
		t.Fatalf("recv = %d bytes from %v, %v", n, from, ok)
	}
	if at.IsZero() || at.Before(sent.Round(0)) || at.After(read.Round(0)) {
		t.Fatalf("kernel stamp %v not between the send %v and the read %v", at, sent.Round(0), read.Round(0))
	}
}
