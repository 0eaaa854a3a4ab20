package bloat

import (
	"errors"
	"net"
	"syscall"
	"time"
)

// Windows offers none of the socket options the tester uses on Linux
// through the standard socket API: it ignores IP_TOS (DSCP marks need a
// QoS policy set by an administrator), has no receive timestamps in the
// recvmsg path Go uses, no acknowledged-byte count, and no ICMP datagram
// socket (its own ICMP path is the IcmpSendEcho API, which this client
// does not use). Each falls back, and osNotes and the probe setup say so.

var errNoDSCP = errors.New("windows ignores IP_TOS; DSCP marks need a Windows QoS policy")

func setTOS(rc syscall.RawConn, dscp int) error { return errNoDSCP }

func setDSCP(c net.Conn, dscp int) error { return errNoDSCP }

func notSent(c net.Conn) (int64, bool) { return 0, false }

func bytesAcked(c net.Conn) (int64, bool) { return 0, false }

func enableRxTimestamps(c net.PacketConn) {}

func readStamped(c net.PacketConn, b, oob []byte) (int, net.Addr, time.Time, int, error) {
	n, from, err := c.ReadFrom(b)
	return n, from, time.Now(), -1, err
}

func writeMarked(c net.PacketConn, b []byte, addr net.Addr, dscp int) { c.WriteTo(b, addr) }

func listenPing(v6 bool) (net.PacketConn, error) {
	return nil, errors.New("windows has no ICMP datagram sockets")
}

const icmpDeniedHint = "windows has no ICMP datagram sockets and raw sockets need Administrator"

func setRcvLowat(c net.Conn, n int) {}

func osNotes() []string {
	return []string{
		"kernel receive timestamps not available on windows: user-space timestamps used, so RTTs include the wake-up delay of this process",
		notCountedNote,
	}
}
