package rpm

import (
	"net"
	"syscall"

	"golang.org/x/sys/unix"
)

// notsentLowat bounds the data a socket holds that has not yet been sent.
// Without it the kernel queues megabytes per connection, and a request or
// response multiplexed on a load-generating connection (the self probe)
// waits behind them in the sender before it meets the network's queue.
// The draft asks to avoid that backlog rather than to prioritise around it.
const notsentLowat = 16 << 10

// lowatControl sets TCP_NOTSENT_LOWAT on a socket before it connects or
// listens (failure is ignored: the measurement stays valid, only slower
// self probes).
func lowatControl(_, _ string, rc syscall.RawConn) error {
	rc.Control(func(fd uintptr) {
		unix.SetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_NOTSENT_LOWAT, notsentLowat)
	})
	return nil
}

// bytesAcked is the count of bytes the peer acknowledged on a TCP
// connection (tcpi_bytes_acked).
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
	var gerr error
	if err := rc.Control(func(fd uintptr) {
		var ti *unix.TCPInfo
		ti, gerr = unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO)
		if gerr == nil {
			n = int64(ti.Bytes_acked)
		}
	}); err != nil || gerr != nil {
		return 0, false
	}
	return n, true
}
