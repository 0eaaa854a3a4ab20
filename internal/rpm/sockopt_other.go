//go:build !linux

package rpm

import (
	"net"
	"syscall"
)

// lowatControl does nothing where TCP_NOTSENT_LOWAT is not set (see the
// Linux version for why it matters).
func lowatControl(_, _ string, _ syscall.RawConn) error { return nil }

// bytesAcked is unknown here; uploads count what the transport took.
func bytesAcked(net.Conn) (int64, bool) { return 0, false }
