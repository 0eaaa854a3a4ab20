package lab

import (
	"context"
	"fmt"
	"net"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"sqm/internal/testutil"
)

// TestECNNegotiated checks what --ecn promises on the wire, not just the
// sysctl: a TCP connection from the client to the server through the
// lab's router and isp negotiates ECN with the option on, and does not
// with it off (Linux's default). TCP_INFO's TCPI_OPT_ECN is the kernel's
// record that the handshake agreed on ECN.
func TestECNNegotiated(t *testing.T) {
	testutil.RequireRoot(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	topo, err := newTopology(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := topo.Close(); err != nil {
			t.Error(err)
		}
	}()
	var ln net.Listener
	if err := topo.server.Do(func() error {
		ln, err = net.Listen("tcp4", serverIP+":0")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	for _, on := range []bool{true, false, true} {
		v, err := topo.setECN(on)
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range topo.all() {
			want := "2" // a new namespace's default; router and isp are never touched
			if on && (n == topo.client || n == topo.server) {
				want = "1"
			}
			if got, err := n.Sysctl("net.ipv4.tcp_ecn"); err != nil || got != want {
				t.Errorf("ecn %v: %s tcp_ecn = %q (%v), want %s", on, n.Name(), got, err, want)
			}
		}
		if want := map[bool]int{true: 1, false: 2}[on]; v != want {
			t.Errorf("setECN(%v) = %d, want %d", on, v, want)
		}
		ecn, err := negotiatedECN(topo, ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		if ecn != on {
			t.Errorf("ecn %v: client connection negotiated ECN = %v", on, ecn)
		}
	}
}

// tcpiOptECN is TCPI_OPT_ECN (include/uapi/linux/tcp.h), which x/sys lacks.
const tcpiOptECN = 8

// negotiatedECN connects from the client namespace and reports whether the
// handshake agreed on ECN.
func negotiatedECN(topo *topology, addr string) (bool, error) {
	var ecn bool
	err := topo.client.Do(func() error {
		c, err := net.DialTimeout("tcp4", addr, 10*time.Second)
		if err != nil {
			return err
		}
		defer c.Close()
		raw, err := c.(*net.TCPConn).SyscallConn()
		if err != nil {
			return err
		}
		var info *unix.TCPInfo
		var gerr error
		if err := raw.Control(func(fd uintptr) {
			info, gerr = unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO)
		}); err != nil {
			return err
		}
		if gerr != nil {
			return fmt.Errorf("TCP_INFO: %w", gerr)
		}
		ecn = info.Options&tcpiOptECN != 0
		return nil
	})
	return ecn, err
}
