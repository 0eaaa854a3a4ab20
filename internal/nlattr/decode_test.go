package nlattr

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"strings"
	"testing"
)

// hdr is an attribute header of any length, in the host's byte order as
// the kernel writes it (so the table holds on big-endian MIPS too).
func hdr(length, typ uint16) []byte {
	b := make([]byte, 4)
	binary.NativeEndian.PutUint16(b, length)
	binary.NativeEndian.PutUint16(b[2:], typ)
	return b
}

// TestDecoder walks well-formed and broken attribute runs: what it yields
// and, for broken ones, the error naming the attribute and byte.
func TestDecoder(t *testing.T) {
	cat := func(bs ...[]byte) []byte { return bytes.Join(bs, nil) }
	for _, c := range []struct {
		name    string
		in      []byte
		want    string // "type=payload" per attribute
		wantErr string
	}{
		{"empty", nil, "", ""},
		{"three", cat(Str(3, "eth0"), U32(4, 1500), Attr(7, nil)), "3=eth0 4=1500 7=", ""},
		{"flags masked", Nest(18, Str(1, "ifb")), "18=" + string(Str(1, "ifb")), ""},
		{"last padding cut", Attr(1, []byte{0xaa})[:5], "1=\xaa", ""},
		{"stray bytes", cat(U32(4, 1), []byte{1, 0}), "4=1", "nlattr: 2 stray bytes at byte 8, too few for an attribute header"},
		{"length below header", cat(U32(4, 1), hdr(2, 9)), "4=1", "nlattr: attribute type 9 at byte 8: length 2 is shorter than its 4-byte header"},
		{"length past end", cat(U32(4, 1), hdr(40, 3), []byte{0, 0}), "4=1", "nlattr: attribute type 3 at byte 8: length 40 runs past the 6 bytes left"},
		{"u32 of 2 bytes", Attr(4, []byte{1, 2}), "4=0", "nlattr: attribute type 4 at byte 0: 2 bytes, want 4 for a u32"},
	} {
		t.Run(c.name, func(t *testing.T) {
			d := NewDecoder(c.in)
			var got []string
			for d.Next() {
				v := d.String()
				if d.Type() == 4 {
					v = fmt.Sprint(d.Uint32())
				}
				if d.Type() == 18 {
					v = string(d.Bytes())
				}
				got = append(got, fmt.Sprintf("%d=%s", d.Type(), v))
			}
			if s := strings.Join(got, " "); s != c.want {
				t.Errorf("got %q, want %q", s, c.want)
			}
			err := d.Err()
			if c.wantErr == "" && err != nil || c.wantErr != "" && (err == nil || err.Error() != c.wantErr) {
				t.Errorf("error %v, want %q", err, c.wantErr)
			}
		})
	}
}

// FuzzDecoder: any input walks without panicking, payloads lie inside
// the input, errors name the package, and well-formed input re-encodes
// (types without their flag bits) to attributes that decode the same.
func FuzzDecoder(f *testing.F) {
	f.Add(append(Str(3, "eth0"), U32(4, 1500)...))
	f.Add(Nest(18, Str(1, "ifb")))
	f.Add([]byte{40, 0, 3, 0, 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		d := NewDecoder(b)
		var again []byte
		var payloads [][]byte
		for d.Next() {
			p := d.Bytes()
			if len(p) > 0 && !bytes.Contains(b, p) {
				t.Fatalf("payload % x not from the input", p)
			}
			payloads = append(payloads, p)
			again = append(again, Attr(d.Type(), p)...)
		}
		if err := d.Err(); err != nil {
			if !strings.HasPrefix(err.Error(), "nlattr: ") {
				t.Fatalf("error %q does not name the package", err)
			}
			return
		}
		d2 := NewDecoder(again)
		for i := 0; d2.Next(); i++ {
			if !bytes.Equal(d2.Bytes(), payloads[i]) {
				t.Fatalf("attribute %d re-decodes as % x, was % x", i, d2.Bytes(), payloads[i])
			}
		}
		if d2.Err() != nil {
			t.Fatalf("re-encoded attributes fail: %v", d2.Err())
		}
	})
}
