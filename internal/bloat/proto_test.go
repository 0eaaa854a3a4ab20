package bloat

import (
	"bytes"
	"context"
	"encoding/binary"
	stdjson "encoding/json"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"sqm/internal/json/jsontest"
)

func TestMessageRoundTrip(t *testing.T) {
	tok := bytes.Repeat([]byte{7}, tokenLen)
	msgs := []*message{
		{Type: msgHello, Version: 1, DurationMs: 70000, GraceMs: 14000, Streams: 8},
		{Type: msgChallenge, Version: 1, Nonce: bytes.Repeat([]byte{1}, 32)},
		{Type: msgAuth, MAC: mac("s", []byte("n"))},
		{Type: msgAuth},
		{Type: msgWelcome, Token: tok, MaxDurationMs: 1000, MaxStreams: 4, GraceMs: 14000},
		{Type: msgError, Error: "busy"},
		{Type: msgStream, Token: tok, Dir: DirUp, DSCP: 46},
	}
	for _, m := range msgs {
		var buf bytes.Buffer
		if err := writeMessage(&buf, m); err != nil {
			t.Fatalf("write %s: %v", m.Type, err)
		}
		got, err := readMessage(&buf)
		if err != nil {
			t.Fatalf("read %s: %v", m.Type, err)
		}
		if got.Type != m.Type || got.DSCP != m.DSCP || !bytes.Equal(got.Token, m.Token) || got.DurationMs != m.DurationMs || got.GraceMs != m.GraceMs {
			t.Errorf("round trip %+v → %+v", m, got)
		}
	}
}

func TestReadMessageRejects(t *testing.T) {
	frame := func(body string) []byte {
		b := make([]byte, 2+len(body))
		binary.BigEndian.PutUint16(b, uint16(len(body)))
		copy(b[2:], body)
		return b
	}
	huge := make([]byte, 2)
	binary.BigEndian.PutUint16(huge, 60000)
	tests := []struct {
		name string
		in   []byte
		want string
	}{
		{"empty", nil, "EOF"},
		{"zero length", []byte{0, 0}, "outside"},
		{"oversized", huge, "outside"},
		{"truncated", frame(`{"type":"hello"}`)[:8], "message body"},
		{"not json", frame(`hello`), "malformed"},
		{"unknown type", frame(`{"type":"shell"}`), "unknown type"},
		{"hello no duration", frame(`{"type":"hello","version":1}`), "duration"},
		{"hello negative streams", frame(`{"type":"hello","duration_ms":5,"streams":-1}`), "streams"},
		{"stream short token", frame(`{"type":"stream","token":"AAAA","dir":"down"}`), "token"},
		{"stream bad dir", frame(`{"type":"stream","token":"AAAAAAAAAAAAAAAAAAAAAA==","dir":"sideways"}`), "direction"},
		{"stream bad dscp", frame(`{"type":"stream","token":"AAAAAAAAAAAAAAAAAAAAAA==","dir":"up","dscp":64}`), "dscp"},
		{"auth bad mac", frame(`{"type":"auth","mac":"AAAA"}`), "mac"},
		{"hello negative grace", frame(`{"type":"hello","duration_ms":5,"grace_ms":-1}`), "grace"},
		{"welcome negative grace", frame(`{"type":"welcome","token":"AAAAAAAAAAAAAAAAAAAAAA==","grace_ms":-1}`), "grace"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := readMessage(bytes.NewReader(tt.in))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("readMessage = %v, want error containing %q", err, tt.want)
			}
		})
	}
}

// TestSessionGrace: what a client asks beyond its schedule covers one full
// upload drain per phase with uploads, and what a server grants.
func TestSessionGrace(t *testing.T) {
	base := setupAllowance + maxLateReplyWait
	for _, tt := range []struct {
		mode Mode
		want time.Duration
	}{
		{ModeIdle, base},
		{ModeRRUL, base + maxUploadDrain},
		{ModeSpeedtest, base + maxUploadDrain},
	} {
		o := Options{Addr: "x", Mode: tt.mode}
		if err := o.defaults(); err != nil {
			t.Fatal(err)
		}
		if got := clientGrace(schedule(&o)); got != tt.want {
			t.Errorf("%s: clientGrace %v, want %v", tt.mode, got, tt.want)
		}
	}
	for _, tt := range []struct{ asked, want time.Duration }{
		{0, sessionGrace}, // a client from before GraceMs
		{time.Second, sessionGrace},
		{14 * time.Second, 14 * time.Second},
		{time.Hour, maxSessionGrace},
	} {
		if got := grantGrace(tt.asked, maxSessionGrace); got != tt.want {
			t.Errorf("grantGrace(%v) = %v, want %v", tt.asked, got, tt.want)
		}
	}
}

// FuzzReadMessage checks that no input crashes the decoder, that it never
// accepts a message that fails validation, and that accepted messages
// survive a round trip.
func FuzzReadMessage(f *testing.F) {
	var buf bytes.Buffer
	writeMessage(&buf, &message{Type: msgHello, Version: 1, DurationMs: 1000, Streams: 4})
	f.Add(buf.Bytes())
	buf.Reset()
	writeMessage(&buf, &message{Type: msgStream, Token: make([]byte, tokenLen), Dir: DirDown})
	f.Add(buf.Bytes())
	f.Add([]byte{0, 5, '{', '}', 0, 0, 0})
	f.Add([]byte{0xff, 0xff})
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := readMessage(bytes.NewReader(b))
		if err != nil {
			if m != nil {
				t.Fatal("message returned with error")
			}
			return
		}
		if verr := m.validate(); verr != nil {
			t.Fatalf("accepted invalid message: %v", verr)
		}
		var out bytes.Buffer
		if err := writeMessage(&out, m); err != nil && !strings.Contains(err.Error(), "limit") {
			t.Fatalf("re-encode: %v", err)
		}
		var p probe
		if err := p.Unmarshal(b); err == nil && len(b) != probeLen {
			t.Fatal("probe of wrong size accepted")
		}
	})
}

// FuzzServerConn feeds arbitrary bytes to the server's connection handler
// and checks it neither panics nor hangs: it must return once the peer has
// sent its bytes and closed.
func FuzzServerConn(f *testing.F) {
	var buf bytes.Buffer
	writeMessage(&buf, &message{Type: msgHello, Version: 1, DurationMs: 1000, Streams: 4})
	writeMessage(&buf, &message{Type: msgAuth})
	f.Add(buf.Bytes())
	buf.Reset()
	writeMessage(&buf, &message{Type: msgStream, Token: make([]byte, tokenLen), Dir: DirUp})
	f.Add(buf.Bytes())
	f.Add([]byte("\x00\x10{\"type\":\"hello\"}"))
	s := NewServer(Limits{MaxDuration: time.Second}, nil)
	f.Fuzz(func(t *testing.T, in []byte) {
		client, server := net.Pipe()
		done := make(chan struct{})
		s.mu.Lock()
		tk, why := s.adm.admitConn(peerAddr(server.RemoteAddr()))
		s.mu.Unlock()
		if tk == nil {
			t.Fatalf("connection refused on an idle server: %s", why)
		}
		go func() {
			defer close(done)
			s.handle(context.Background(), server, tk)
		}()
		go func() {
			client.SetDeadline(time.Now().Add(2 * time.Second))
			client.Write(in)
			client.Close()
		}()
		go io.Copy(io.Discard, client)
		select {
		case <-done:
		case <-time.After(3 * time.Second):
			t.Fatalf("server still handling the connection 3s after the peer closed; input %q", in)
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		if !s.adm.idle() || len(s.sessions) != 0 {
			t.Fatalf("leaked state: admission %+v, %d sessions", *s.adm, len(s.sessions))
		}
	})
}

// FuzzMessageJSON holds the control message's decoding to encoding/json's
// (the protocol was written against it): the same inputs accepted, the
// same message stored, the same bytes written back.
func FuzzMessageJSON(f *testing.F) {
	for _, m := range []message{
		{Type: msgHello, Version: 1, DurationMs: 1000, GraceMs: 500, Streams: 4},
		{Type: msgStream, Token: make([]byte, tokenLen), Dir: DirDown, DSCP: 46},
		{Type: "auth", Nonce: []byte("0123456789abcdef"), MAC: []byte{0xff, 0, 0x80}},
		{Type: "error", Error: "busy <retry> & \u2028 later"},
	} {
		b, err := stdjson.Marshal(m)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte(`{"type":"hello","VERSION":1,"streams":1e3,"nonce":"a=\n=","token":null,"x":[{}]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		if err := jsontest.Unmarshal(b, func() any { return new(message) }); err != nil {
			t.Fatal(err)
		}
	})
}
