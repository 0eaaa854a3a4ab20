//go:build darwin || freebsd

package bloat

import (
	"encoding/binary"
	"errors"
	"net"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The BSD kernels (macOS and FreeBSD) give what the tester needs from
// Linux except the TCP counters: DSCP marks with the same socket options,
// receive timestamps with SO_TIMESTAMP (microseconds, where Linux's
// SO_TIMESTAMPNS gives nanoseconds), and the received TOS with IP_RECVTOS.
// Their TCP_INFO has no acknowledged or unsent byte counts that
// golang.org/x/sys exposes, so uploads are counted as on Windows (see
// osNotes).

func setTOS(rc syscall.RawConn, dscp int) error {
	var serr error
	err := rc.Control(func(fd uintptr) {
		tos := dscp << 2
		e4 := unix.SetsockoptInt(int(fd), unix.IPPROTO_IP, unix.IP_TOS, tos)
		e6 := unix.SetsockoptInt(int(fd), unix.IPPROTO_IPV6, unix.IPV6_TCLASS, tos)
		if e4 != nil && e6 != nil {
			serr = e4
		}
	})
	if err != nil {
		return err
	}
	return serr
}

func setDSCP(c net.Conn, dscp int) error {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return errors.New("not a socket")
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return err
	}
	return setTOS(rc, dscp)
}

func notSent(c net.Conn) (int64, bool) { return 0, false }

func bytesAcked(c net.Conn) (int64, bool) { return 0, false }

func enableRxTimestamps(c net.PacketConn) {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return
	}
	if rc, err := sc.SyscallConn(); err == nil {
		rc.Control(func(fd uintptr) {
			unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_TIMESTAMP, 1)
			unix.SetsockoptInt(int(fd), unix.IPPROTO_IP, unix.IP_RECVTOS, 1)
			unix.SetsockoptInt(int(fd), unix.IPPROTO_IPV6, unix.IPV6_RECVTCLASS, 1)
		})
	}
}

// pingConn is a macOS ICMP datagram socket. Unlike Linux's, it hands IPv4
// replies over with their IP header, which readStamped strips.
type pingConn struct{ *net.UDPConn }

func readStamped(c net.PacketConn, b, oob []byte) (int, net.Addr, time.Time, int, error) {
	var n, oobn int
	var from net.Addr
	var err error
	strip4 := false
	switch c := c.(type) {
	case *pingConn:
		var a *net.UDPAddr
		n, oobn, _, a, err = c.ReadMsgUDP(b, oob)
		from = a
		strip4 = a != nil && a.IP.To4() != nil
	case *net.UDPConn:
		var a *net.UDPAddr
		n, oobn, _, a, err = c.ReadMsgUDP(b, oob)
		from = a
	case *net.IPConn:
		var a *net.IPAddr
		n, oobn, _, a, err = c.ReadMsgIP(b, oob)
		from = a
		strip4 = a != nil && a.IP.To4() != nil
	default:
		n, from, err = c.ReadFrom(b)
	}
	at := time.Now()
	if err != nil {
		return n, from, at, -1, err
	}
	at, dscp := parseBSDControl(oob[:oobn], at)
	if strip4 && n >= 20 && b[0]>>4 == 4 {
		if hl := int(b[0]&0x0f) * 4; hl <= n {
			n = copy(b, b[hl:n])
		}
	}
	return n, from, at, dscp, nil
}

// parseBSDControl takes the receive time and DSCP from a datagram's
// control messages; at and -1 stand when they are missing.
func parseBSDControl(oob []byte, at time.Time) (time.Time, int) {
	dscp := -1
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return at, dscp
	}
	for _, m := range msgs {
		switch {
		case m.Header.Level == unix.SOL_SOCKET && m.Header.Type == unix.SCM_TIMESTAMP && len(m.Data) >= int(unsafe.Sizeof(unix.Timeval{})):
			tv := (*unix.Timeval)(unsafe.Pointer(&m.Data[0]))
			at = time.Unix(int64(tv.Sec), int64(tv.Usec)*1000)
		case m.Header.Level == unix.IPPROTO_IP && (m.Header.Type == unix.IP_RECVTOS || m.Header.Type == unix.IP_TOS) && len(m.Data) >= 1:
			dscp = int(m.Data[0]) >> 2
		case m.Header.Level == unix.IPPROTO_IPV6 && m.Header.Type == unix.IPV6_TCLASS && len(m.Data) >= 4:
			dscp = int(binary.NativeEndian.Uint32(m.Data)) >> 2 & 0x3f
		}
	}
	return at, dscp
}

// writeMarked sends b marked with dscp through a per-packet control
// message, as on Linux; if the kernel refuses it the packet goes unmarked.
func writeMarked(c net.PacketConn, b []byte, addr net.Addr, dscp int) {
	uc, ok := c.(*net.UDPConn)
	ua, ok2 := addr.(*net.UDPAddr)
	if !ok || !ok2 || dscp <= 0 {
		c.WriteTo(b, addr)
		return
	}
	level, typ := unix.IPPROTO_IPV6, unix.IPV6_TCLASS
	if ua.IP.To4() != nil {
		level, typ = unix.IPPROTO_IP, unix.IP_TOS
	}
	oob := make([]byte, unix.CmsgSpace(4))
	h := (*unix.Cmsghdr)(unsafe.Pointer(&oob[0]))
	h.Level, h.Type = int32(level), int32(typ)
	h.SetLen(unix.CmsgLen(4))
	binary.NativeEndian.PutUint32(oob[unix.CmsgLen(0):], uint32(dscp<<2))
	if _, _, err := uc.WriteMsgUDP(b, oob, ua); err != nil {
		c.WriteTo(b, addr)
	}
}

func setRcvLowat(c net.Conn, n int) {
	if sc, ok := c.(syscall.Conn); ok {
		if rc, err := sc.SyscallConn(); err == nil {
			rc.Control(func(fd uintptr) {
				unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVLOWAT, n)
			})
		}
	}
}
