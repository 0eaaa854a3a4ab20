package irtt

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"
)

// fake is a scripted irtt server on loopback: answer gets each datagram
// and returns the datagrams to send back.
type fake struct {
	conn *net.UDPConn
}

func newFake(t *testing.T, answer func(b []byte) [][]byte) *fake {
	t.Helper()
	c, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Skipf("no loopback UDP: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	go func() {
		b := make([]byte, 1500)
		for {
			n, from, err := c.ReadFromUDP(b)
			if err != nil {
				return
			}
			for _, out := range answer(append([]byte(nil), b[:n]...)) {
				c.WriteToUDP(out, from)
			}
		}
	}()
	return &fake{conn: c}
}

func dial(t *testing.T, addr net.Addr) *net.UDPConn {
	t.Helper()
	c, err := net.DialUDP("udp4", nil, addr.(*net.UDPAddr))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func shortOpen(t *testing.T) {
	old := openTimeouts
	openTimeouts = []time.Duration{50 * time.Millisecond, 50 * time.Millisecond}
	t.Cleanup(func() { openTimeouts = old })
}

const token = 0xfeedface12345678

// grant answers an open request the way an irtt server does, granting
// what change makes of the request.
func grant(key []byte, change func(*Params)) func(b []byte) [][]byte {
	return func(b []byte) [][]byte {
		p, err := Parse(b, Layout{}, key)
		if err != nil || p.Flags&FlagOpen == 0 {
			return nil
		}
		want, err := ParseParams(p.Payload)
		if err != nil {
			return nil
		}
		if change != nil {
			change(&want)
		}
		r := Packet{Flags: FlagOpen | FlagReply, Token: token, Payload: want.Append(nil)}
		return [][]byte{r.Append(nil, Layout{Token: true}, key, 0)}
	}
}

var ask = Params{Duration: 10 * time.Second, Interval: 20 * time.Millisecond, ReceivedStats: ReceivedCount, StampAt: AtBoth, Clock: BothClocks}

func TestOpenAndEcho(t *testing.T) {
	if !HMAC {
		t.Skip("HMAC keys are not in this build (sqm_notest); TestHMACOmitted checks they are refused")
	}
	key := []byte("k3y")
	var open func([]byte) [][]byte
	f := newFake(t, func(b []byte) [][]byte {
		if b[3]&FlagOpen != 0 {
			return open(b)
		}
		l := Layout{Token: true, Seqno: true}
		p, err := Parse(b, l, key)
		if err != nil || p.Token != token {
			return nil
		}
		r := Packet{Flags: FlagReply, Token: token, Seqno: p.Seqno, ReceivedCount: p.Seqno + 1,
			Receive: Time{Wall: 1000, Mono: 10}, Send: Time{Wall: 1500, Mono: 410}}
		return [][]byte{r.Append(nil, Layout{Token: true, Seqno: true, Stats: ReceivedCount, At: AtBoth, Clock: BothClocks}, key, 0)}
	})
	open = grant(key, func(p *Params) { p.Interval = 50 * time.Millisecond; p.Duration = 5 * time.Second })
	c := dial(t, f.conn.LocalAddr())
	s, err := Open(context.Background(), c, ask, key)
	if err != nil {
		t.Fatal(err)
	}
	if s.Token != token || s.Params.Interval != 50*time.Millisecond || s.Params.Duration != 5*time.Second || s.Params.Version != ProtocolVersion {
		t.Fatalf("session %+v: want the token and the server's interval and duration", s)
	}
	if wall, mono := s.HasStamps(); !wall || !mono {
		t.Fatalf("HasStamps = %v, %v", wall, mono)
	}
	req := s.AppendRequest(nil, 7)
	if len(req) != s.reply.Len()+hmacLen {
		t.Errorf("request %d bytes, want the reply's %d", len(req), s.reply.Len()+hmacLen)
	}
	c.Write(req)
	b := make([]byte, 1500)
	c.SetReadDeadline(time.Now().Add(2 * time.Second))
	n, err := c.Read(b)
	if err != nil {
		t.Fatal(err)
	}
	p, err := s.ParseReply(b[:n])
	if err != nil {
		t.Fatal(err)
	}
	if p.Seqno != 7 || p.ReceivedCount != 8 || p.Receive.Wall != 1000 || p.Send.Mono != 410 {
		t.Fatalf("reply %+v", p)
	}
}

func TestOpenFails(t *testing.T) {
	shortOpen(t)
	key := []byte("right")
	reply := func(flags byte, tok uint64, p Params, k []byte) func([]byte) [][]byte {
		return func([]byte) [][]byte {
			r := Packet{Flags: flags, Token: tok, Payload: p.Append(nil)}
			return [][]byte{r.Append(nil, Layout{Token: true}, k, 0)}
		}
	}
	cases := []struct {
		name   string
		key    []byte
		answer func([]byte) [][]byte
		want   string
	}{
		{"silent server", nil, func([]byte) [][]byte { return nil }, "no reply to the open request"},
		{"silent server, key set", key, func([]byte) [][]byte { return nil }, "HMAC key is not the server's"},
		{"wrong magic", nil, func([]byte) [][]byte { return [][]byte{{1, 2, 3, 6, 0, 0, 0, 0, 0, 0, 0, 1}} }, "bad magic"},
		{"truncated", nil, func([]byte) [][]byte { return [][]byte{{0x14, 0xa7, 0x5b, 0x03, 1}} }, "shorter than its fields"},
		{"reply signed with another key", key, reply(FlagOpen|FlagReply, token, Params{Version: 1}, []byte("other")), "HMAC does not match"},
		{"reply unsigned", key, reply(FlagOpen|FlagReply, token, Params{Version: 1}, nil), "no HMAC"},
		{"reply signed, no key here", nil, reply(FlagOpen|FlagReply, token, Params{Version: 1}, key), "has an HMAC but no key"},
		{"no reply flag", nil, reply(FlagOpen, token, Params{Version: 1}, nil), "expected an open reply"},
		{"zero token", nil, reply(FlagOpen|FlagReply, 0, Params{Version: 1}, nil), "zero connection token"},
		{"version refused", nil, reply(FlagOpen|FlagReply|FlagClose, 0, Params{Version: 2}, nil), "protocol version 2"},
		{"bad params", nil, func([]byte) [][]byte {
			r := Packet{Flags: FlagOpen | FlagReply, Token: token, Payload: []byte{keyInterval, 0}}
			return [][]byte{r.Append(nil, Layout{Token: true}, nil, 0)}
		}, "interval 0 ns is not positive"},
	}
	for _, tc := range cases {
		if len(tc.key) > 0 && !HMAC {
			continue // refused up front in this build: TestHMACOmitted
		}
		f := newFake(t, tc.answer)
		_, err := Open(context.Background(), dial(t, f.conn.LocalAddr()), ask, tc.key)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want an error with %q", tc.name, err, tc.want)
		}
	}
}

func TestOpenPortUnreachable(t *testing.T) {
	shortOpen(t)
	f := newFake(t, func([]byte) [][]byte { return nil })
	addr := f.conn.LocalAddr()
	f.conn.Close() // nothing listens there now: the kernel answers port unreachable
	_, err := Open(context.Background(), dial(t, addr), ask, nil)
	if err == nil || !strings.Contains(err.Error(), "port unreachable") {
		t.Fatalf("got %v, want port unreachable", err)
	}
}

func TestParseReply(t *testing.T) {
	s := &Session{Token: token, reply: Layout{Token: true, Seqno: true, At: AtBoth, Clock: Wall}}
	mk := func(flags byte, tok uint64, l Layout) []byte {
		return (&Packet{Flags: flags, Token: tok, Seqno: 3}).Append(nil, l, nil, 0)
	}
	if p, err := s.ParseReply(mk(FlagReply, token, s.reply)); err != nil || p.Seqno != 3 {
		t.Errorf("good reply: %+v, %v", p, err)
	}
	if p, err := s.ParseReply(mk(FlagReply|FlagClose, token, s.reply)); err != nil || p.Flags&FlagClose == 0 {
		t.Errorf("last reply before a close: %+v, %v; want the reply with FlagClose", p, err)
	}
	for _, tc := range []struct {
		name string
		b    []byte
		want error
	}{
		{"other token", mk(FlagReply, token+1, s.reply), ErrToken},
		{"request, not reply", mk(0, token, s.reply), ErrNotReply},
		{"open reply", mk(FlagReply|FlagOpen, token, s.reply), ErrNotReply},
		{"short close", mk(FlagReply|FlagClose, token, Layout{Token: true}), ErrClosed},
		{"short, no close", mk(FlagReply, token, Layout{Token: true}), ErrShort},
		{"short close, other token", mk(FlagReply|FlagClose, token+1, Layout{Token: true}), ErrShort},
	} {
		if _, err := s.ParseReply(tc.b); !errors.Is(err, tc.want) {
			t.Errorf("%s: got %v, want %v", tc.name, err, tc.want)
		}
	}
}
