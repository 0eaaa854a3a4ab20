package irtt

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"syscall"
	"time"
)

// Conn is the socket Open talks over: a *net.UDPConn connected to the
// server satisfies it. An interface, so that this package does not link
// package net, which the router build may not (its reflector probing opens
// irtt sessions over raw sockets, with AppendOpen and ParseOpenReply).
type Conn interface {
	io.ReadWriter
	SetReadDeadline(time.Time) error
}

// Session is one open irtt connection. It builds echo requests and checks
// replies but does no I/O after Open: the caller reads the socket itself,
// so it can take kernel receive timestamps.
type Session struct {
	conn io.Writer // for Close; nil for a session from ParseOpenReply
	key  []byte
	// Token is the server's name for the connection, in every packet after
	// the open.
	Token uint64
	// Params are what the server granted, which may differ from the request:
	// a longer interval, a shorter duration, fewer stamps.
	Params Params
	reply  Layout
	reqLen int
}

// openTimeouts are how long each open request waits for the reply before
// the next is sent: a lost open costs a second, a dead server 7 s.
var openTimeouts = []time.Duration{time.Second, 2 * time.Second, 4 * time.Second}

// Open opens a connection over conn, which must be connected to the
// server, asking for want. It retries the open request as irtt's client
// does and fails with an error that says why: no reply (server down, port
// filtered, wrong or missing key, since a server drops what it cannot
// authenticate), port unreachable, a reply that fails the HMAC, or a server
// that refuses the protocol version.
func Open(ctx context.Context, conn Conn, want Params, key []byte) (*Session, error) {
	if len(key) > 0 && !HMAC {
		return nil, ErrHMACOmitted
	}
	req := AppendOpen(nil, want, key)
	defer conn.SetReadDeadline(time.Time{})
	buf := make([]byte, 1500)
	var lastBad error
	for _, to := range openTimeouts {
		if _, err := conn.Write(req); err != nil {
			return nil, fmt.Errorf("irtt: send open request: %w", err)
		}
		deadline := time.Now().Add(to)
		if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
			deadline = d
		}
		conn.SetReadDeadline(deadline)
		for {
			n, err := conn.Read(buf)
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			if err != nil {
				if errors.Is(err, os.ErrDeadlineExceeded) {
					break
				}
				// Linux reports an ICMP port unreachable as ECONNREFUSED,
				// Windows as WSAECONNRESET.
				if errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) {
					return nil, errors.New("irtt: no irtt server on that port (port unreachable)")
				}
				return nil, fmt.Errorf("irtt: read open reply: %w", err)
			}
			s, err := ParseOpenReply(buf[:n], key)
			if err != nil {
				lastBad = err
				continue
			}
			s.conn = conn
			return s, nil
		}
	}
	if lastBad != nil {
		return nil, fmt.Errorf("irtt: no valid open reply in %v; the last one was refused: %w", total(openTimeouts), lastBad)
	}
	if len(key) > 0 {
		return nil, fmt.Errorf("irtt: no reply to the open request in %v (server down, port filtered, or the HMAC key is not the server's)", total(openTimeouts))
	}
	return nil, fmt.Errorf("irtt: no reply to the open request in %v (server down, port filtered, or the server wants an HMAC key)", total(openTimeouts))
}

func total(ds []time.Duration) time.Duration {
	var t time.Duration
	for _, d := range ds {
		t += d
	}
	return t
}

// AppendOpen appends the open request asking for want (at this client's
// protocol version) to b.
func AppendOpen(b []byte, want Params, key []byte) []byte {
	want.Version = ProtocolVersion
	return (&Packet{Flags: FlagOpen, Payload: want.Append(nil)}).Append(b, Layout{}, key, 0)
}

// ParseOpenReply checks an open reply and makes the session it grants. A
// session made so has no socket: end it by sending AppendClose's packet.
func ParseOpenReply(b []byte, key []byte) (*Session, error) {
	if len(key) > 0 && !HMAC {
		return nil, ErrHMACOmitted
	}
	p, err := Parse(b, Layout{Token: true}, key)
	if err != nil {
		return nil, err
	}
	if p.Flags&FlagReply == 0 || p.Flags&FlagOpen == 0 {
		return nil, fmt.Errorf("irtt: expected an open reply, got flags %#02x", p.Flags)
	}
	got, err := ParseParams(p.Payload)
	if err != nil {
		return nil, err
	}
	if p.Flags&FlagClose != 0 {
		if got.Version != ProtocolVersion {
			return nil, fmt.Errorf("irtt: the server closed the connection at open: it speaks protocol version %d, this client %d", got.Version, ProtocolVersion)
		}
		return nil, errors.New("irtt: the server closed the connection at open")
	}
	if p.Token == 0 {
		return nil, errors.New("irtt: the server's open reply has a zero connection token")
	}
	s := &Session{key: key, Token: p.Token, Params: got,
		reply: Layout{Token: true, Seqno: true, Stats: got.ReceivedStats, At: got.StampAt, Clock: got.Clock}}
	if got.StampAt == AtNone {
		s.reply.Clock = 0
	}
	// Requests are as long as replies, as irtt's client makes them, so
	// both directions carry the same bytes.
	s.reqLen = max(s.reply.Len(), got.Length)
	if len(key) > 0 {
		s.reqLen += hmacLen
	}
	return s, nil
}

// AppendRequest appends the echo request with sequence number seq to b.
func (s *Session) AppendRequest(b []byte, seq uint32) []byte {
	p := Packet{Token: s.Token, Seqno: seq}
	return p.Append(b, Layout{Token: true, Seqno: true}, s.key, s.reqLen)
}

// Errors of ParseReply besides those of Parse.
var (
	ErrNotReply = errors.New("irtt: not an echo reply")
	ErrToken    = errors.New("irtt: reply for another connection")
	// ErrClosed is a close packet without an echo reply in it.
	ErrClosed = errors.New("irtt: the server closed the connection")
)

// ParseReply checks an echo reply and returns it. A reply with FlagClose
// set is still a valid reply, the last: the server ended the connection
// (its duration limit), so later probes go unanswered.
func (s *Session) ParseReply(b []byte) (Packet, error) {
	p, err := Parse(b, s.reply, s.key)
	if err != nil {
		if errors.Is(err, ErrShort) && len(b) >= headerLen && b[3]&FlagClose != 0 {
			// A close packet may carry only the token.
			if q, err2 := Parse(b, Layout{Token: true}, s.key); err2 == nil && q.Token == s.Token && q.Flags&FlagReply != 0 {
				return q, ErrClosed
			}
		}
		return p, err
	}
	if p.Flags&FlagReply == 0 || p.Flags&FlagOpen != 0 {
		return p, fmt.Errorf("%w: flags %#02x", ErrNotReply, p.Flags)
	}
	if p.Token != s.Token {
		return p, ErrToken
	}
	return p, nil
}

// Close tells the server the test is over, so it frees the connection
// now rather than after its idle timeout. It does not close the socket.
func (s *Session) Close() error {
	if s.conn == nil {
		return errors.New("irtt: session has no socket (made by ParseOpenReply): send AppendClose's packet")
	}
	_, err := s.conn.Write(s.AppendClose(nil))
	return err
}

// AppendClose appends the close packet of the session to b.
func (s *Session) AppendClose(b []byte) []byte {
	p := Packet{Flags: FlagClose, Token: s.Token}
	return p.Append(b, Layout{Token: true}, s.key, 0)
}

// HasStamps reports whether replies carry server timestamps from the wall
// clock (one-way delays) and the monotonic clock (server processing time).
func (s *Session) HasStamps() (wall, mono bool) {
	if s.Params.StampAt == AtNone {
		return false, false
	}
	return s.Params.Clock&Wall != 0, s.Params.Clock&Monotonic != 0
}

// ParseKey reads an HMAC key the way irtt's --hmac does: hex after a "0x"
// prefix, the bytes of the string otherwise, so a key written for irtt
// works here unchanged.
func ParseKey(s string) ([]byte, error) {
	if rest, ok := strings.CutPrefix(s, "0x"); ok {
		k, err := hex.DecodeString(rest)
		if err != nil {
			return nil, fmt.Errorf("irtt: HMAC key %q: after 0x it must be hex: %v", s, err)
		}
		if len(k) == 0 {
			return nil, errors.New("irtt: HMAC key \"0x\" is empty")
		}
		return k, nil
	}
	return []byte(s), nil
}
