// Package irtt is a client for the UDP protocol of irtt (Isochronous
// Round-Trip Tester), so that sqm's latency probes can go to any `irtt
// server`, such as the public ones flent's users test against.
//
// It is written from irtt's documentation and protocol description, not
// from its code. The protocol in brief: a client opens a connection by
// sending its wanted test parameters; the server answers with a connection
// token and the parameters it grants (it may lengthen the interval, shorten
// the duration, or stamp less). Echo requests then carry the token and a
// sequence number, and each reply adds what was negotiated: the server's
// count of requests received and its receive and send timestamps, from its
// wall clock, its monotonic clock or both. A close packet ends the
// connection. Packets may carry an HMAC-MD5 over the whole packet when the
// server is started with a key.
//
// On the wire every packet starts with three magic bytes and a flags byte.
// The fields that follow are not self-describing: which of them are present
// follows from the packet's role and the negotiated parameters, always in
// this order, integers little-endian:
//
//	magic    3  0x14 0xa7 0x5b
//	flags    1  open 0x01, reply 0x02, close 0x04, HMAC 0x08
//	HMAC    16  if the HMAC flag is set
//	token    8  all packets but the open request
//	seqno    4  echo request and reply
//	rcount   4  reply, if the received count was negotiated
//	rwindow  8  reply, if the received window was negotiated
//	receive  8+8  wall, monotonic: reply, per negotiated stamps and clocks
//	midpoint 8+8  (instead of receive and send when the server stamps once)
//	send     8+8
//	payload     the open request's and reply's parameters; padding otherwise
//
// Parameters are a sequence of (uvarint key, zigzag varint value) pairs,
// the server fill a (key, uvarint length, bytes) string; unknown keys are
// skipped.
package irtt

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// DefaultPort is the port irtt servers listen on unless told otherwise.
const DefaultPort = 2112

// ProtocolVersion is the only protocol version irtt has spoken so far; a
// server with another closes the connection at open.
const ProtocolVersion = 1

var magic = [3]byte{0x14, 0xa7, 0x5b}

// Flags of the fourth byte.
const (
	FlagOpen  = 0x01
	FlagReply = 0x02
	FlagClose = 0x04
	FlagHMAC  = 0x08
	flagsAll  = FlagOpen | FlagReply | FlagClose | FlagHMAC
)

const (
	headerLen = 4  // magic and flags
	hmacLen   = 16 // HMAC-MD5
	tokenLen  = 8
	seqnoLen  = 4
)

// Errors a parse can return, for callers that count or explain them.
var (
	ErrShort    = errors.New("irtt: packet shorter than its fields")
	ErrMagic    = errors.New("irtt: bad magic bytes (not an irtt packet)")
	ErrFlags    = errors.New("irtt: unknown flag bits")
	ErrNoHMAC   = errors.New("irtt: packet has no HMAC but a key is set")
	ErrBadHMAC  = errors.New("irtt: HMAC does not match (wrong key?)")
	ErrUnwanted = errors.New("irtt: packet has an HMAC but no key is set")
	// ErrHMACOmitted: this build cannot sign or check HMACs (see HMAC).
	ErrHMACOmitted = errors.New("irtt: HMAC keys are not supported in this build (built with -tags sqm_notest, the router package: it links no crypto)")
)

// StampAt says which timestamps the server puts in replies.
type StampAt int

const (
	AtNone     StampAt = 0
	AtSend     StampAt = 1
	AtReceive  StampAt = 2
	AtBoth     StampAt = AtSend | AtReceive
	AtMidpoint StampAt = 4 // one stamp between receive and send
)

// Clock says from which clocks the server's timestamps come.
type Clock int

const (
	Wall       Clock = 1
	Monotonic  Clock = 2
	BothClocks Clock = Wall | Monotonic
)

// ReceivedStats says which receive statistics the server puts in replies.
type ReceivedStats int

const (
	ReceivedCount  ReceivedStats = 1
	ReceivedWindow ReceivedStats = 2
)

// Layout is which optional fields a packet has after magic, flags and
// HMAC. Both ends derive it from the packet's role and the parameters.
type Layout struct {
	Token, Seqno bool
	Stats        ReceivedStats
	At           StampAt
	Clock        Clock
}

// Len is the length of the fields of l, without the HMAC.
func (l Layout) Len() int {
	n := headerLen
	if l.Token {
		n += tokenLen
	}
	if l.Seqno {
		n += seqnoLen
	}
	if l.Stats&ReceivedCount != 0 {
		n += 4
	}
	if l.Stats&ReceivedWindow != 0 {
		n += 8
	}
	return n + 8*l.stamps()*l.clocks()
}

func (l Layout) stamps() int {
	switch {
	case l.At == AtMidpoint:
		return 1
	case l.At == AtBoth:
		return 2
	case l.At == AtSend || l.At == AtReceive:
		return 1
	}
	return 0
}

func (l Layout) clocks() int {
	n := 0
	if l.Clock&Wall != 0 {
		n++
	}
	if l.Clock&Monotonic != 0 {
		n++
	}
	return n
}

// Time is a server timestamp in nanoseconds: Wall since the Unix epoch,
// Mono from an arbitrary origin. A clock not negotiated reads 0.
type Time struct {
	Wall, Mono int64
}

// Packet is one parsed or to-be-built packet.
type Packet struct {
	Flags          byte
	Token          uint64
	Seqno          uint32
	ReceivedCount  uint32
	ReceivedWindow uint64
	// Receive and Send are the server's stamps; with AtMidpoint both hold
	// the midpoint.
	Receive, Send Time
	// Payload is what follows the fields: parameters in open packets.
	Payload []byte
}

// Append encodes p with layout l onto b, padded with zeros to at least
// minLen bytes, and signs it with key if key is not empty.
func (p *Packet) Append(b []byte, l Layout, key []byte, minLen int) []byte {
	start := len(b)
	flags := p.Flags &^ FlagHMAC
	if len(key) > 0 {
		flags |= FlagHMAC
	}
	b = append(b, magic[0], magic[1], magic[2], flags)
	macAt := len(b)
	if len(key) > 0 {
		b = append(b, make([]byte, hmacLen)...)
	}
	le := binary.LittleEndian
	if l.Token {
		b = le.AppendUint64(b, p.Token)
	}
	if l.Seqno {
		b = le.AppendUint32(b, p.Seqno)
	}
	if l.Stats&ReceivedCount != 0 {
		b = le.AppendUint32(b, p.ReceivedCount)
	}
	if l.Stats&ReceivedWindow != 0 {
		b = le.AppendUint64(b, p.ReceivedWindow)
	}
	stamp := func(t Time) {
		if l.Clock&Wall != 0 {
			b = le.AppendUint64(b, uint64(t.Wall))
		}
		if l.Clock&Monotonic != 0 {
			b = le.AppendUint64(b, uint64(t.Mono))
		}
	}
	switch {
	case l.At == AtMidpoint:
		stamp(p.Receive)
	default:
		if l.At&AtReceive != 0 {
			stamp(p.Receive)
		}
		if l.At&AtSend != 0 {
			stamp(p.Send)
		}
	}
	b = append(b, p.Payload...)
	for len(b)-start < minLen {
		b = append(b, 0)
	}
	if len(key) > 0 {
		sign(key, b[start:], b[macAt:macAt+hmacLen])
	}
	return b
}

// Parse decodes b, a packet with layout l, checking magic, flags and the
// HMAC against key. Payload aliases b.
func Parse(b []byte, l Layout, key []byte) (Packet, error) {
	var p Packet
	if len(b) < headerLen {
		return p, fmt.Errorf("%w: %d bytes, want at least %d", ErrShort, len(b), headerLen)
	}
	if b[0] != magic[0] || b[1] != magic[1] || b[2] != magic[2] {
		return p, fmt.Errorf("%w: %x", ErrMagic, b[:3])
	}
	p.Flags = b[3]
	if p.Flags&^flagsAll != 0 {
		return p, fmt.Errorf("%w: %#02x", ErrFlags, p.Flags)
	}
	need := l.Len()
	signed := p.Flags&FlagHMAC != 0
	if signed {
		need += hmacLen
	}
	if len(b) < need {
		return p, fmt.Errorf("%w: %d bytes, want at least %d", ErrShort, len(b), need)
	}
	switch {
	case len(key) > 0 && !signed:
		return p, ErrNoHMAC
	case len(key) == 0 && signed:
		return p, ErrUnwanted
	case signed:
		if !verify(key, b) {
			return p, ErrBadHMAC
		}
	}
	le := binary.LittleEndian
	i := headerLen
	if signed {
		i += hmacLen
	}
	u64 := func() uint64 { v := le.Uint64(b[i:]); i += 8; return v }
	if l.Token {
		p.Token = u64()
	}
	if l.Seqno {
		p.Seqno = le.Uint32(b[i:])
		i += 4
	}
	if l.Stats&ReceivedCount != 0 {
		p.ReceivedCount = le.Uint32(b[i:])
		i += 4
	}
	if l.Stats&ReceivedWindow != 0 {
		p.ReceivedWindow = u64()
	}
	stamp := func(t *Time) {
		if l.Clock&Wall != 0 {
			t.Wall = int64(u64())
		}
		if l.Clock&Monotonic != 0 {
			t.Mono = int64(u64())
		}
	}
	switch {
	case l.At == AtMidpoint:
		stamp(&p.Receive)
		p.Send = p.Receive
	default:
		if l.At&AtReceive != 0 {
			stamp(&p.Receive)
		}
		if l.At&AtSend != 0 {
			stamp(&p.Send)
		}
	}
	p.Payload = b[i:]
	return p, nil
}
