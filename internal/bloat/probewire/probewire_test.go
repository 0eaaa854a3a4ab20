package probewire

import (
	"bytes"
	"errors"
	"testing"
)

func TestRoundTrip(t *testing.T) {
	for _, kind := range []byte{Request, Reply, EchoRequest, EchoReply} {
		p := Packet{Kind: kind, SeenDSCP: 47, Seq: 1<<40 + 3, ClientSend: 12345, ServerRecv: -1, ServerSend: 1 << 62}
		p.Token[3] = 9
		b := p.Marshal(make([]byte, 100))
		if len(b) != Len {
			t.Fatalf("Marshal: %d bytes", len(b))
		}
		var q Packet
		if err := q.Unmarshal(b); err != nil {
			t.Fatal(err)
		}
		if q != p {
			t.Errorf("round trip %+v -> %+v", p, q)
		}
	}
}

func TestRefuses(t *testing.T) {
	p := Packet{Kind: Reply}
	b := p.Marshal(make([]byte, Len))
	kind9 := bytes.Clone(b)
	kind9[5] = 9
	v2 := bytes.Clone(b)
	v2[4] = 2
	for _, tt := range []struct {
		name string
		b    []byte
		want error
	}{
		{"short", b[:Len-1], ErrLen},
		{"long", append(bytes.Clone(b), 0), ErrLen},
		{"magic", append([]byte("XQMP"), b[4:]...), ErrMagic},
		{"version", v2, ErrMagic},
		{"kind", kind9, ErrKind},
	} {
		var q Packet
		if err := q.Unmarshal(tt.b); !errors.Is(err, tt.want) {
			t.Errorf("%s: Unmarshal = %v, want %v", tt.name, err, tt.want)
		}
	}
}

// FuzzUnmarshal: nothing crashes the parser, and what it accepts
// re-encodes to the same bytes (but the pad byte, which it ignores).
func FuzzUnmarshal(f *testing.F) {
	p := Packet{Kind: EchoReply, Seq: 7, ClientSend: 1, ServerRecv: 2, ServerSend: 3}
	f.Add(p.Marshal(make([]byte, Len)))
	f.Add([]byte("SQMP"))
	f.Fuzz(func(t *testing.T, b []byte) {
		var q Packet
		if q.Unmarshal(b) != nil {
			return
		}
		out := q.Marshal(make([]byte, Len))
		in := bytes.Clone(b)
		in[7] = 0
		if !bytes.Equal(out, in) {
			t.Fatalf("accepted %x re-encodes as %x", b, out)
		}
	})
}
