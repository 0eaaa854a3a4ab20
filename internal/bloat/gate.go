package bloat

import (
	"context"
	"net"
	"net/netip"
	"time"
)

// This file lets another protocol served beside the bufferbloat one (the
// netperf server, internal/netperf) share this server's admission: its
// handshake pool, its session slots (per address key and in all) and its
// throttled log. One address then gets one test at a time whichever
// client it runs, and a stranger's connections count against one pool.

// Refusal reasons a Gate reports, for the other server's messages.
const (
	RefusedSessionsPerAddr = refusedSessionsPerAddr
	RefusedBusy            = refusedBusy
)

// Limits returns the limits in force, defaults filled in.
func (s *Server) Limits() Limits { return s.lim }

// AdmitConn charges a new connection from peer as the server charges its
// own (to the session of an address that holds one, else to the
// strangers' pool, per address key and in all). It returns a release
// func, to call once (more calls are harmless) when the connection has
// said what it is or closed, or why it was refused.
func (s *Server) AdmitConn(peer netip.Addr) (release func(), why string) {
	s.mu.Lock()
	tk, why := s.adm.admitConn(peer)
	s.mu.Unlock()
	if tk == nil {
		return nil, why
	}
	return func() {
		s.mu.Lock()
		s.adm.release(tk)
		s.mu.Unlock()
	}, ""
}

// AdmitSession takes a session slot for peer, waiting as a hello does
// (until until) when the address's own sessions stand in the way. end
// frees it (call it once) and wakes hellos waiting for it.
func (s *Server) AdmitSession(ctx context.Context, peer netip.Addr, until time.Time) (end func(), why string) {
	peer = peer.Unmap()
	if why := s.admitSession(ctx, peer, until); why != "" {
		return nil, why
	}
	return func() {
		s.mu.Lock()
		s.adm.endSession(peer)
		close(s.freed)
		s.freed = make(chan struct{})
		s.mu.Unlock()
	}, ""
}

// Reject counts a refusal or close of peer for reason and logs it through
// the server's limiter (the first in a 10 s window in full, then a count).
func (s *Server) Reject(peer net.Addr, reason, format string, args ...any) {
	s.reject(peer, reason, format, args...)
}

// SetDSCP marks a connection's packets with dscp (0-63), as the server's
// own load streams are marked.
func SetDSCP(c net.Conn, dscp int) error { return setDSCP(c, dscp) }

// PeerAddr is the unmapped IP address of a TCP or UDP address (the zero
// Addr for anything else).
func PeerAddr(a net.Addr) netip.Addr { return peerAddr(a) }

// LogSession logs a session's start or end (what says which, e.g.
// "netperf runs started from") through the limiter, keyed by what and the
// peer's address key: a client's test is a line each way, a client looping
// short ones a count.
func (s *Server) LogSession(peer net.Addr, what, format string, args ...any) {
	p := peerAddr(peer)
	s.logs.printf(what+" "+addrKey(p).String(), p, "server: %s: "+format, append([]any{peer}, args...)...)
}
