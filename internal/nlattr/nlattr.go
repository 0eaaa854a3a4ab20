// Package nlattr encodes and decodes netlink attributes (struct nlattr:
// length, type, payload padded to 4 bytes) in the host's byte order, as
// the kernel reads and writes them. sqm builds its tc and link requests
// from these itself rather than through a library's typed encoders, which
// cost the router build hundreds of KB (docs/testing.md, "Package sizes");
// the one layout lives here so that the kernel package and the feature
// prober write the same bytes, and the one decoder (which replaced
// mdlayher/netlink's) reads dumps, link messages and extended acks.
package nlattr

import (
	"bytes"
	"encoding/binary"
	"fmt"
)

// Nested is NLA_F_NESTED, which strict kernel policies (fq_pie's, newer
// kernels' tc options) require on attributes that hold attributes.
const Nested = 0x8000

// Attr encodes one attribute of type typ holding data.
func Attr(typ uint16, data []byte) []byte {
	n := 4 + len(data)
	b := make([]byte, (n+3)&^3)
	binary.NativeEndian.PutUint16(b[0:], uint16(n))
	binary.NativeEndian.PutUint16(b[2:], typ)
	copy(b[4:], data)
	return b
}

// Nest is Attr with Nested set: data is itself attributes.
func Nest(typ uint16, data []byte) []byte { return Attr(typ|Nested, data) }

// U32 is an attribute holding one __u32.
func U32(typ uint16, v uint32) []byte {
	var b [4]byte
	binary.NativeEndian.PutUint32(b[:], v)
	return Attr(typ, b[:])
}

// Str is an attribute holding s as a NUL-terminated C string.
func Str(typ uint16, s string) []byte { return Attr(typ, append([]byte(s), 0)) }

// Decoder walks one level of attributes as the kernel lays them out (the
// length counts the header and payload, not the padding). Payloads are
// slices of the input, not copies: a netlink reply's buffer is not reused,
// so keeping them is safe. A nest is decoded with a Decoder of its own on
// Bytes(). The zero value holds no attributes.
type Decoder struct {
	b    []byte
	off  int // start of the next attribute
	at   int // start of the current one, for errors
	typ  uint16
	data []byte
	err  error
}

// NewDecoder returns a Decoder over b.
func NewDecoder(b []byte) *Decoder { return &Decoder{b: b} }

// Next moves to the next attribute; false at the end or on malformed
// input, which Err then describes.
func (d *Decoder) Next() bool {
	if d.err != nil || d.off >= len(d.b) {
		return false
	}
	rest := len(d.b) - d.off
	if rest < 4 {
		d.err = fmt.Errorf("nlattr: %d stray bytes at byte %d, too few for an attribute header", rest, d.off)
		return false
	}
	n := int(binary.NativeEndian.Uint16(d.b[d.off:]))
	typ := binary.NativeEndian.Uint16(d.b[d.off+2:])
	switch {
	case n < 4:
		d.err = fmt.Errorf("nlattr: attribute type %d at byte %d: length %d is shorter than its 4-byte header", typ&typeMask, d.off, n)
		return false
	case n > rest:
		d.err = fmt.Errorf("nlattr: attribute type %d at byte %d: length %d runs past the %d bytes left", typ&typeMask, d.off, n, rest)
		return false
	}
	d.at, d.typ, d.data = d.off, typ&typeMask, d.b[d.off+4:d.off+n]
	d.off = min(d.off+(n+3)&^3, len(d.b)) // the last one's padding may be cut
	return true
}

// typeMask drops NLA_F_NESTED and NLA_F_NET_BYTEORDER from a type.
const typeMask = 0x3fff

// Type is the current attribute's type without its flag bits.
func (d *Decoder) Type() uint16 { return d.typ }

// Bytes is the current attribute's payload.
func (d *Decoder) Bytes() []byte { return d.data }

// String is the payload as a C string: up to the first NUL.
func (d *Decoder) String() string {
	if i := bytes.IndexByte(d.data, 0); i >= 0 {
		return string(d.data[:i])
	}
	return string(d.data)
}

// Uint32 is the payload as a __u32; another length is an error (Err),
// since reading a u16 or u64 field as a u32 would give a wrong number.
func (d *Decoder) Uint32() uint32 {
	if len(d.data) != 4 {
		if d.err == nil {
			d.err = fmt.Errorf("nlattr: attribute type %d at byte %d: %d bytes, want 4 for a u32", d.typ, d.at, len(d.data))
		}
		return 0
	}
	return binary.NativeEndian.Uint32(d.data)
}

// Err is what made Next stop early, or a payload of the wrong size.
func (d *Decoder) Err() error { return d.err }
