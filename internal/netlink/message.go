//go:build linux

package netlink

import (
	"encoding/binary"
	"errors"
	"fmt"

	"golang.org/x/sys/unix"

	"sqm/internal/nlattr"
)

// Header is struct nlmsghdr.
type Header struct {
	Length   uint32 // whole message, header included; set by Send
	Type     uint16
	Flags    uint16
	Sequence uint32
	PID      uint32 // port id: the sender's, or the requester's in a reply
}

// headerLen is sizeof(struct nlmsghdr).
const headerLen = 16

// Message is one netlink message: a header and its payload.
type Message struct {
	Header Header
	Data   []byte
}

// Header flags (linux/netlink.h NLM_F_*), named as callers use them.
const (
	Request         = unix.NLM_F_REQUEST
	Multi           = unix.NLM_F_MULTI
	Acknowledge     = unix.NLM_F_ACK
	DumpInterrupted = unix.NLM_F_DUMP_INTR
	Dump            = unix.NLM_F_DUMP // NLM_F_ROOT|NLM_F_MATCH
	Replace         = unix.NLM_F_REPLACE
	Excl            = unix.NLM_F_EXCL
	Create          = unix.NLM_F_CREATE

	// flags of NLMSG_ERROR and NLMSG_DONE replies
	capped  = unix.NLM_F_CAPPED   // the request is echoed without its payload
	ackTLVs = unix.NLM_F_ACK_TLVS // extended ack attributes follow
)

// appendMessage appends m's wire form, its length filled in and its
// payload padded to 4 bytes.
func appendMessage(b []byte, m Message) []byte {
	n := headerLen + len(m.Data)
	var h [headerLen]byte
	binary.NativeEndian.PutUint32(h[0:], uint32(n))
	binary.NativeEndian.PutUint16(h[4:], m.Header.Type)
	binary.NativeEndian.PutUint16(h[6:], m.Header.Flags)
	binary.NativeEndian.PutUint32(h[8:], m.Header.Sequence)
	binary.NativeEndian.PutUint32(h[12:], m.Header.PID)
	b = append(b, h[:]...)
	b = append(b, m.Data...)
	for ; n%4 != 0; n++ {
		b = append(b, 0)
	}
	return b
}

// parseMessages splits one datagram into its messages. Payloads alias b.
// A datagram ends exactly after its last message's padding (which may be
// cut); anything else is an error saying which message and byte.
func parseMessages(b []byte) ([]Message, error) {
	var out []Message
	for off := 0; off < len(b); {
		rest := len(b) - off
		if rest < headerLen {
			return out, fmt.Errorf("netlink: message %d at byte %d: %d bytes left, too few for a %d-byte header", len(out)+1, off, rest, headerLen)
		}
		h := Header{
			Length:   binary.NativeEndian.Uint32(b[off:]),
			Type:     binary.NativeEndian.Uint16(b[off+4:]),
			Flags:    binary.NativeEndian.Uint16(b[off+6:]),
			Sequence: binary.NativeEndian.Uint32(b[off+8:]),
			PID:      binary.NativeEndian.Uint32(b[off+12:]),
		}
		switch {
		case h.Length < headerLen:
			return out, fmt.Errorf("netlink: message %d at byte %d (type %d): length %d is shorter than its header", len(out)+1, off, h.Type, h.Length)
		case uint64(h.Length) > uint64(rest):
			return out, fmt.Errorf("netlink: message %d at byte %d (type %d): length %d runs past the %d bytes left (truncated reply)", len(out)+1, off, h.Type, h.Length, rest)
		}
		n := int(h.Length)
		out = append(out, Message{Header: h, Data: b[off+headerLen : off+n]})
		off = min(off+(n+3)&^3, len(b))
	}
	return out, nil
}

// Error is the kernel's refusal of a request: NLMSG_ERROR with a negative
// errno, or an NLMSG_DONE ending a dump that failed. It unwraps to the
// errno, so errors.Is(err, unix.ENOENT) works.
type Error struct {
	Errno unix.Errno
	// Message is the kernel's explanation (NLMSGERR_ATTR_MSG), when
	// extended acks are on and the kernel gave one: "Specified qdisc kind
	// is unknown", which says far more than ENOENT.
	Message string
	// Offset is the byte in the request of the attribute the kernel
	// refused (NLMSGERR_ATTR_OFFS); 0 when it named none (the header,
	// at 0, is never what it names).
	Offset uint32
	// BadAck says what was wrong with the extended ack, which was then
	// ignored; nil when it was well formed or absent.
	BadAck error
}

func (e *Error) Error() string {
	s := "netlink: " + e.Errno.Error()
	switch {
	case e.Message != "" && e.Offset != 0:
		s += fmt.Sprintf(" (kernel: %q, at byte %d of the request)", e.Message, e.Offset)
	case e.Message != "":
		s += fmt.Sprintf(" (kernel: %q)", e.Message)
	case e.Offset != 0:
		s += fmt.Sprintf(" (at byte %d of the request)", e.Offset)
	}
	if e.BadAck != nil {
		s += "; its extended ack is malformed: " + e.BadAck.Error()
	}
	return s
}

func (e *Error) Unwrap() error { return e.Errno }

// ErrDumpInterrupted: the kernel's table changed while it dumped it
// (NLM_F_DUMP_INTR), so the dump may have missed or repeated entries. The
// dump is complete as a reply; ask again for a consistent one.
var ErrDumpInterrupted = errors.New("netlink: dump interrupted by a concurrent change (NLM_F_DUMP_INTR); retry it")

// ackError decodes an NLMSG_ERROR message: nil for an ack (errno 0), an
// *Error for a refusal, or an error naming what is malformed. A refusal
// whose extended ack is garbled is still an *Error with its errno.
func ackError(m Message) error {
	d := m.Data
	if len(d) < 4 {
		return fmt.Errorf("netlink: error message (seq %d) of %d bytes, too short for its errno", m.Header.Sequence, len(d))
	}
	errno := -int32(binary.NativeEndian.Uint32(d))
	if errno < 0 {
		return fmt.Errorf("netlink: error message (seq %d) carries a positive error %d, not a negative errno", m.Header.Sequence, -errno)
	}
	if errno == 0 {
		return nil // an ack; its attributes can only be a warning
	}
	e := &Error{Errno: unix.Errno(errno)}
	if m.Header.Flags&ackTLVs == 0 {
		return e
	}
	// struct nlmsgerr: the errno, then the request's header, then (unless
	// capped) the request's payload; the extended ack follows.
	if len(d) < 4+headerLen {
		e.BadAck = fmt.Errorf("error message (seq %d) of %d bytes is too short for the request it echoes", m.Header.Sequence, len(d))
		return e
	}
	start := 4 + headerLen
	if m.Header.Flags&capped == 0 {
		echoed := binary.NativeEndian.Uint32(d[4:])
		if echoed < headerLen || uint64(echoed)+4 > uint64(len(d)) {
			e.BadAck = fmt.Errorf("the request it echoes claims %d bytes, %d are there", echoed, len(d)-4)
			return e
		}
		start = min(4+(int(echoed)+3)&^3, len(d))
	}
	e.BadAck = extAck(d[start:], e)
	return e
}

// doneError decodes an NLMSG_DONE: nil if the dump succeeded. Its payload
// is the dump's error (an int), then, with NLM_F_ACK_TLVS, an extended
// ack; kernels before 2.6.x sent it empty.
func doneError(m Message) error {
	d := m.Data
	if len(d) < 4 {
		return nil
	}
	errno := -int32(binary.NativeEndian.Uint32(d))
	if errno <= 0 {
		return nil
	}
	e := &Error{Errno: unix.Errno(errno)}
	if m.Header.Flags&ackTLVs != 0 {
		e.BadAck = extAck(d[4:], e)
	}
	return e
}

// extAck reads the NLMSGERR_ATTR_* attributes sqm shows.
func extAck(b []byte, e *Error) error {
	ad := nlattr.NewDecoder(b)
	for ad.Next() {
		switch ad.Type() {
		case unix.NLMSGERR_ATTR_MSG:
			e.Message = ad.String()
		case unix.NLMSGERR_ATTR_OFFS:
			e.Offset = ad.Uint32()
		}
	}
	return ad.Err()
}

// exchange is what a request's replies must look like: they carry its
// sequence number and the requester's port id, and end with an ack, a
// NLMSG_DONE (dumps), or the one reply of a plain request. Replies of an
// earlier request (whose answer was given up on) and messages for
// someone else are skipped, not errors: they are not this request's.
type exchange struct {
	seq, port uint32
	dump, ack bool
	out       []Message
	intr      bool
}

// take consumes one datagram's messages; done is true when the exchange
// is over (err set if it failed).
func (x *exchange) take(msgs []Message) (done bool, err error) {
	for _, m := range msgs {
		if m.Header.Sequence != x.seq || m.Header.PID != x.port {
			continue
		}
		switch m.Header.Type {
		case unix.NLMSG_NOOP:
			continue
		case unix.NLMSG_ERROR:
			if err := ackError(m); err != nil {
				return true, err
			}
			if !x.dump {
				return true, nil
			}
		case unix.NLMSG_DONE:
			if err := doneError(m); err != nil {
				return true, err
			}
			if x.intr {
				return true, ErrDumpInterrupted
			}
			if !x.ack || x.dump {
				return true, nil
			}
		case unix.NLMSG_OVERRUN:
			return true, fmt.Errorf("netlink: the kernel reports an overrun (NLMSG_OVERRUN): replies were lost")
		default:
			if m.Header.Flags&DumpInterrupted != 0 {
				x.intr = true
			}
			x.out = append(x.out, m)
			if !x.dump && !x.ack && m.Header.Flags&Multi == 0 {
				return true, nil
			}
		}
	}
	return false, nil
}
