package bloat

import (
	"encoding/binary"
	"errors"
	"net"
	"os"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// setTOS marks a socket's traffic with dscp (0..63) in the IPv4 TOS byte
// and, for IPv6 sockets, the traffic class. Marking fails only for exotic
// sockets; callers log and go on unmarked.
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

// notSent returns the bytes written to a TCP socket that the kernel has not
// sent yet (tcpi_notsent_bytes, Linux 4.6+).
func notSent(c net.Conn) (int64, bool) {
	info, ok := tcpInfo(c)
	if !ok {
		return 0, false
	}
	return int64(info.Notsent_bytes), true
}

// bytesAcked returns how many bytes the peer has acknowledged on a TCP
// connection (tcpi_bytes_acked, Linux 4.1+). Upload goodput is measured from
// it, like iperf3's receiver side, rather than from bytes written, which
// would count data still queued in the socket buffer.
func bytesAcked(c net.Conn) (int64, bool) {
	info, ok := tcpInfo(c)
	if !ok {
		return 0, false
	}
	return int64(info.Bytes_acked), true
}

// tcpInfo reads TCP_INFO of a TCP connection; false if c is not one or the
// kernel refuses.
func tcpInfo(c net.Conn) (*unix.TCPInfo, bool) {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return nil, false
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return nil, false
	}
	var info *unix.TCPInfo
	var ierr error
	err = rc.Control(func(fd uintptr) {
		info, ierr = unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO)
	})
	if err != nil || ierr != nil {
		return nil, false
	}
	return info, true
}

// enableRxTimestamps asks the kernel to stamp each received datagram
// (SO_TIMESTAMPNS), as ping does: user-space wake-up latency then no longer
// adds to the measured round trip.
func enableRxTimestamps(c net.PacketConn) {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return
	}
	if rc, err := sc.SyscallConn(); err == nil {
		rc.Control(func(fd uintptr) {
			unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_TIMESTAMPNS, 1)
			// Also report each datagram's TOS / traffic class, to see
			// whether the path kept the probes' DSCP marks.
			unix.SetsockoptInt(int(fd), unix.IPPROTO_IP, unix.IP_RECVTOS, 1)
			unix.SetsockoptInt(int(fd), unix.IPPROTO_IPV6, unix.IPV6_RECVTCLASS, 1)
		})
	}
}

// readStamped reads one datagram with its kernel receive time (the current
// time when the kernel gave none) and its DSCP (-1 if unknown). Raw IPv4
// sockets return the IP header; it is stripped so callers see the ICMP
// message.
func readStamped(c net.PacketConn, b, oob []byte) (int, net.Addr, time.Time, int, error) {
	var n, oobn int
	var from net.Addr
	var err error
	raw4 := false
	switch c := c.(type) {
	case *net.UDPConn:
		var a *net.UDPAddr
		n, oobn, _, a, err = c.ReadMsgUDP(b, oob)
		from = a
	case *net.IPConn:
		var a *net.IPAddr
		n, oobn, _, a, err = c.ReadMsgIP(b, oob)
		from = a
		raw4 = a != nil && a.IP.To4() != nil
	default:
		n, from, err = c.ReadFrom(b)
	}
	at := time.Now()
	dscp := -1
	if err != nil {
		return n, from, at, dscp, err
	}
	if msgs, perr := unix.ParseSocketControlMessage(oob[:oobn]); perr == nil {
		for _, m := range msgs {
			switch {
			case m.Header.Level == unix.SOL_SOCKET && m.Header.Type == unix.SCM_TIMESTAMPNS && len(m.Data) >= int(unsafe.Sizeof(unix.Timespec{})):
				ts := (*unix.Timespec)(unsafe.Pointer(&m.Data[0]))
				at = time.Unix(int64(ts.Sec), int64(ts.Nsec))
			case m.Header.Level == unix.IPPROTO_IP && m.Header.Type == unix.IP_TOS && len(m.Data) >= 1:
				dscp = int(m.Data[0]) >> 2
			case m.Header.Level == unix.IPPROTO_IPV6 && m.Header.Type == unix.IPV6_TCLASS && len(m.Data) >= 4:
				dscp = int(binary.NativeEndian.Uint32(m.Data)) >> 2 & 0x3f
			}
		}
	}
	if raw4 && n >= 20 && b[0]>>4 == 4 {
		hl := int(b[0]&0x0f) * 4
		if hl <= n {
			n = copy(b, b[hl:n])
		}
	}
	return n, from, at, dscp, nil
}

// writeMarked sends b to addr marked with dscp (per packet, so one socket
// can answer each probe kind with its own mark). If the kernel refuses the
// control message, the packet goes unmarked.
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

// listenPing opens an unprivileged ICMP echo ("ping") socket, allowed when
// the caller's group is in net.ipv4.ping_group_range.
func listenPing(v6 bool) (net.PacketConn, error) {
	family, proto := unix.AF_INET, unix.IPPROTO_ICMP
	if v6 {
		family, proto = unix.AF_INET6, unix.IPPROTO_ICMPV6
	}
	fd, err := unix.Socket(family, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, proto)
	if err != nil {
		return nil, os.NewSyscallError("socket", err)
	}
	f := os.NewFile(uintptr(fd), "ping")
	defer f.Close()
	return net.FilePacketConn(f)
}

// setRcvLowat makes a load socket readable only once n bytes are queued
// (TCP honours SO_RCVLOWAT for poll since Linux 4.18), so a receiver wakes
// a few hundred times a second instead of once per couple of segments.
func setRcvLowat(c net.Conn, n int) {
	if sc, ok := c.(syscall.Conn); ok {
		if rc, err := sc.SyscallConn(); err == nil {
			rc.Control(func(fd uintptr) {
				unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVLOWAT, n)
			})
		}
	}
}

const icmpDeniedHint = "unprivileged ping sockets are not allowed (sysctl net.ipv4.ping_group_range) and raw sockets need root or CAP_NET_RAW"

// osNotes is what this OS cannot give the tester; Linux gives it all.
func osNotes() []string { return nil }
