package netperf

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"sync"
	"time"
)

// Gate is the admission a netperf server shares with the bufferbloat
// server beside it (bloat.Server implements it): the same handshake pool
// and session slots, so one address gets one test at a time whichever
// client it runs, and the same throttled log. It is an interface, not
// bloat's type, because bloat's client loads through this package.
type Gate interface {
	// AdmitConn charges a new connection from peer, or says why not.
	AdmitConn(peer netip.Addr) (release func(), why string)
	// AdmitSession takes a session slot for peer, waiting until until
	// when the address's own sessions stand in the way.
	AdmitSession(ctx context.Context, peer netip.Addr, until time.Time) (end func(), why string)
	// Reject counts and logs (throttled) a refusal or close.
	Reject(peer net.Addr, reason, format string, args ...any)
	// LogSession logs (throttled per address) a run's start or end.
	LogSession(peer net.Addr, what, format string, args ...any)
}

// ServerConfig is what a netperf server enforces.
type ServerConfig struct {
	Gate Gate
	// MaxDuration bounds one netperf test's length (-l) and, with
	// groupGrace, the run of overlapping tests one address makes (a
	// session of the bufferbloat server's).
	MaxDuration time.Duration
	// MaxTests bounds the tests one address runs at once (the
	// bufferbloat server's streams per session): RRUL runs 11.
	MaxTests int
	// HandshakeTimeout bounds the wait for a control connection's
	// requests.
	HandshakeTimeout time.Duration
	// Secret, when set, must be given by clients as the passphrase
	// Passphrase(Secret) (netperf -Z); others are refused.
	Secret string
	// SetDSCP marks a data socket as the client asked (netperf -Y); nil
	// leaves them unmarked.
	SetDSCP func(c net.Conn, dscp int) error
}

// Passphrase is what a netperf client must give with -Z when the server
// has secret: the first 16 bytes of HMAC-SHA256(secret, "sqm netperf
// passphrase v1"), in hex. netperf sends its passphrase in clear, so it is
// derived rather than the secret itself: whoever sees it can run netperf
// tests, not authenticate to the bufferbloat protocol.
func Passphrase(secret string) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte("sqm netperf passphrase v1"))
	return hex.EncodeToString(m.Sum(nil)[:16])
}

// Timing of a test beyond its length. netserver waits padTime past a
// receiving test's length for its end; on a bloated link the sender's last
// bytes and its FIN may queue for seconds more, so this server waits
// receivePad. groupGrace is what the run of one address's tests may last
// beyond MaxDuration (the bufferbloat server's maxSessionGrace). drainWait
// bounds the wait for a peer's close after the server's.
const (
	padTime    = 4 * time.Second
	receivePad = 10 * time.Second
	groupGrace = 30 * time.Second
	drainWait  = 5 * time.Second
)

// Server answers netperf clients' omni tests (TCP_STREAM, TCP_MAERTS,
// TCP_RR, UDP_RR: netperf 2.5 and later run them all as omni).
type Server struct {
	cfg        ServerConfig
	passphrase string

	mu     sync.Mutex
	groups map[netip.Addr]*group
}

// group is the run of overlapping tests from one peer address, which
// holds one session slot of the Gate from its first test's start to its
// last test's end. netperf has no session: flent's RRUL is 11 netperf
// processes, each with its own control connection, started together.
type group struct {
	ready    chan struct{} // closed once the slot is taken or refused
	why      string        // the refusal, once ready
	end      func()        // frees the slot
	tests    int           // joined or waiting to
	deadline time.Time
	start    time.Time
	ran      int      // tests that ran
	first    net.Addr // the first test's control connection, for the log
}

// NewServer returns a server enforcing cfg. Zero limits take the
// bufferbloat server's defaults.
func NewServer(cfg ServerConfig) *Server {
	if cfg.MaxDuration <= 0 {
		cfg.MaxDuration = 3 * time.Minute
	}
	if cfg.MaxTests <= 0 {
		cfg.MaxTests = 16
	}
	if cfg.HandshakeTimeout <= 0 {
		cfg.HandshakeTimeout = 5 * time.Second
	}
	s := &Server{cfg: cfg, groups: map[netip.Addr]*group{}}
	if cfg.Secret != "" {
		s.passphrase = Passphrase(cfg.Secret)
	}
	return s
}

// Serve accepts control connections on ln until ctx is cancelled, then
// closes it, ends every test and returns nil. A failed accept is retried
// after a pause; only ln closed by someone else ends it with an error.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(ctx, func() { ln.Close() })
	defer stop()
	var wg sync.WaitGroup
	var err error
	delay := time.Duration(0)
	for {
		c, aerr := ln.Accept()
		if aerr != nil {
			if ctx.Err() != nil {
				break
			}
			if errors.Is(aerr, net.ErrClosed) {
				err = fmt.Errorf("netperf server: accept on %s: %w", ln.Addr(), aerr)
				break
			}
			delay = min(max(2*delay, 5*time.Millisecond), time.Second)
			s.cfg.Gate.Reject(ln.Addr(), "netperf accept failing", "netperf: accept: %v; retrying after %v", aerr, delay)
			select {
			case <-ctx.Done():
			case <-time.After(delay):
			}
			continue
		}
		delay = 0
		release, why := s.cfg.Gate.AdmitConn(peerOf(c.RemoteAddr()))
		if why != "" {
			s.cfg.Gate.Reject(c.RemoteAddr(), why, "netperf: refused: %s", why)
			c.Close()
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer release()
			s.handle(ctx, c, release)
		}()
	}
	cancel()
	ln.Close()
	wg.Wait()
	return err
}

// ListenAndServe listens on addr (TCP; ":12865" if empty) and serves
// until ctx is cancelled. ready, if not nil, is called once listening.
func (s *Server) ListenAndServe(ctx context.Context, network, addr string, ready func(net.Addr)) error {
	if addr == "" {
		addr = fmt.Sprintf(":%d", DefaultPort)
	}
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, network, addr)
	if err != nil {
		return fmt.Errorf("netperf server: listen tcp %s: %w (is netserver running? choose another --netperf address)", addr, err)
	}
	if ready != nil {
		ready(ln.Addr())
	}
	return s.Serve(ctx, ln)
}

func peerOf(a net.Addr) netip.Addr {
	if ap, err := netip.ParseAddrPort(a.String()); err == nil {
		return ap.Addr().Unmap()
	}
	return netip.Addr{}
}

// errnos the client shows ("netperf: remote error N" and its text): the
// only words a stock netperf client prints from a refusal; the server's
// log says the rest. They are Linux's generic numbers (linuxErrno's), not
// this build's syscall constants: on a mips router those differ (93 is
// 120 there), and the clients that read them are x86 and ARM machines.
const (
	errnoAccess      = 13 // EACCES: wrong or missing passphrase
	errnoBusy        = 16 // EBUSY: address testing, server full, group over its time
	errnoInvalid     = 22 // EINVAL: test too long, by byte count, bad sizes
	errnoUnsupported = 93 // EPROTONOSUPPORT: not an omni test we serve
	errnoAddrFamily  = 97 // EAFNOSUPPORT: data family is not the control's
)

// handle serves one control connection: an optional passphrase, one omni
// test, its results. netperf runs one test per control connection.
func (s *Server) handle(ctx context.Context, c net.Conn, handshakeDone func()) {
	defer c.Close()
	stop := context.AfterFunc(ctx, func() { c.Close() })
	defer stop()
	handshakeEnd := time.Now().Add(s.cfg.HandshakeTimeout)
	c.SetDeadline(handshakeEnd)
	req, err := ReadMessage(c)
	if err != nil {
		s.badRequest(ctx, c, err)
		return
	}
	if req.Type == MsgPassphrase {
		// netserver ignores a passphrase it did not ask for.
		if s.passphrase != "" {
			if p, _ := DecodePassphrase(&req); subtle.ConstantTimeCompare([]byte(p), []byte(s.passphrase)) != 1 {
				s.refuse(c, errnoAccess, "netperf wrong passphrase", "wrong netperf passphrase (-Z)")
				return
			}
		}
		if req, err = ReadMessage(c); err != nil {
			s.badRequest(ctx, c, err)
			return
		}
	} else if s.passphrase != "" {
		s.refuse(c, errnoAccess, "netperf wrong passphrase", "no netperf passphrase: this server has a secret; give netperf -Z with the passphrase its start-up line prints")
		return
	}
	if req.Type != MsgDoOmni {
		s.refuse(c, ErrnoUnknownTest, "netperf unsupported", "%v is not served (only omni tests: TCP_STREAM, TCP_MAERTS, TCP_RR, UDP_RR)", req.Type)
		return
	}
	o, err := DecodeOmniRequest(&req)
	if err == nil {
		err = o.Check()
	}
	if err != nil {
		s.refuse(c, errnoInvalid, "netperf bad request", "%v", err)
		return
	}
	t, err := s.check(&o, c)
	if err != nil {
		var re *refusal
		errors.As(err, &re)
		s.refuse(c, re.errno, "netperf over limits", "%s", re.msg)
		return
	}
	peer := peerOf(c.RemoteAddr())
	g, why := s.join(ctx, c, handshakeEnd)
	if why != "" {
		s.refuse(c, errnoBusy, why, "server busy: %s", why)
		return
	}
	defer s.leave(peer, g)
	if end := time.Now().Add(t.length + padTime); end.After(g.deadline) {
		s.refuse(c, errnoBusy, "netperf over limits", "a %v test would end past this address's run limit (%v + %v grace, from its first test; started %v ago)",
			t.length, s.cfg.MaxDuration, groupGrace, time.Until(g.deadline.Add(-s.cfg.MaxDuration-groupGrace)).Abs().Round(time.Second))
		return
	}
	handshakeDone()
	s.mu.Lock()
	g.ran++
	s.mu.Unlock()
	s.run(ctx, c, t, g.deadline)
}

// badRequest logs why a control connection's request was not read.
func (s *Server) badRequest(ctx context.Context, c net.Conn, err error) {
	var ne net.Error
	switch {
	case ctx.Err() != nil:
	case errors.Is(err, io.EOF):
		s.cfg.Gate.Reject(c.RemoteAddr(), "netperf closed silently", "netperf: closing: peer closed without a request")
	case errors.As(err, &ne) && ne.Timeout():
		s.cfg.Gate.Reject(c.RemoteAddr(), "netperf handshake timeout", "netperf: closing: no complete request within %v", s.cfg.HandshakeTimeout)
	default:
		s.cfg.Gate.Reject(c.RemoteAddr(), "netperf bad request", "netperf: closing: %v", err)
	}
}

// refuse answers with errno (all the client shows) and logs msg.
func (s *Server) refuse(c net.Conn, errno int, reason, format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	s.cfg.Gate.Reject(c.RemoteAddr(), reason, "netperf: refused: %s", msg)
	c.SetWriteDeadline(time.Now().Add(time.Second))
	m := ErrorResponse(MsgOmniResponse, int32(errno))
	WriteMessage(c, &m)
}

type refusal struct {
	errno int
	msg   string
}

func (r *refusal) Error() string { return r.msg }

func refused(errno int, format string, args ...any) error {
	return &refusal{errno: errno, msg: fmt.Sprintf(format, args...)}
}

// join adds a test from peer to its group, creating it (and taking the
// Gate's session slot) if there is none. Tests that arrive while the slot
// is being taken wait for that outcome rather than asking for a second
// slot, which the per-address limit would refuse.
func (s *Server) join(ctx context.Context, c net.Conn, until time.Time) (*group, string) {
	peer := peerOf(c.RemoteAddr())
	s.mu.Lock()
	g := s.groups[peer]
	if g != nil && g.tests >= s.cfg.MaxTests {
		s.mu.Unlock()
		return nil, fmt.Sprintf("your address already runs %d netperf tests, this server's limit", s.cfg.MaxTests)
	}
	if g == nil {
		g = &group{ready: make(chan struct{}), first: c.RemoteAddr()}
		s.groups[peer] = g
		g.tests++
		s.mu.Unlock()
		end, why := s.cfg.Gate.AdmitSession(ctx, peer, until)
		s.mu.Lock()
		g.end, g.why = end, why
		g.start = time.Now()
		g.deadline = g.start.Add(s.cfg.MaxDuration + groupGrace)
		close(g.ready)
		if why == "" {
			s.cfg.Gate.LogSession(g.first, "netperf runs started from", "netperf run started")
		}
	} else {
		g.tests++
		s.mu.Unlock()
		<-g.ready // the creator's AdmitSession returns by until or ctx's end
		s.mu.Lock()
	}
	why := g.why
	s.mu.Unlock()
	if why != "" {
		s.leave(peer, g)
		return nil, why
	}
	return g, ""
}

// leave ends a test's membership; the last one out frees the slot.
func (s *Server) leave(peer netip.Addr, g *group) {
	s.mu.Lock()
	g.tests--
	last := g.tests == 0
	if last && s.groups[peer] == g {
		delete(s.groups, peer)
	}
	s.mu.Unlock()
	if last && g.end != nil {
		s.cfg.Gate.LogSession(g.first, "netperf runs ended from", "netperf run ended after %v, %d tests",
			time.Since(g.start).Round(time.Millisecond), g.ran)
		g.end()
	}
}

// idle reports whether no group is left: for tests that check for leaks.
func (s *Server) idle() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.groups) == 0
}
