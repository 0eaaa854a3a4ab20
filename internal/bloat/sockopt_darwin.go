package bloat

import (
	"errors"
	"net"
	"os"

	"golang.org/x/sys/unix"
)

// listenPing opens macOS's unprivileged ICMP datagram socket, which any
// user may open (the system's ping uses it too).
func listenPing(v6 bool) (net.PacketConn, error) {
	family, proto := unix.AF_INET, unix.IPPROTO_ICMP
	if v6 {
		family, proto = unix.AF_INET6, unix.IPPROTO_ICMPV6
	}
	fd, err := unix.Socket(family, unix.SOCK_DGRAM, proto)
	if err != nil {
		return nil, os.NewSyscallError("socket", err)
	}
	unix.CloseOnExec(fd)
	f := os.NewFile(uintptr(fd), "ping")
	defer f.Close()
	c, err := net.FilePacketConn(f)
	if err != nil {
		return nil, err
	}
	uc, ok := c.(*net.UDPConn)
	if !ok {
		c.Close()
		return nil, errPingConn
	}
	return &pingConn{uc}, nil
}

var errPingConn = errors.New("ICMP datagram socket did not open as a datagram connection")

const icmpDeniedHint = "ICMP datagram sockets were refused and raw sockets need root"

func osNotes() []string {
	return []string{notCountedNote}
}
