//go:build !linux

package bloat

import (
	"errors"
	"net"
	"syscall"
)

func setTOS(rc syscall.RawConn, dscp int) error {
	return errors.New("dscp marking: not supported on this OS")
}

func setDSCP(c net.Conn, dscp int) error { return errors.New("dscp marking: not supported on this OS") }

func bytesAcked(c net.Conn) (int64, bool) { return 0, false }
