//go:build !linux

package rpm

import "syscall"

// lowatControl does nothing where TCP_NOTSENT_LOWAT is not set (see the
// Linux version for why it matters).
func lowatControl(_, _ string, _ syscall.RawConn) error { return nil }
