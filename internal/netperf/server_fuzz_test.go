package netperf

import (
	"context"
	"net"
	"net/netip"
	"sync"
	"testing"
	"time"
)

// fakeGate admits everything and counts what is held, so a test can check
// that the server gives back every session it took.
type fakeGate struct {
	mu       sync.Mutex
	sessions int
	conns    int
}

func (g *fakeGate) AdmitConn(netip.Addr) (func(), string) {
	g.mu.Lock()
	g.conns++
	g.mu.Unlock()
	return sync.OnceFunc(func() { g.mu.Lock(); g.conns--; g.mu.Unlock() }), ""
}

func (g *fakeGate) AdmitSession(context.Context, netip.Addr, time.Time) (func(), string) {
	g.mu.Lock()
	g.sessions++
	g.mu.Unlock()
	return func() { g.mu.Lock(); g.sessions--; g.mu.Unlock() }, ""
}

func (g *fakeGate) Reject(net.Addr, string, string, ...any)     {}
func (g *fakeGate) LogSession(net.Addr, string, string, ...any) {}

func (g *fakeGate) held() (sessions, conns int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.sessions, g.conns
}

// loopConn is one end of a net.Pipe that says it is a TCP connection
// between two loopback addresses, as the server's checks want.
type loopConn struct{ net.Conn }

func (loopConn) LocalAddr() net.Addr {
	return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: DefaultPort}
}
func (loopConn) RemoteAddr() net.Addr { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 40000} }

// FuzzServerRequest sends arbitrary bytes (up to two control messages, as a
// passphrase and a test) to the server's control path and checks what
// comes back: nothing, a refusal with an errno this server uses, or an
// omni response naming a data port for a test within the limits, and in
// every case the connection, its run and its session slot given back.
// An accepted test is ended once its response is read, so the fuzzer does
// not wait out test lengths.
func FuzzServerRequest(f *testing.F) {
	for _, name := range []string{"stream.msgs", "maerts.msgs", "udp_rr.msgs", "flent_stream.msgs"} {
		msgs := readCapture(f, name).msgs
		if len(msgs) > 0 {
			f.Add(msgs[0], "")
			p, _ := PassphraseMessage("sesame")
			b, _ := p.MarshalBinary()
			f.Add(append(b, msgs[0]...), "sesame")
			f.Add(append(b, msgs[0]...), "other")
		}
	}
	f.Add(make([]byte, MessageSize), "")
	f.Add([]byte{0, 0, 0, 97, 1}, "")
	f.Fuzz(fuzzOne)
}

var known = map[int32]bool{int32(errnoAccess): true, int32(errnoBusy): true, int32(errnoInvalid): true,
	int32(errnoUnsupported): true, int32(errnoAddrFamily): true, ErrnoUnknownTest: true}

func fuzzOne(t *testing.T, in []byte, secret string) {
	{
		gate := &fakeGate{}
		s := NewServer(ServerConfig{Gate: gate, MaxDuration: 30 * time.Second, MaxTests: 4,
			HandshakeTimeout: 200 * time.Millisecond})
		if secret != "" {
			s.passphrase = secret // as if Passphrase(some secret) were it
		}
		cli, srv := net.Pipe()
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		done := make(chan struct{})
		go func() {
			defer close(done)
			release, _ := gate.AdmitConn(netip.Addr{})
			defer release()
			s.handle(ctx, loopConn{srv}, release)
		}()
		go func() {
			cli.SetWriteDeadline(time.Now().Add(time.Second))
			cli.Write(in)
		}()
		cli.SetReadDeadline(time.Now().Add(2 * time.Second))
		m, err := ReadMessage(cli)
		if err == nil {
			switch {
			case m.Word != 0:
				if !known[m.Word] {
					t.Errorf("refused with errno %d, which this server does not use", m.Word)
				}
			case m.Type != MsgOmniResponse:
				t.Errorf("accepted with a %v, want an %v", m.Type, MsgOmniResponse)
			default:
				r, err := DecodeOmniResponse(&m)
				if err != nil || r.DataPort <= 0 || r.DataPort > 65535 {
					t.Errorf("accepted with data port %d (%v)", r.DataPort, err)
				}
				if r.TestLength <= 0 || r.TestLength > 30 {
					t.Errorf("accepted a test of %d s, limit 30 s", r.TestLength)
				}
			}
		}
		cancel()
		cli.Close()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Fatal("the server's control path did not return 5 s after its connection closed")
		}
		if sess, conns := gate.held(); sess != 0 || conns != 0 || !s.idle() {
			t.Errorf("after the connection: %d sessions and %d connections held, idle %v", sess, conns, s.idle())
		}
	}
}
