//go:build darwin || freebsd

package bloat

import (
	"net"
	"runtime"
	"testing"
	"time"

	"golang.org/x/net/icmp"
	"golang.org/x/net/ipv4"
)

// These tests only compile on the Linux CI (GOOS=darwin go vet); they are
// meant for a run on a Mac or a FreeBSD machine.

// TestBSDLoopbackStamped sends a datagram marked EF over loopback and
// reads it with its kernel timestamp and DSCP.
func TestBSDLoopbackStamped(t *testing.T) {
	rx, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer rx.Close()
	enableRxTimestamps(rx)
	tx, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Close()
	before := time.Now()
	writeMarked(tx, []byte("probe"), rx.LocalAddr(), DSCPEF)
	rx.SetReadDeadline(time.Now().Add(5 * time.Second))
	b, oob := make([]byte, 64), make([]byte, 128)
	n, _, at, dscp, err := readStamped(rx, b, oob)
	if err != nil {
		t.Fatal(err)
	}
	if string(b[:n]) != "probe" {
		t.Errorf("read %q", b[:n])
	}
	if dscp != DSCPEF {
		t.Errorf("DSCP %d; want %d (IP_TOS cmsg on send or IP_RECVTOS on receive not honoured)", dscp, DSCPEF)
	}
	if at.Before(before.Truncate(time.Microsecond)) || at.After(time.Now()) {
		t.Errorf("receive stamp %v outside the send/read window starting %v", at, before)
	}
}

// TestDarwinPingSocket pings 127.0.0.1 through the unprivileged ICMP
// socket and checks the reply arrives without its IPv4 header.
func TestDarwinPingSocket(t *testing.T) {
	if runtime.GOOS != "darwin" {
		t.Skip("freebsd has no unprivileged ICMP socket")
	}
	c, err := listenPing(false)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	enableRxTimestamps(c)
	m := icmp.Message{Type: ipv4.ICMPTypeEcho, Body: &icmp.Echo{ID: 7, Seq: 1, Data: []byte("sqm-ping")}}
	wb, err := m.Marshal(nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.WriteTo(wb, &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)}); err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	b, oob := make([]byte, 1500), make([]byte, 128)
	for {
		n, _, _, _, err := readStamped(c, b, oob)
		if err != nil {
			t.Fatal(err)
		}
		r, err := icmp.ParseMessage(1, b[:n])
		if err != nil {
			t.Fatalf("reply does not parse as ICMP (IPv4 header left on?): %v", err)
		}
		if e, ok := r.Body.(*icmp.Echo); ok && r.Type == ipv4.ICMPTypeEchoReply && string(e.Data) == "sqm-ping" {
			return
		}
	}
}
