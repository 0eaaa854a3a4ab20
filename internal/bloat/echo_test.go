package bloat

import (
	"net"
	"net/netip"
	"testing"
	"time"

	"sqm/internal/bloat/probewire"
)

// TestServerEcho: a sessionless echo request gets one reply of the same
// size with the server's stamps between the client's send and receive; a
// server with a secret answers none (it serves its own clients only).
func TestServerEcho(t *testing.T) {
	for _, tt := range []struct {
		name   string
		secret string
		answer bool
	}{{"open", "", true}, {"secret", "s", false}} {
		t.Run(tt.name, func(t *testing.T) {
			addr := startServer(t, "tcp4", "127.0.0.1:0", Limits{Secret: tt.secret})
			c, err := net.Dial("udp4", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			sent := time.Now().UnixNano()
			p := probewire.Packet{Kind: probewire.EchoRequest, Seq: 42, ClientSend: sent}
			c.Write(p.Marshal(make([]byte, probewire.Len)))
			c.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
			buf := make([]byte, 100)
			n, err := c.Read(buf)
			got := time.Now().UnixNano()
			if !tt.answer {
				if err == nil {
					t.Fatalf("a server with a secret answered a sessionless echo (%d bytes)", n)
				}
				return
			}
			if err != nil {
				t.Fatalf("no echo reply: %v", err)
			}
			var r probewire.Packet
			if err := r.Unmarshal(buf[:n]); err != nil {
				t.Fatalf("reply: %v", err)
			}
			if r.Kind != probewire.EchoReply || r.Seq != 42 || r.ClientSend != sent {
				t.Errorf("reply %+v does not echo the request", r)
			}
			if r.ServerRecv < sent || r.ServerSend < r.ServerRecv || r.ServerSend > got {
				t.Errorf("server stamps %d, %d not within client send %d .. receive %d", r.ServerRecv, r.ServerSend, sent, got)
			}
		})
	}
}

// TestEchoLimiter: per address key and second, in all, and the table of
// keys, each bounded; a new second starts afresh.
func TestEchoLimiter(t *testing.T) {
	var e echoLimiter
	a := netip.MustParseAddr("192.0.2.1")
	sec := int64(1000) * int64(time.Second)
	n := 0
	for range maxEchoPerAddr + 5 {
		if e.allow(a, sec) {
			n++
		}
	}
	if n != maxEchoPerAddr {
		t.Errorf("one address got %d answers in a second, want %d", n, maxEchoPerAddr)
	}
	// IPv6 addresses of one /64 share a key.
	n = 0
	for i := range maxEchoPerAddr + 5 {
		b := netip.AddrFrom16([16]byte{0x20, 1, 0xd, 0xb8, 15: byte(i)})
		if e.allow(b, sec+1) {
			n++
		}
	}
	if n != maxEchoPerAddr {
		t.Errorf("one /64 got %d answers in a second, want %d", n, maxEchoPerAddr)
	}
	if !e.allow(a, sec+int64(time.Second)) {
		t.Error("a new second did not start afresh")
	}
	// Many addresses: the table stops at maxEchoAddrs keys, the total at
	// maxEchoPerSecond answers.
	e = echoLimiter{}
	n = 0
	for i := range 3 * maxEchoAddrs {
		b := netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)})
		for range 2 {
			if e.allow(b, sec) {
				n++
			}
		}
	}
	if want := min(2*maxEchoAddrs, maxEchoPerSecond); n != want || len(e.per) > maxEchoAddrs {
		t.Errorf("%d answers to %d keys, want %d answers, <= %d keys", n, len(e.per), want, maxEchoAddrs)
	}
}
