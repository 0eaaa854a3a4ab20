package netperf

import (
	"bytes"
	"context"
	"io"
	"math"
	"net"
	"net/netip"
	"testing"
	"time"
)

// FuzzMessage feeds arbitrary bytes to the parser and every decoder, and
// checks that whatever decodes re-encodes to something that decodes the
// same (the codec loses nothing it keeps) and that ParseMessage is exact.
func FuzzMessage(f *testing.F) {
	for _, name := range []string{"stream.msgs", "maerts.msgs", "udp_rr.msgs", "flent_stream.msgs"} {
		for _, b := range readCapture(f, name).msgs {
			f.Add(b)
		}
	}
	p, _ := PassphraseMessage("sesame")
	b, _ := p.MarshalBinary()
	f.Add(b)
	f.Add([]byte{0, 0, 0, 97})
	f.Add(make([]byte, MessageSize+1))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := ReadMessage(bytes.NewReader(b))
		if len(b) < MessageSize {
			if err == nil {
				t.Fatalf("%d bytes read as a message", len(b))
			}
			return
		}
		if err != nil {
			t.Fatalf("a full message refused: %v", err)
		}
		if _, err := ParseMessage(b); (err == nil) != (len(b) == MessageSize) {
			t.Fatalf("ParseMessage of %d bytes: %v", len(b), err)
		}
		out, _ := m.MarshalBinary()
		if !bytes.Equal(out, b[:MessageSize]) {
			t.Fatal("a message does not re-encode to its bytes")
		}
		m.Type = MsgDoOmni
		if r, err := DecodeOmniRequest(&m); err == nil {
			r.Check() // must not panic, whatever it says
			m2, err := r.Message()
			if err != nil {
				t.Fatalf("a decoded request does not encode: %v", err)
			}
			r2, _ := DecodeOmniRequest(&m2)
			if m3, _ := r2.Message(); m3 != m2 || r.CongControl != r2.CongControl || r.FillFile != r2.FillFile {
				t.Fatalf("request round trip:\n%+v\n%+v", r, r2)
			}
		}
		m.Type = MsgOmniResponse
		if r, err := DecodeOmniResponse(&m); err == nil {
			m2, err := r.Message()
			if err != nil {
				t.Fatalf("a decoded response does not encode: %v", err)
			}
			r2, _ := DecodeOmniResponse(&m2)
			if m3, _ := r2.Message(); m3 != m2 || !sameFloats(r.CPURate, r2.CPURate) {
				t.Fatalf("response round trip:\n%+v\n%+v", r, r2)
			}
		}
		m.Type = MsgStaleOmniResponse
		if r, err := DecodeOmniResults(&m); err == nil {
			m2, err := r.Message()
			if err != nil {
				t.Fatalf("decoded results do not encode: %v", err)
			}
			r2, _ := DecodeOmniResults(&m2)
			if m3, _ := r2.Message(); m3 != m2 || r.BytesSent != r2.BytesSent || r.CongControl != r2.CongControl {
				t.Fatalf("results round trip:\n%+v\n%+v", r, r2)
			}
		}
		m.Type = MsgPassphrase
		if s, err := DecodePassphrase(&m); err == nil {
			m2, err := PassphraseMessage(s)
			if err != nil {
				t.Fatalf("a decoded passphrase does not encode: %v", err)
			}
			if s2, _ := DecodePassphrase(&m2); s2 != s {
				t.Fatalf("passphrase %q back as %q", s, s2)
			}
		}
	})
}

// sameFloats compares two floats by their bits, since a NaN that came
// back unchanged is still unequal to itself.
func sameFloats(a, b float32) bool { return math.Float32bits(a) == math.Float32bits(b) }

// FuzzClientAnswer gives the client arbitrary bytes as a server's answer
// to a stream request: it must return an error or a started test, never
// hang or panic, and start a test only on a well-formed response with a
// usable data port.
func FuzzClientAnswer(f *testing.F) {
	for _, name := range []string{"stream.msgs", "maerts.msgs"} {
		f.Add(readCapture(f, name).msgs[1])
	}
	e := ErrorResponse(MsgDoOmni, 16)
	b, _ := e.MarshalBinary()
	f.Add(b)
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, answer []byte) {
		dataDialed := false
		c := &Client{Server: netip.MustParseAddrPort("192.0.2.1:12865"), Timeout: time.Second,
			DialTCP: func(ctx context.Context, addr netip.AddrPort, dscp int) (net.Conn, error) {
				if addr.Port() != 12865 {
					dataDialed = true
					a, b := net.Pipe()
					b.Close()
					return a, nil
				}
				a, b := net.Pipe()
				go func() {
					defer b.Close()
					b.SetDeadline(time.Now().Add(time.Second))
					io.ReadFull(b, make([]byte, MessageSize))
					b.Write(answer)
				}()
				return a, nil
			}}
		s, err := c.Stream(context.Background(), true, time.Second, 0)
		// The client reads one message; what follows it is not its business.
		m, perr := ParseMessage(answer[:min(len(answer), MessageSize)])
		ok := perr == nil && m.Errno() == 0 && m.Type == MsgOmniResponse
		if ok {
			r, _ := DecodeOmniResponse(&m)
			ok = r.DataPort > 0 && r.DataPort <= 65535
		}
		if (err == nil) != ok || dataDialed != ok {
			t.Fatalf("answer % x...: started %v (data dialled %v), error %v; want started %v", answer[:min(len(answer), 16)], err == nil, dataDialed, err, ok)
		}
		if s != nil {
			s.Close()
		}
	})
}
