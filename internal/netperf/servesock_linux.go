package netperf

import (
	"net"

	"golang.org/x/sys/unix"
)

// congestion is the TCP congestion control of a data connection, for
// the results of a client that asked (netperf's REMOTE_CONG_CONTROL).
func congestion(c *net.TCPConn) string {
	rc, err := c.SyscallConn()
	if err != nil {
		return ""
	}
	var name string
	rc.Control(func(fd uintptr) {
		name, _ = unix.GetsockoptString(int(fd), unix.IPPROTO_TCP, unix.TCP_CONGESTION)
	})
	return name
}
