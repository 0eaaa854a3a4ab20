package reflector

import (
	"encoding/binary"
	"time"
)

// ICMP message types used here.
const (
	icmp4EchoReply  = 0
	icmp4Echo       = 8
	icmp4Timestamp  = 13
	icmp4TSReply    = 14
	icmp6Echo       = 128
	icmp6EchoReply  = 129
	icmpEchoLen     = 8 + 8 // header, then our tag and the full sequence
	icmpTimestampLn = 20
)

// echoTag marks the payload of our echo requests, so replies to another
// program's pings (a raw socket sees them all) are told apart.
var echoTag = [4]byte{'s', 'q', 'm', 'a'}

// appendEcho appends an echo request (type typ) with id and seq to b.
// The checksum is filled for IPv4; the kernel computes ICMPv6's (and a
// datagram socket's in any case).
func appendEcho(b []byte, typ byte, id uint16, seq uint32) []byte {
	be := binary.BigEndian
	start := len(b)
	b = append(b, typ, 0, 0, 0)
	b = be.AppendUint16(b, id)
	b = be.AppendUint16(b, uint16(seq))
	b = append(b, echoTag[:]...)
	b = be.AppendUint32(b, seq)
	if typ == icmp4Echo {
		be.PutUint16(b[start+2:], checksum(b[start:]))
	}
	return b
}

// parseEcho reads an echo reply (type typ) and returns its sequence
// number; ok is false for anything else, including other programs' pings.
// id is checked unless anyID (a datagram socket: the kernel sets and
// checks the id itself).
func parseEcho(b []byte, typ byte, id uint16, anyID bool) (seq uint32, ok bool) {
	if len(b) < icmpEchoLen || b[0] != typ || b[1] != 0 || [4]byte(b[8:12]) != echoTag {
		return 0, false
	}
	be := binary.BigEndian
	if !anyID && be.Uint16(b[4:]) != id {
		return 0, false
	}
	seq = be.Uint32(b[12:])
	if uint16(seq) != be.Uint16(b[6:]) {
		return 0, false
	}
	return seq, true
}

// appendTimestamp appends an ICMP timestamp request with originate
// stamp orig (ms since midnight UTC) to b.
func appendTimestamp(b []byte, id, seq uint16, orig uint32) []byte {
	be := binary.BigEndian
	start := len(b)
	b = append(b, icmp4Timestamp, 0, 0, 0)
	b = be.AppendUint16(b, id)
	b = be.AppendUint16(b, seq)
	b = be.AppendUint32(b, orig)
	b = append(b, 0, 0, 0, 0, 0, 0, 0, 0)
	be.PutUint16(b[start+2:], checksum(b[start:]))
	return b
}

// tsReply is a parsed ICMP timestamp reply (RFC 792): the three stamps
// in milliseconds since midnight UTC, as the wire has them.
type tsReply struct {
	id, seq                 uint16
	orig, receive, transmit uint32
}

// parseTimestampReply reads a timestamp reply; ok is false if b is not one.
func parseTimestampReply(b []byte) (r tsReply, ok bool) {
	if len(b) < icmpTimestampLn || b[0] != icmp4TSReply || b[1] != 0 {
		return r, false
	}
	be := binary.BigEndian
	r.id, r.seq = be.Uint16(b[4:]), be.Uint16(b[6:])
	r.orig, r.receive, r.transmit = be.Uint32(b[8:]), be.Uint32(b[12:]), be.Uint32(b[16:])
	return r, true
}

// checksum is the Internet checksum (RFC 1071) of b.
func checksum(b []byte) uint16 {
	var s uint32
	for ; len(b) >= 2; b = b[2:] {
		s += uint32(b[0])<<8 | uint32(b[1])
	}
	if len(b) == 1 {
		s += uint32(b[0]) << 8
	}
	for s > 0xffff {
		s = s>>16 + s&0xffff
	}
	return ^uint16(s)
}

const (
	day   = 24 * time.Hour
	dayMs = uint32(day / time.Millisecond) // 86,400,000
)

// sinceMidnight is the time since midnight UTC of ns (Unix
// nanoseconds), as ICMP timestamps count.
func sinceMidnight(ns int64) time.Duration {
	d := time.Duration(ns % int64(day))
	if d < 0 {
		d += day
	}
	return d
}

// wrapDay brings d, a difference of two times of day, into [-12h, 12h):
// a probe sent at 23:59:59.990 and stamped 00:00:00.005 by the reflector
// took 15 ms, not minus a day. The offset between two clocks is then also
// folded into that range, which changes nothing for delays used as
// changes unless the offset itself crosses ±12 h.
func wrapDay(d time.Duration) time.Duration {
	d %= day
	switch {
	case d >= day/2:
		d -= day
	case d < -day/2:
		d += day
	}
	return d
}

// Why CheckTimestamps refuses a reply's stamps; "" when it takes them.
const (
	tsHighBit   = "non-standard stamps (high bit set)"
	tsBeyondDay = "stamps beyond a day"
	tsLittle    = "stamps in little-endian byte order"
	tsZero      = "zero stamps"
	tsMirror    = "stamps that copy the originate stamp"
	tsCoarse    = "whole-second stamps"
	tsTurnround = "transmit stamp before receive or more than a second after"
)

// maxTurnaround is the longest receive-to-transmit time a reflector's
// stamps may claim; more means they are not times of one clock.
const maxTurnaround = time.Second

// CheckTimestamps says whether the stamps of an ICMP timestamp reply can
// give one-way delays, and if not why: RFC 792 says a host that cannot
// give milliseconds since midnight UTC sets the high bit; some reflectors
// answer zeros, copy the originate stamp, or write the wrong byte order.
// Such a reflector still gives a valid round trip. Two faults show only
// across replies, and the prober catches them: stamps in whole seconds,
// and stamps that copy the originate stamp (which a near reflector's
// honest stamps do too, when the round trip is under a millisecond).
func CheckTimestamps(orig, receive, transmit uint32) string {
	const high = 1 << 31
	switch {
	case receive&high != 0 || transmit&high != 0:
		return tsHighBit
	case receive >= dayMs || transmit >= dayMs:
		if swap(receive) < dayMs && swap(transmit) < dayMs {
			return tsLittle
		}
		return tsBeyondDay
	case receive == 0 && transmit == 0:
		return tsZero
	}
	if t := wrapDay(time.Duration(int64(transmit)-int64(receive)) * time.Millisecond); t < 0 || t > maxTurnaround {
		return tsTurnround
	}
	return ""
}

func swap(v uint32) uint32 {
	return v>>24 | v>>8&0xff00 | v<<8&0xff0000 | v<<24
}

// timestampDelays are the one-way delays of a timestamp reply: up from
// our send time to the reflector's receive stamp, down from its transmit
// stamp to our receive time, both wrapped at midnight. Our side's times
// are taken to the nanosecond, the reflector's are truncated to the
// millisecond, so up reads up to 1 ms short and down up to 1 ms long.
//
// sent and recv are Unix nanoseconds of our clock.
func timestampDelays(sent, recv int64, receive, transmit uint32) (up, down time.Duration) {
	up = wrapDay(time.Duration(receive)*time.Millisecond - sinceMidnight(sent))
	down = wrapDay(sinceMidnight(recv) - time.Duration(transmit)*time.Millisecond)
	return up, down
}

// msSinceMidnight is the originate stamp for a probe sent at ns.
func msSinceMidnight(ns int64) uint32 {
	return uint32(sinceMidnight(ns) / time.Millisecond)
}
