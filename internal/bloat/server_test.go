package bloat

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

func TestServerRefusals(t *testing.T) {
	addr := startServer(t, "tcp4", "127.0.0.1:0", Limits{MaxDuration: 10 * time.Second, MaxStreams: 2, MaxClients: 1, Secret: "s3cret"})
	base := Options{Addr: addr, Mode: ModeIdle, Duration: 300 * time.Millisecond, Interval: 50 * time.Millisecond, NoICMP: true}
	tests := []struct {
		name string
		mod  func(*Options)
		want string // "" = success
	}{
		{"no secret", func(o *Options) {}, "secret"},
		{"wrong secret", func(o *Options) { o.Secret = "nope" }, "secret"},
		{"right secret", func(o *Options) { o.Secret = "s3cret" }, ""},
		{"too long", func(o *Options) { o.Secret = "s3cret"; o.Duration = time.Minute }, "exceeds this server's limit"},
		{"too many streams", func(o *Options) { o.Secret = "s3cret"; o.Mode = ModeRRUL; o.Duration = time.Second; o.Idle = -1 }, "streams exceed"},
		{"no server", func(o *Options) { o.Addr = "127.0.0.1:1" }, "connect to server"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := base
			tt.mod(&o)
			_, err := Run(context.Background(), o)
			if tt.want == "" {
				if err != nil {
					t.Fatalf("Run: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Run error = %v, want %q", err, tt.want)
			}
		})
	}
}

// sessionUp returns a Progress hook and a channel closed at its first call:
// the client then holds a session (progress starts after the welcome), with
// no guess at how long that takes on a loaded machine.
func sessionUp() (func(Progress), <-chan struct{}) {
	ch := make(chan struct{})
	var once sync.Once
	return func(Progress) { once.Do(func() { close(ch) }) }, ch
}

func TestServerMaxClients(t *testing.T) {
	addr := startServer(t, "tcp4", "127.0.0.1:0", Limits{MaxClients: 1})
	done := make(chan error, 1)
	progress, up := sessionUp()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		_, err := Run(ctx, Options{Addr: addr, Mode: ModeIdle, Duration: time.Minute, Interval: 50 * time.Millisecond, NoICMP: true, Progress: progress})
		done <- err
	}()
	select {
	case <-up:
	case err := <-done:
		t.Fatalf("first client: %v", err)
	}
	_, err := Run(context.Background(), Options{Addr: addr, Mode: ModeIdle, Duration: 100 * time.Millisecond, NoICMP: true})
	if err == nil || !strings.Contains(err.Error(), "busy") {
		t.Errorf("second client: %v, want busy", err)
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("first client: %v, want it cancelled", err)
	}
}

// Malformed, oversized and silent connections are closed without affecting
// other clients.
func TestServerSurvivesBadPeers(t *testing.T) {
	addr := startServer(t, "tcp4", "127.0.0.1:0", Limits{})
	send := func(b []byte) (closed bool) {
		c, err := net.Dial("tcp4", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.Write(b)
		c.SetReadDeadline(time.Now().Add(3 * time.Second))
		_, err = io.ReadAll(c)
		return err == nil || errors.Is(err, syscall.ECONNRESET) // closed, or reset with our bytes unread
	}
	huge := make([]byte, 2+maxMessage+1)
	binary.BigEndian.PutUint16(huge, maxMessage+1)
	bad := [][]byte{
		[]byte("GET / HTTP/1.0\r\n\r\n"),
		huge,
		{0, 3, '{', '}', '}'},
		{0, 16, '{', '"', 't', 'y', 'p', 'e', '"', ':', '"', 'a', 'u', 't', 'h', '"', '}', ' '},
	}
	// A silent peer holds a connection open; it must not stall the others.
	silent, err := net.Dial("tcp4", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	for i, b := range bad {
		if !send(b) {
			t.Errorf("bad input %d: connection not closed", i)
		}
	}
	// Stream for an unknown session is closed.
	c, _ := net.Dial("tcp4", addr)
	writeMessage(c, &message{Type: msgStream, Token: make([]byte, tokenLen), Dir: DirDown})
	c.SetReadDeadline(time.Now().Add(3 * time.Second))
	n, err := io.Copy(io.Discard, c)
	c.Close()
	if err != nil || n != 0 {
		t.Errorf("download for unknown session: got %d bytes, err %v; want closed with no data", n, err)
	}
	// Probes without a session's token get no answer.
	pc, err := net.Dial("udp4", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	p := probe{kind: probeRequest, seq: 1}
	pc.Write(p.marshal(make([]byte, probeLen)))
	pc.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	if n, err := pc.Read(make([]byte, 100)); err == nil {
		t.Errorf("server answered a probe without a session (%d bytes)", n)
	}
	// A good client still works.
	if _, err := Run(context.Background(), Options{Addr: addr, Mode: ModeIdle, Duration: 300 * time.Millisecond, Interval: 50 * time.Millisecond, NoICMP: true}); err != nil {
		t.Errorf("good client after bad ones: %v", err)
	}
}

// Serve returns promptly when its context is cancelled, ending sessions.
func TestServerShutdown(t *testing.T) {
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	pc, err := net.ListenPacket("udp4", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- NewServer(Limits{}, t.Logf).Serve(ctx, ln, pc) }()
	ran := make(chan error, 1)
	progress, up := sessionUp()
	go func() {
		_, err := Run(context.Background(), Options{Addr: ln.Addr().String(), Mode: ModeSpeedtest, Duration: 20 * time.Second, Idle: -1, NoICMP: true, Progress: progress})
		ran <- err
	}()
	select {
	case <-up:
	case err := <-ran:
		t.Fatalf("client: %v", err)
	}
	cancel()
	select {
	case err := <-served:
		if err != nil {
			t.Errorf("Serve: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Serve did not return within 5s of cancel")
	}
	select {
	case err := <-ran:
		if err == nil || !strings.Contains(err.Error(), "ended the session early") {
			t.Errorf("client error = %v, want 'ended the session early'", err)
		}
	case <-time.After(5 * time.Second):
		t.Error("client did not stop within 5s of the server's shutdown")
	}
}
