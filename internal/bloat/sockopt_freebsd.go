package bloat

import (
	"errors"
	"net"
)

// listenPing fails: FreeBSD has no unprivileged ICMP socket (its ping is
// setuid root), so ICMP probes need sqm test to run as root, through the
// raw socket the caller falls back to.
func listenPing(v6 bool) (net.PacketConn, error) {
	return nil, errors.New("freebsd has no unprivileged ICMP sockets")
}

const icmpDeniedHint = "freebsd has no unprivileged ICMP sockets and raw sockets need root"

func osNotes() []string {
	return []string{notCountedNote}
}
