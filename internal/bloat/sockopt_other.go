//go:build !linux && !darwin && !freebsd && !windows

package bloat

import (
	"errors"
	"net"
	"syscall"
	"time"
)

func setTOS(rc syscall.RawConn, dscp int) error {
	return errors.New("dscp marking: not supported on this OS")
}

func setDSCP(c net.Conn, dscp int) error { return errors.New("dscp marking: not supported on this OS") }

func bytesAcked(c net.Conn) (int64, bool) { return 0, false }

func enableRxTimestamps(c net.PacketConn) {}

func readStamped(c net.PacketConn, b, oob []byte) (int, net.Addr, time.Time, int, error) {
	n, from, err := c.ReadFrom(b)
	return n, from, time.Now(), -1, err
}

func writeMarked(c net.PacketConn, b []byte, addr net.Addr, dscp int) { c.WriteTo(b, addr) }

func listenPing(v6 bool) (net.PacketConn, error) {
	return nil, errors.New("ping sockets: not supported on this OS")
}

func setRcvLowat(c net.Conn, n int) {}

func notSent(c net.Conn) (int64, bool) { return 0, false }

const icmpDeniedHint = "ICMP sockets were refused on this OS"

func osNotes() []string {
	return []string{
		"kernel receive timestamps not available on this OS: user-space timestamps used",
		notCountedNote,
	}
}
