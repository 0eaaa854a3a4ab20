package reflector

import (
	"encoding/binary"
	"net/netip"
	"testing"
	"time"

	"sqm/internal/irtt"
)

// socketless makes a prober for targets without sockets (sends fail
// with EBADF, which the prober ignores as it does any failed send), with
// a raw ICMP socket pretended, so its reply handling can be fed crafted
// packets.
func socketless(t *testing.T, timeout time.Duration, targets ...Target) (*Prober, *[]Sample) {
	t.Helper()
	c, err := (&Config{Targets: targets, Interval: 10 * time.Millisecond, Timeout: timeout, Logf: t.Logf}).withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	p, err := newProber(c)
	if err != nil {
		t.Fatal(err)
	}
	p.socks[sockICMP4].raw = true
	for i, tg := range targets {
		p.setTarget(i, tg)
	}
	var got []Sample
	return p, &got
}

// tsReplyFor is the timestamp reply to the probe in slot sl with the
// given stamps.
func tsReplyFor(p *Prober, sl *pending, receive, transmit uint32) []byte {
	b := appendTimestamp(nil, p.icmpID, uint16(sl.seq), sl.orig)
	b[0] = icmp4TSReply
	binary.BigEndian.PutUint32(b[12:], receive)
	binary.BigEndian.PutUint32(b[16:], transmit)
	return b
}

// TestProberStampFaults: reflectors whose stamps cannot be used give
// round trips only, those that can give one-way delays after the
// probation, and the round trip is right either way.
func TestProberStampFaults(t *testing.T) {
	const rtt = 10 * time.Millisecond
	ms := func(d time.Duration) uint32 { return uint32(d / time.Millisecond % day) }
	for _, tt := range []struct {
		name string
		// stamps gives the reflector's stamps for a probe sent at sent
		// (time since midnight, to the ns).
		stamps func(sent time.Duration) (receive, transmit uint32)
		oneWay bool // after the probation
		why    string
	}{
		{"good", func(s time.Duration) (uint32, uint32) { return ms(s + 4*time.Millisecond), ms(s + 4*time.Millisecond) }, true, ""},
		{"offset clock", func(s time.Duration) (uint32, uint32) {
			return ms(s + 3*time.Hour), ms(s + 3*time.Hour + time.Millisecond)
		}, true, ""},
		{"whole seconds", func(s time.Duration) (uint32, uint32) { v := ms(s) / 1000 * 1000; return v, v }, false, tsCoarse},
		{"copies originate", func(s time.Duration) (uint32, uint32) { return ms(s), ms(s) }, false, tsMirror},
		{"high bit", func(s time.Duration) (uint32, uint32) { return 1<<31 | 77, 1<<31 | 77 }, false, tsHighBit},
		{"zeros", func(time.Duration) (uint32, uint32) { return 0, 0 }, false, tsZero},
	} {
		t.Run(tt.name, func(t *testing.T) {
			a := netip.MustParseAddr("192.0.2.1")
			p, _ := socketless(t, time.Second, Target{Addr: a, Kind: ICMPTimestamp})
			// A start 1234.5678 ms past a second, a probe every 100.1 ms.
			base := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC).Add(1234567800)
			for k := range 2 * tsRepeats {
				p.send(0, func(s *Sample) { t.Fatalf("a sample at a send: %+v", s) })
				sl := &p.ring[(p.next-1)&p.mask]
				sl.sent = base.Add(time.Duration(k) * 100100 * time.Microsecond)
				sl.orig = msSinceMidnight(p.wall(sl.sent))
				r, x := tt.stamps(sinceMidnight(p.wall(sl.sent)))
				var got []Sample
				at := sl.sent.Add(rtt)
				p.icmp4(tsReplyFor(p, sl, r, x), a, at, at, func(s *Sample) { got = append(got, *s) })
				if len(got) != 1 {
					t.Fatalf("reply %d: %d samples", k, len(got))
				}
				s := got[0]
				want := tt.oneWay && k >= tsRepeats-1
				turn := wrapDay(time.Duration(int64(x)-int64(r)) * time.Millisecond)
				if !s.OneWay {
					turn = 0
				}
				if s.Lost || s.OneWay != want || s.RTT != rtt-turn {
					t.Fatalf("reply %d: %+v, want one-way %v and RTT %v", k, s, want, rtt-turn)
				}
			}
			if got := p.targets[0].tsBad; got != tt.why {
				t.Errorf("refused for %q, want %q", got, tt.why)
			}
		})
	}
}

// TestProberNoTimestamps: a target that answers none of its first
// timestamp requests is probed with echo from then on, and each of those
// requests was reported lost, in order.
func TestProberNoTimestamps(t *testing.T) {
	p, _ := socketless(t, 50*time.Millisecond, Target{Addr: netip.MustParseAddr("192.0.2.1"), Kind: ICMPTimestamp})
	var got []Sample
	emit := func(s *Sample) { got = append(got, *s) }
	for range tsTries {
		p.send(0, emit)
	}
	p.expire(time.Now(), emit)
	if len(got) != 0 {
		t.Fatalf("%d probes lost before their timeout", len(got))
	}
	p.expire(time.Now().Add(60*time.Millisecond), emit)
	if len(got) != tsTries {
		t.Fatalf("%d lost samples, want %d", len(got), tsTries)
	}
	for k, s := range got {
		if !s.Lost || s.Kind != ICMPTimestamp || s.Seq != uint32(k) {
			t.Errorf("sample %d: %+v", k, s)
		}
	}
	if p.targets[0].kind != ICMPEcho {
		t.Fatalf("still probing with %v after %d unanswered timestamp requests", p.targets[0].kind, tsTries)
	}
	p.send(0, emit)
	if sl := p.ring[(p.next-1)&p.mask]; sl.kind != ICMPEcho {
		t.Errorf("next probe is %v", sl.kind)
	}
}

// TestProberMatch: a reply counts only for the live probe of that seq,
// kind and address: late, duplicate or foreign replies are dropped.
func TestProberMatch(t *testing.T) {
	a, b := netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("192.0.2.2")
	p, _ := socketless(t, 50*time.Millisecond, Target{Addr: a, Kind: ICMPEcho}, Target{Addr: b, Kind: ICMPEcho})
	var got []Sample
	emit := func(s *Sample) { got = append(got, *s) }
	p.send(0, emit)
	p.send(1, emit)
	reply := func(seq uint32) []byte {
		e := appendEcho(nil, icmp4Echo, p.icmpID, seq)
		e[0] = icmp4EchoReply
		return e
	}
	now := time.Now()
	p.icmp4(reply(0), b, now, now, emit) // seq 0 went to a
	p.icmp4(reply(7), a, now, now, emit) // never sent
	if len(got) != 0 {
		t.Fatalf("foreign replies taken: %+v", got)
	}
	p.icmp4(reply(0), a, now, now, emit)
	p.icmp4(reply(0), a, now, now, emit) // duplicate
	if len(got) != 1 || got[0].Target != 0 || got[0].Lost {
		t.Fatalf("after a reply and its duplicate: %+v", got)
	}
	p.expire(now.Add(time.Second), emit)
	p.icmp4(reply(1), b, now, now, emit) // late: already lost
	if len(got) != 2 || got[1].Target != 1 || !got[1].Lost {
		t.Fatalf("a lost probe and its late reply: %+v", got)
	}
}

func TestWiden(t *testing.T) {
	p := &Prober{}
	for _, tt := range []struct {
		next uint32
		s    uint16
		want uint32
	}{
		{5, 4, 4}, {0x10005, 0x0004, 0x10004}, {0x10005, 0xfffe, 0xfffe}, {3, 0xffff, 0xffffffff}, {0x10000, 0xffff, 0xffff},
	} {
		p.next = tt.next
		if got := p.widen(tt.s); got != tt.want {
			t.Errorf("next %#x: widen(%#x) = %#x, want %#x", tt.next, tt.s, got, tt.want)
		}
	}
}

// TestWaiting: a socket is read only while a reply is due on it: a probe
// in flight (until answered, lost or forgotten by a replacement) or an
// irtt session being opened.
func TestWaiting(t *testing.T) {
	a := netip.MustParseAddr("192.0.2.1")
	p, _ := socketless(t, 50*time.Millisecond,
		Target{Addr: a, Kind: ICMPEcho},
		Target{Addr: a, Kind: UDPIRTT})
	emit := func(*Sample) {}
	check := func(what string, icmp, udp bool) {
		t.Helper()
		if got := p.waiting(sockICMP4); got != icmp {
			t.Errorf("%s: ICMP socket waiting %v, want %v (in flight %v)", what, got, icmp, p.inflight)
		}
		if got := p.waiting(sockUDP4); got != udp {
			t.Errorf("%s: UDP socket waiting %v, want %v (in flight %v)", what, got, udp, p.inflight)
		}
	}
	check("start", false, true) // the irtt session is not open yet
	sess, err := irtt.ParseOpenReply(irttOpenReply(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	p.targets[1].sess = sess
	check("session open", false, false)

	p.send(0, emit)
	check("echo sent", true, false)
	sl := &p.ring[(p.next-1)&p.mask]
	b := appendEcho(nil, icmp4Echo, p.icmpID, sl.seq)
	b[0] = icmp4EchoReply
	now := time.Now()
	p.icmp4(b, a, now, now, emit)
	check("echo answered", false, false)

	p.send(0, emit)
	p.send(1, emit)
	check("both sent", true, true)
	p.expire(time.Now().Add(time.Second), emit)
	check("both lost", false, false)

	p.send(0, emit)
	p.replace[0] = Target{Addr: netip.MustParseAddr("192.0.2.2"), Kind: ICMPEcho} // Replace, without its socket check
	p.applyReplacements()
	check("replaced in flight", false, false)
}

// TestProbesWaiting: Waiting reports each target's oldest probe in
// flight, until its reply or its loss.
func TestProbesWaiting(t *testing.T) {
	a, b := netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("192.0.2.2")
	p, _ := socketless(t, 50*time.Millisecond, Target{Addr: a, Kind: ICMPEcho}, Target{Addr: b, Kind: ICMPEcho})
	emit := func(*Sample) {}
	waiting := func() map[int]uint32 {
		m := map[int]uint32{}
		p.Waiting(func(i int, sent time.Time) {
			if _, dup := m[i]; dup {
				t.Errorf("target %d reported twice", i)
			}
			for seq := p.tail; seq != p.next; seq++ {
				if sl := &p.ring[seq&p.mask]; sl.live && sl.sent.Equal(sent) && int(sl.target) == i {
					m[i] = seq
				}
			}
		})
		return m
	}
	if w := waiting(); len(w) != 0 {
		t.Fatalf("nothing sent, waiting %v", w)
	}
	p.send(0, emit) // seq 0
	p.send(1, emit) // 1
	p.send(0, emit) // 2
	if w := waiting(); len(w) != 2 || w[0] != 0 || w[1] != 1 {
		t.Fatalf("waiting %v (target: seq), want the oldest of each: map[0:0 1:1]", w)
	}
	reply := func(seq uint32) []byte {
		e := appendEcho(nil, icmp4Echo, p.icmpID, seq)
		e[0] = icmp4EchoReply
		return e
	}
	now := time.Now()
	p.icmp4(reply(0), a, now, now, emit)
	if w := waiting(); len(w) != 2 || w[0] != 2 || w[1] != 1 {
		t.Fatalf("after seq 0's reply, waiting %v, want map[0:2 1:1]", w)
	}
	p.expire(now.Add(time.Second), emit)
	if w := waiting(); len(w) != 0 {
		t.Fatalf("after the timeout, waiting %v", w)
	}
}
