// Package probewire is the UDP probe datagram of `sqm server`, on its own
// so that the router build, which may not link package net (and so not
// package bloat), can probe a server with the same codec the server and
// bloat's client use (internal/reflector does, for autorate).
//
// A probe is a fixed-size binary datagram. The server fills in its receive
// and send times (wall clock, Unix ns) and echoes it to its source:
//
//	0  magic "SQMP"      4  version(1) kind(1) dscp seen by server + 1 (1, 0 = unknown) pad(1)
//	8  token (16)        24 seq (8)
//	32 client send (8)   40 server receive (8)   48 server send (8)   = 56 bytes
//
// Kinds Request/Reply belong to a session (the token is the one the
// server's control connection granted); EchoRequest/EchoReply are the
// sessionless timestamp echo a router's autorate uses for hours on end,
// which a server answers rate-limited per address (see bloat's server).
// Replies are exactly as long as requests, so the server amplifies nothing.
package probewire

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// Len is the length of every probe datagram.
const Len = 56

// TokenLen is the length of a session token.
const TokenLen = 16

// Kinds of probe.
const (
	Request     = 0
	Reply       = 1
	EchoRequest = 2
	EchoReply   = 3
)

const (
	magic         = "SQMP"
	version       = 1
	offToken      = 8
	offSeq        = 24
	offClientSend = 32
	offServerRecv = 40
	offServerSend = 48
)

// Packet is one probe. Times are Unix nanoseconds of the clock of the
// host that stamped them.
type Packet struct {
	Kind byte
	// SeenDSCP, in replies, is the DSCP the request arrived with at the
	// server, plus one; 0 means unknown.
	SeenDSCP   byte
	Token      [TokenLen]byte
	Seq        uint64
	ClientSend int64
	ServerRecv int64
	ServerSend int64
}

// Marshal writes p into b, which must hold at least Len bytes, and
// returns b[:Len].
func (p *Packet) Marshal(b []byte) []byte {
	b = b[:Len]
	copy(b, magic)
	b[4] = version
	b[5] = p.Kind
	b[6], b[7] = p.SeenDSCP, 0
	copy(b[offToken:], p.Token[:])
	be := binary.BigEndian
	be.PutUint64(b[offSeq:], p.Seq)
	be.PutUint64(b[offClientSend:], uint64(p.ClientSend))
	be.PutUint64(b[offServerRecv:], uint64(p.ServerRecv))
	be.PutUint64(b[offServerSend:], uint64(p.ServerSend))
	return b
}

// Errors of Unmarshal.
var (
	ErrLen   = errors.New("probe: wrong length")
	ErrMagic = errors.New("probe: wrong magic or version")
	ErrKind  = errors.New("probe: unknown kind")
)

// Unmarshal parses b into p. It refuses any length but Len, other magic
// or versions, and unknown kinds, so a stray datagram is never reflected.
func (p *Packet) Unmarshal(b []byte) error {
	if len(b) != Len {
		return ErrLen
	}
	if string(b[:4]) != magic || b[4] != version {
		return ErrMagic
	}
	if b[5] > EchoReply {
		return fmt.Errorf("%w %d", ErrKind, b[5])
	}
	p.Kind = b[5]
	p.SeenDSCP = b[6]
	copy(p.Token[:], b[offToken:])
	be := binary.BigEndian
	p.Seq = be.Uint64(b[offSeq:])
	p.ClientSend = int64(be.Uint64(b[offClientSend:]))
	p.ServerRecv = int64(be.Uint64(b[offServerRecv:]))
	p.ServerSend = int64(be.Uint64(b[offServerSend:]))
	return nil
}
