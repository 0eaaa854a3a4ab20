package bloat

import (
	"errors"
	"net"
	"syscall"

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

// bytesAcked returns how many bytes the peer has acknowledged on a TCP
// connection (tcpi_bytes_acked, Linux 4.1+). Upload goodput is measured from
// it, like iperf3's receiver side, rather than from bytes written, which
// would count data still queued in the socket buffer.
func bytesAcked(c net.Conn) (int64, bool) {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return 0, false
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return 0, false
	}
	var n int64
	var ierr error
	err = rc.Control(func(fd uintptr) {
		var info *unix.TCPInfo
		info, ierr = unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO)
		if ierr == nil {
			n = int64(info.Bytes_acked)
		}
	})
	if err != nil || ierr != nil {
		return 0, false
	}
	return n, true
}
