package bloat

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"
)

// slowPath stands between a client and a server on loopback and behaves
// like a deeply bloated link, deterministically: every UDP datagram waits
// owd in each direction (the queue the probes see), and the end of every
// upload stream (its FIN) reaches the server finDelay after the client sent
// it, as the last data sent before an upload stops sits behind the queue of
// a bloated uplink. Control and download connections pass unchanged.
type slowPath struct {
	t        *testing.T
	server   string
	owd      time.Duration
	finDelay time.Duration
	done     chan struct{}
	wg       sync.WaitGroup
}

// uploadBytes tells an upload stream from the other connections: only
// uploads send more than a few hundred bytes towards the server.
const uploadBytes = 64 << 10

func newSlowPath(t *testing.T, server string, owd, finDelay time.Duration) string {
	p := &slowPath{t: t, server: server, owd: owd, finDelay: finDelay, done: make(chan struct{})}
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	pc, err := net.ListenPacket("udp4", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		close(p.done)
		ln.Close()
		pc.Close()
		p.wg.Wait()
	})
	p.wg.Add(2)
	go func() {
		defer p.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			p.wg.Add(1)
			go func() { defer p.wg.Done(); p.relayTCP(c) }()
		}
	}()
	go func() { defer p.wg.Done(); p.relayUDP(pc) }()
	return ln.Addr().String()
}

func (p *slowPath) relayTCP(cli net.Conn) {
	defer cli.Close()
	srv, err := net.Dial("tcp4", p.server)
	if err != nil {
		return
	}
	defer srv.Close()
	stop := context.AfterFunc(doneCtx(p.done), func() { cli.Close(); srv.Close() })
	defer stop()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		io.Copy(cli, srv)
		cli.(*net.TCPConn).CloseWrite()
	}()
	n, _ := io.Copy(srv, cli)
	if n > uploadBytes {
		select {
		case <-time.After(p.finDelay):
		case <-p.done:
		}
	}
	srv.(*net.TCPConn).CloseWrite()
	wg.Wait()
}

func (p *slowPath) relayUDP(pc net.PacketConn) {
	var mu sync.Mutex
	up := map[string]net.Conn{}
	defer func() {
		mu.Lock()
		for _, c := range up {
			c.Close()
		}
		mu.Unlock()
	}()
	buf := make([]byte, 2048)
	for {
		n, from, err := pc.ReadFrom(buf)
		if err != nil {
			return
		}
		mu.Lock()
		c := up[from.String()]
		if c == nil {
			if c, err = net.Dial("udp4", p.server); err != nil {
				mu.Unlock()
				continue
			}
			up[from.String()] = c
			p.wg.Add(1)
			go func() {
				defer p.wg.Done()
				b := make([]byte, 2048)
				for {
					n, err := c.Read(b)
					if err != nil {
						return
					}
					reply := append([]byte(nil), b[:n]...)
					time.AfterFunc(p.owd, func() { pc.WriteTo(reply, from) })
				}
			}()
		}
		mu.Unlock()
		req := append([]byte(nil), buf[:n]...)
		time.AfterFunc(p.owd, func() { c.Write(req) })
	}
}

func doneCtx(done <-chan struct{}) context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	go func() { <-done; cancel() }()
	return ctx
}

// TestSessionOutlastsUploadDrain runs a speedtest through a slowPath whose
// probes see a 2.5 s RTT (so the client waits up to 6 s for an upload's
// count) and whose upload streams end 5.5 s late, with no idle tail to
// absorb the drain: with the wait for late replies the run takes 7.5 s
// longer than its schedule. Before the client told the server how long it may need, the
// server ended every session 5 s after its schedule, and such a run failed
// with "ended the session early" (the lab's unshaped upload).
//
// With a server that grants only that old 5 s (maxGrace), the client must
// still finish: it cuts its drain at the session's end and says so in the
// notes, instead of failing.
func TestSessionOutlastsUploadDrain(t *testing.T) {
	if testing.Short() {
		t.Skip("takes about 13 s")
	}
	for _, tt := range []struct {
		name      string
		maxGrace  time.Duration
		wantNotes string // "" = no note about drains
	}{
		{"server grants the client's grace", maxSessionGrace, ""},
		{"server grants only 5 s", sessionGrace, "did not arrive before the session's end"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var mu sync.Mutex
			var logs []string
			logf := func(format string, args ...any) {
				mu.Lock()
				logs = append(logs, fmt.Sprintf(format, args...))
				mu.Unlock()
			}
			srv := NewServer(Limits{}, logf)
			srv.maxGrace = tt.maxGrace
			addr := serveWith(t, srv)
			path := newSlowPath(t, addr, 1250*time.Millisecond, 5500*time.Millisecond)
			res, err := Run(context.Background(), Options{Addr: path, Mode: ModeSpeedtest, Streams: 1,
				Duration: 3 * time.Second, Idle: -1, Interval: 100 * time.Millisecond, NoICMP: true})
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				t.Fatalf("Run: %v\nserver log:\n%s", err, strings.Join(logs, "\n"))
			}
			if res.Loaded.MedianMs < 2000 {
				t.Errorf("loaded median RTT %.0f ms through a path adding 2.5 s; the test needs it", res.Loaded.MedianMs)
			}
			notes := strings.Join(res.Notes, "\n")
			if tt.wantNotes == "" && notes != "" {
				t.Errorf("notes %q, want none", res.Notes)
			}
			if !strings.Contains(notes, tt.wantNotes) {
				t.Errorf("notes %q, want %q", res.Notes, tt.wantNotes)
			}
			var up *Stream
			for i := range res.Streams {
				if res.Streams[i].Dir == DirUp {
					up = &res.Streams[i]
				}
			}
			if up == nil || up.Bytes <= 0 {
				t.Errorf("upload stream %+v, want bytes counted", up)
			}
		})
	}
}

// serveWith runs srv on loopback until the test ends.
func serveWith(t *testing.T, srv *Server) string {
	t.Helper()
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
	go func() { served <- srv.Serve(ctx, ln, pc) }()
	t.Cleanup(func() {
		cancel()
		if err := <-served; err != nil && !errors.Is(err, net.ErrClosed) {
			t.Errorf("Serve: %v", err)
		}
	})
	return ln.Addr().String()
}
