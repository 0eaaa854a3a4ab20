// Package nlattr encodes netlink attributes (struct nlattr: length, type,
// payload padded to 4 bytes) in the host's byte order, as the kernel reads
// them. sqm builds its tc and link requests from these itself rather than
// through a library's typed encoders, which cost the router build hundreds
// of KB (docs/testing.md, "Package sizes"); the one layout lives here so
// that the kernel package and the feature prober write the same bytes.
package nlattr

import "encoding/binary"

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
