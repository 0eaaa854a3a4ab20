package reflector

import (
	"net/netip"
	"testing"
	"time"

	"sqm/internal/bloat/probewire"
	"sqm/internal/irtt"
)

// FuzzReplies feeds arbitrary datagrams, as a hostile LAN or a lying
// reflector may send them from a reflector's address, to every reply
// path: nothing panics, a sample comes only for a probe that was sent
// and is live, and each probe gives at most one.
func FuzzReplies(f *testing.F) {
	a := netip.MustParseAddr("192.0.2.1")
	ts := appendTimestamp(nil, 0, 0, 1)
	ts[0] = icmp4TSReply
	echo := appendEcho(nil, icmp4Echo, 0, 0)
	echo[0] = icmp4EchoReply
	sqm := (&probewire.Packet{Kind: probewire.EchoReply}).Marshal(make([]byte, probewire.Len))
	dns := appendDNSQuery(nil, 0)
	dns[2] |= 0x80
	ir := (&irtt.Packet{Flags: irtt.FlagReply, Token: 0x1234}).Append(nil, irtt.Layout{Token: true, Seqno: true, At: irtt.AtBoth, Clock: irtt.Wall}, nil, 0)
	for i, s := range [][]byte{ts, echo, sqm, dns, ir, nil, {0x14, 0xa7, 0x5b, irtt.FlagOpen | irtt.FlagReply}} {
		f.Add(uint8(i), s)
	}
	f.Fuzz(func(t *testing.T, path uint8, b []byte) {
		p, _ := socketless(t, time.Second,
			Target{Addr: a, Kind: ICMPTimestamp},
			Target{Addr: a, Kind: UDPSQM},
			Target{Addr: a, Kind: UDPDNS},
			Target{Addr: a, Kind: UDPIRTT},
			Target{Addr: a, Kind: ICMPEcho})
		p.cfg.Logf = func(string, ...any) {}
		sess, err := irtt.ParseOpenReply(irttOpenReply(t), nil)
		if err != nil {
			t.Fatal(err)
		}
		p.targets[3].sess = sess
		noSample := func(s *Sample) { t.Fatalf("a sample at a send: %+v", s) }
		for i := range p.targets {
			p.send(i, noSample)
		}
		seen := map[uint32]bool{}
		emit := func(s *Sample) {
			if s.Seq >= p.next || seen[s.Seq] || s.Lost {
				t.Fatalf("sample %+v: not sent, seen already, or lost on a reply", s)
			}
			seen[s.Seq] = true
		}
		now := time.Now()
		for range 2 { // twice: a duplicate must not count
			switch path % 5 {
			case 0:
				p.icmp4(b, a, now, now, emit)
			case 1:
				p.udp(b, netip.AddrPortFrom(a, SQMPort), now, now, emit)
			case 2:
				p.udp(b, netip.AddrPortFrom(a, DNSPort), now, now, emit)
			case 3:
				p.udp(b, netip.AddrPortFrom(a, IRTTPort), now, now, emit)
			case 4:
				p.udp(b, netip.AddrPortFrom(a, 9), now, now, emit) // no target there
			}
		}
		if path%5 == 4 && len(seen) > 0 {
			t.Fatal("a datagram from no target's port gave a sample")
		}
	})
}
