package bloat

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"regexp"
	"slices"
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
	first, m := handshakeFrom(t, "127.0.0.2", addr)
	defer first.Close()
	if m.Type != msgWelcome {
		t.Fatalf("first client: %+v", m)
	}
	// From another address, so the server's limit is what refuses it,
	// at once, not the address's own.
	_, err := Run(context.Background(), Options{Addr: addr, Mode: ModeIdle, Duration: 100 * time.Millisecond, NoICMP: true})
	if err == nil || !strings.Contains(err.Error(), "server busy: 1 clients are testing") {
		t.Errorf("second client: %v, want busy", err)
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
	p := probe{Kind: probeRequest, Seq: 1}
	pc.Write(p.Marshal(make([]byte, probeLen)))
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

// dialFrom connects to addr from the loopback address local (any of
// 127/8 is ours), so one test can play several hosts.
func dialFrom(t testing.TB, local, addr string) net.Conn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(local)}, Timeout: 5 * time.Second}
	c, err := d.Dial("tcp4", addr)
	if err != nil {
		t.Fatalf("dial %s from %s: %v", addr, local, err)
	}
	return c
}

// helloFrom runs the control handshake from local by hand up to the
// server's answer, which it leaves unread: a test may need to act while
// the server decides. The connection's deadline is 10 s away.
func helloFrom(t testing.TB, local, addr string) net.Conn {
	t.Helper()
	c := dialFrom(t, local, addr)
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if err := writeMessage(c, &message{Type: msgHello, Version: ProtocolVersion, DurationMs: 60000, Streams: 4}); err != nil {
		t.Fatal(err)
	}
	m, err := readMessage(c)
	if err != nil || m.Type != msgChallenge {
		t.Fatalf("challenge from %s: %+v, %v", local, m, err)
	}
	if err := writeMessage(c, &message{Type: msgAuth}); err != nil {
		t.Fatal(err)
	}
	return c
}

// handshakeFrom runs the control handshake from local by hand and returns
// the open control connection with the server's answer (welcome or error).
func handshakeFrom(t testing.TB, local, addr string) (net.Conn, *message) {
	t.Helper()
	c := helloFrom(t, local, addr)
	m, err := readMessage(c)
	if err != nil {
		t.Fatalf("welcome from %s: %v", local, err)
	}
	c.SetDeadline(time.Time{})
	return c, m
}

// logLines keeps a Server's log lines for the test to read once it is done.
type logLines struct {
	mu    sync.Mutex
	lines []string
}

func (l *logLines) logf(f string, a ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, fmt.Sprintf(f, a...))
}

func (l *logLines) get() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.lines)
}

// waitClosed reads c until the server closes it.
func waitClosed(t testing.TB, c net.Conn) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.Copy(io.Discard, c); err != nil && !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("connection from %s not closed by the server: %v", c.LocalAddr(), err)
	}
}

// One host with hundreds of idle connections used to fill the single
// handshake pool (84) and lock everyone else out; now it gets its share
// and the rest are refused at once.
func TestServerPerAddressHandshakes(t *testing.T) {
	srv := NewServer(Limits{}, t.Logf)
	addr := serveWith(t, srv)
	const flood = 200
	for range flood {
		c := dialFrom(t, "127.0.0.2", addr)
		defer c.Close()
	}
	// The flood is in the accept queue before this client's dial, so the
	// server has judged all of it when this run starts.
	if _, err := Run(context.Background(), Options{Addr: addr, Mode: ModeIdle, Duration: 300 * time.Millisecond, Interval: 50 * time.Millisecond, NoICMP: true}); err != nil {
		t.Fatalf("client from another address during the flood: %v", err)
	}
	if got, want := srv.refusals()[refusedHandshakesPerAddr], flood-defaultMaxHandshakesPerAddr; got != want {
		t.Errorf("%d connections refused over the per-address limit, want %d", got, want)
	}
}

// A running test's stream dials are charged to its session: strangers who
// fill the whole handshake pool cannot stop a test from opening its load.
func TestServerStreamsAdmittedDuringFlood(t *testing.T) {
	srv := NewServer(Limits{MaxHandshakes: 16, MaxHandshakesPerAddr: 16, HandshakeTimeout: time.Minute}, t.Logf)
	addr := serveWith(t, srv)
	ctl, m := handshakeFrom(t, "127.0.0.1", addr)
	defer ctl.Close()
	if m.Type != msgWelcome {
		t.Fatalf("session: %+v", m)
	}
	for range 16 {
		c := dialFrom(t, "127.0.0.2", addr)
		defer c.Close()
	}
	// The 17th stranger is refused: the pool is full.
	waitClosed(t, dialFrom(t, "127.0.0.3", addr))
	for i := range 4 {
		c := dialFrom(t, "127.0.0.1", addr)
		defer c.Close()
		if err := writeMessage(c, &message{Type: msgStream, Token: m.Token, Dir: DirDown}); err != nil {
			t.Fatal(err)
		}
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		if n, err := io.ReadFull(c, make([]byte, 1<<16)); err != nil {
			t.Fatalf("stream %d of a running session during the flood: %d bytes, %v", i, n, err)
		}
	}
	if got := srv.refusals()[refusedHandshakes]; got != 1 {
		t.Errorf("%d refusals for a full pool, want 1 (the 17th stranger)", got)
	}
}

// One address cannot take every session slot.
func TestServerFairSlots(t *testing.T) {
	// The second session waits out its handshake for a slot: keep it short.
	addr := serveWith(t, NewServer(Limits{MaxClients: 4, HandshakeTimeout: 300 * time.Millisecond}, t.Logf))
	first, m := handshakeFrom(t, "127.0.0.2", addr)
	defer first.Close()
	if m.Type != msgWelcome {
		t.Fatalf("first session: %+v", m)
	}
	second, m := handshakeFrom(t, "127.0.0.2", addr)
	defer second.Close()
	if m.Type != msgError || !strings.Contains(m.Error, "your address already has 1 test") {
		t.Errorf("second session from the same address: %+v, want refused", m)
	}
	other, m := handshakeFrom(t, "127.0.0.3", addr)
	defer other.Close()
	if m.Type != msgWelcome {
		t.Errorf("session from another address: %+v", m)
	}
}

// A client starting its next test as soon as the last one ended (the lab
// does) gets a session even if the server has not yet seen the last control
// connection close: the hello waits for the slot instead of being refused.
func TestServerBackToBackSessions(t *testing.T) {
	srv := NewServer(Limits{HandshakeTimeout: time.Minute}, t.Logf)
	addr := serveWith(t, srv)
	first, m := handshakeFrom(t, "127.0.0.2", addr)
	if m.Type != msgWelcome {
		t.Fatalf("first session: %+v", m)
	}
	c := helloFrom(t, "127.0.0.2", addr)
	defer c.Close()
	c.SetDeadline(time.Now().Add(time.Minute))
	// Wait until the second hello waits for the slot (no time assumed).
	for waiting := 0; waiting == 0; {
		time.Sleep(time.Millisecond)
		srv.mu.Lock()
		waiting = srv.waiting
		srv.mu.Unlock()
	}
	first.Close()
	if m, err := readMessage(c); err != nil || m.Type != msgWelcome {
		t.Errorf("next session from the same address once the first closed: %+v, %v", m, err)
	}
}

// flakyListener fails its first n accepts the way a server out of file
// descriptors does.
type flakyListener struct {
	net.Listener
	mu sync.Mutex
	n  int
}

func (l *flakyListener) Accept() (net.Conn, error) {
	l.mu.Lock()
	fail := l.n > 0
	if fail {
		l.n--
	}
	l.mu.Unlock()
	if fail {
		return nil, &net.OpError{Op: "accept", Net: "tcp", Err: os.NewSyscallError("accept4", syscall.EMFILE)}
	}
	return l.Listener.Accept()
}

// EMFILE used to end Serve; now the server waits and accepts again, and
// says so in one line, not one per failure.
func TestServeSurvivesAcceptErrors(t *testing.T) {
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	fl := &flakyListener{Listener: ln, n: 6}
	var logs logLines
	pc, err := net.ListenPacket("udp4", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- NewServer(Limits{}, logs.logf).Serve(ctx, fl, pc) }()
	_, err = Run(context.Background(), Options{Addr: ln.Addr().String(), Mode: ModeIdle, Duration: 200 * time.Millisecond, Interval: 50 * time.Millisecond, NoICMP: true})
	select {
	case err := <-served:
		t.Fatalf("Serve ended on accept errors: %v", err)
	default:
	}
	if err != nil {
		t.Errorf("client after accept errors: %v", err)
	}
	cancel()
	if err := <-served; err != nil {
		t.Errorf("Serve: %v", err)
	}
	lines := logs.get()
	var accept []string
	for _, l := range lines {
		if strings.Contains(l, "accept") {
			accept = append(accept, l)
		}
	}
	if len(accept) != 2 || !strings.Contains(accept[0], "too many open files") || !strings.Contains(accept[1], "5 more (accept failing)") {
		t.Errorf("accept error log lines: %q; want the first and a summary of the other 5", accept)
	}
}

// Every refused or malformed connection used to be a log line; now a flood
// of them is one line and a count per reason.
func TestServerRefusalLogsThrottled(t *testing.T) {
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var logs logLines
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- NewServer(Limits{}, logs.logf).Serve(ctx, ln, nil) }()
	const n = 300
	for i := range n {
		c := dialFrom(t, fmt.Sprintf("127.0.1.%d", i%50+1), ln.Addr().String())
		c.Write([]byte("GET / HTTP/1.0\r\n\r\n"))
		waitClosed(t, c)
		c.Close()
	}
	cancel()
	if err := <-served; err != nil {
		t.Fatal(err)
	}
	lines := logs.get()
	want := regexp.MustCompile(fmt.Sprintf(`^server: %d more \(bad first message\) in the last \d+s, from 50 addresses`, n-1))
	if len(lines) != 2 || !want.MatchString(lines[1]) {
		t.Errorf("log for %d bad connections:\n%s\nwant the first and a line matching %q", n, strings.Join(lines, "\n"), want)
	}
}

// A stranger looping short sessions used to write two lines per session;
// now each address key gets its first lines in full and then a count.
func TestServerSessionLogsThrottled(t *testing.T) {
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var logs logLines
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	const n = 50
	// The limits let sessions overlap: the server may not yet have seen
	// the last one close when the next begins.
	lim := Limits{MaxClients: n + 1, MaxClientsPerAddr: n}
	go func() { served <- NewServer(lim, logs.logf).Serve(ctx, ln, nil) }()
	for range n {
		c, m := handshakeFrom(t, "127.0.0.2", ln.Addr().String())
		if m.Type != msgWelcome {
			t.Fatalf("session: %+v", m)
		}
		c.Close()
	}
	// Another address still gets its own lines.
	c, _ := handshakeFrom(t, "127.0.0.3", ln.Addr().String())
	c.Close()
	cancel()
	if err := <-served; err != nil {
		t.Fatal(err)
	}
	lines := logs.get()
	count := func(re string) int {
		k := 0
		for _, l := range lines {
			if regexp.MustCompile(re).MatchString(l) {
				k++
			}
		}
		return k
	}
	for re, want := range map[string]int{
		`^server: 127\.0\.0\.2:\d+: session started`:                                   1,
		`^server: 127\.0\.0\.2:\d+: session ended`:                                     1,
		fmt.Sprintf(`^server: %d more \(sessions started from 127\.0\.0\.2/32\)`, n-1): 1,
		fmt.Sprintf(`^server: %d more \(sessions ended from 127\.0\.0\.2/32\)`, n-1):   1,
		`^server: 127\.0\.0\.3:\d+: session (started|ended)`:                           2,
	} {
		if got := count(re); got != want {
			t.Errorf("%d lines match %q, want %d", got, re, want)
		}
	}
	if len(lines) != 6 {
		t.Errorf("%d log lines for %d sessions, want 6:\n%s", len(lines), n+1, strings.Join(lines, "\n"))
	}
}
