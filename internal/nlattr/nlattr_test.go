package nlattr

import (
	"bytes"
	"encoding/binary"
	"testing"
)

// TestLayout pins the bytes of each encoder: the length counts the 4-byte
// header and the payload but not the padding, and the padding is zero.
func TestLayout(t *testing.T) {
	h := func(n, typ uint16) []byte {
		b := make([]byte, 4)
		binary.NativeEndian.PutUint16(b, n)
		binary.NativeEndian.PutUint16(b[2:], typ)
		return b
	}
	cat := func(bs ...[]byte) []byte { return bytes.Join(bs, nil) }
	u32 := make([]byte, 4)
	binary.NativeEndian.PutUint32(u32, 0x01020304)
	for _, c := range []struct {
		name      string
		got, want []byte
	}{
		{"empty", Attr(7, nil), h(4, 7)},
		{"padded", Attr(1, []byte{0xaa}), cat(h(5, 1), []byte{0xaa, 0, 0, 0})},
		{"aligned", Attr(2, []byte{1, 2, 3, 4}), cat(h(8, 2), []byte{1, 2, 3, 4})},
		{"nest", Nest(2, Attr(1, nil)), cat(h(8, 2|Nested), h(4, 1))},
		{"u32", U32(3, 0x01020304), cat(h(8, 3), u32)},
		{"str", Str(1, "cake"), cat(h(9, 1), []byte("cake\x00"), []byte{0, 0, 0})},
	} {
		if !bytes.Equal(c.got, c.want) {
			t.Errorf("%s: got % x, want % x", c.name, c.got, c.want)
		}
	}
}
