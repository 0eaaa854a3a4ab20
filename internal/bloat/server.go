package bloat

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"sync"
	"time"
)

// Limits are enforced by the server on every client. Zero values take the
// defaults noted on each field.
type Limits struct {
	// MaxDuration bounds a test's schedule, idle lead and tail included
	// (default 3 minutes). The session may last up to maxSessionGrace
	// longer, as the client asks, for setup and draining queues.
	MaxDuration time.Duration
	// MaxStreams bounds the concurrent load streams of one session (default 16).
	MaxStreams int
	// MaxClients bounds concurrent sessions (default 4).
	MaxClients int
	// Secret, when set, must be proven by clients (HMAC of a server nonce).
	Secret string
}

func (l Limits) withDefaults() Limits {
	if l.MaxDuration <= 0 {
		l.MaxDuration = 3 * time.Minute
	}
	if l.MaxStreams <= 0 {
		l.MaxStreams = 16
	}
	if l.MaxClients <= 0 {
		l.MaxClients = 4
	}
	return l
}

// handshakeTimeout bounds how long a connection may take to say what it is.
// It keeps idle or slow peers from holding server resources.
const handshakeTimeout = 5 * time.Second

// Server serves load and probes to clients of one listener pair. Create it
// with NewServer; Serve runs it.
type Server struct {
	lim  Limits
	logf func(format string, args ...any)
	// maxGrace caps the grace granted beyond a session's schedule:
	// maxSessionGrace, lowered by tests to play a server that grants less.
	maxGrace time.Duration

	mu       sync.Mutex
	sessions map[[tokenLen]byte]*session
	pending  int // connections that have not finished their handshake
}

type session struct {
	peer     netip.Addr
	deadline time.Time
	// probe rate limiting: answers in the current second
	probeSec   int64
	probeCount int
	ctx        context.Context
	cancel     context.CancelFunc
	streams    int
}

// NewServer returns a server enforcing lim. logf receives one line per
// session and per refused or malformed connection; nil discards them.
func NewServer(lim Limits, logf func(format string, args ...any)) *Server {
	if logf == nil {
		logf = func(string, ...any) {}
	}
	return &Server{lim: lim.withDefaults(), logf: logf, maxGrace: maxSessionGrace, sessions: map[[tokenLen]byte]*session{}}
}

// Serve accepts control and load connections on ln and answers probes on
// pc until ctx is cancelled, then closes both, ends all sessions, and
// returns nil. pc may be nil (no UDP probes). Serve returns an error only
// if accepting fails for a reason other than shutdown.
func (s *Server) Serve(ctx context.Context, ln net.Listener, pc net.PacketConn) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	stop := context.AfterFunc(ctx, func() {
		ln.Close()
		if pc != nil {
			pc.Close()
		}
	})
	defer stop()
	if pc != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.serveProbes(ctx, pc)
		}()
	}
	var err error
	for {
		c, aerr := ln.Accept()
		if aerr != nil {
			if ctx.Err() == nil {
				var ne net.Error
				if errors.As(aerr, &ne) && ne.Timeout() {
					continue
				}
				err = fmt.Errorf("server: accept on %s: %w", ln.Addr(), aerr)
			}
			break
		}
		s.mu.Lock()
		limit := s.lim.MaxClients*(s.lim.MaxStreams+1) + 16
		if s.pending >= limit {
			s.mu.Unlock()
			s.logf("server: %s: refused: %d connections still in handshake", c.RemoteAddr(), limit)
			c.Close()
			continue
		}
		s.pending++
		s.mu.Unlock()
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.handle(ctx, c)
		}()
	}
	cancel()
	ln.Close()
	if pc != nil {
		pc.Close()
	}
	wg.Wait()
	return err
}

// ListenAndServe listens on addr (TCP and UDP, same port; ":12866" if
// empty) and serves until ctx is cancelled. network is "tcp", "tcp4" or
// "tcp6". ready, if not nil, is called with the TCP address once listening.
func ListenAndServe(ctx context.Context, network, addr string, lim Limits, logf func(string, ...any), ready func(net.Addr)) error {
	if addr == "" {
		addr = fmt.Sprintf(":%d", DefaultPort)
	}
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, network, addr)
	if err != nil {
		return fmt.Errorf("server: listen tcp %s: %w (is another server running? choose another --listen port)", addr, err)
	}
	udpNet := "udp" + network[3:]
	pc, err := lc.ListenPacket(ctx, udpNet, ln.Addr().String())
	if err != nil {
		ln.Close()
		return fmt.Errorf("server: listen %s %s: %w", udpNet, ln.Addr(), err)
	}
	if ready != nil {
		ready(ln.Addr())
	}
	return NewServer(lim, logf).Serve(ctx, ln, pc)
}

func peerAddr(a net.Addr) netip.Addr {
	switch a := a.(type) {
	case *net.TCPAddr:
		ip, _ := netip.AddrFromSlice(a.IP)
		return ip.Unmap()
	case *net.UDPAddr:
		ip, _ := netip.AddrFromSlice(a.IP)
		return ip.Unmap()
	}
	return netip.Addr{}
}

func (s *Server) handle(ctx context.Context, c net.Conn) {
	pendingDone := false
	done := func() {
		if !pendingDone {
			pendingDone = true
			s.mu.Lock()
			s.pending--
			s.mu.Unlock()
		}
	}
	defer done()
	defer c.Close()
	stop := context.AfterFunc(ctx, func() { c.Close() })
	defer stop()
	c.SetDeadline(time.Now().Add(handshakeTimeout))
	m, err := readMessage(c)
	if err != nil {
		s.logf("server: %s: closing: first message: %v", c.RemoteAddr(), err)
		return
	}
	switch m.Type {
	case msgHello:
		s.control(ctx, c, m, done)
	case msgStream:
		s.stream(c, m, done)
	default:
		s.logf("server: %s: closing: unexpected %q as first message", c.RemoteAddr(), m.Type)
	}
}

func (s *Server) refuse(c net.Conn, format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	s.logf("server: %s: refused: %s", c.RemoteAddr(), msg)
	writeMessage(c, &message{Type: msgError, Error: msg})
}

func (s *Server) control(ctx context.Context, c net.Conn, hello *message, handshakeDone func()) {
	if hello.Version != ProtocolVersion {
		s.refuse(c, "protocol version %d not supported; this server speaks version %d (update sqm on one side)", hello.Version, ProtocolVersion)
		return
	}
	nonce := make([]byte, 32)
	rand.Read(nonce)
	if err := writeMessage(c, &message{Type: msgChallenge, Version: ProtocolVersion, Nonce: nonce}); err != nil {
		return
	}
	auth, err := readMessage(c)
	if err != nil {
		s.logf("server: %s: closing: auth: %v", c.RemoteAddr(), err)
		return
	}
	if auth.Type != msgAuth {
		s.logf("server: %s: closing: expected auth, got %q", c.RemoteAddr(), auth.Type)
		return
	}
	if s.lim.Secret != "" && subtle.ConstantTimeCompare(auth.MAC, mac(s.lim.Secret, nonce)) != 1 {
		s.refuse(c, "wrong or missing secret (pass the server's --secret to the client)")
		return
	}
	d := time.Duration(hello.DurationMs) * time.Millisecond
	if d > s.lim.MaxDuration {
		s.refuse(c, "test of %v exceeds this server's limit of %v; use a shorter --duration", d, s.lim.MaxDuration)
		return
	}
	if hello.Streams > s.lim.MaxStreams {
		s.refuse(c, "%d streams exceed this server's limit of %d per client; use fewer --streams", hello.Streams, s.lim.MaxStreams)
		return
	}
	var tok [tokenLen]byte
	rand.Read(tok[:])
	grace := grantGrace(time.Duration(hello.GraceMs)*time.Millisecond, s.maxGrace)
	sctx, cancel := context.WithTimeout(ctx, d+grace)
	defer cancel()
	sess := &session{peer: peerAddr(c.RemoteAddr()), deadline: time.Now().Add(d + grace), ctx: sctx, cancel: cancel}
	s.mu.Lock()
	if len(s.sessions) >= s.lim.MaxClients {
		s.mu.Unlock()
		s.refuse(c, "server busy: %d clients are testing; try again later", s.lim.MaxClients)
		return
	}
	s.sessions[tok] = sess
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.sessions, tok)
		s.mu.Unlock()
	}()
	err = writeMessage(c, &message{Type: msgWelcome, Version: ProtocolVersion, Token: tok[:],
		MaxDurationMs: s.lim.MaxDuration.Milliseconds(), MaxStreams: s.lim.MaxStreams, GraceMs: grace.Milliseconds()})
	if err != nil {
		return
	}
	handshakeDone()
	start := time.Now()
	s.logf("server: %s: session started (%v + %v grace, %d streams)", c.RemoteAddr(), d, grace, hello.Streams)
	// The session lasts while the control connection is open, up to its
	// deadline. Nothing more is expected from the client; anything it sends
	// is a protocol error and ends the session.
	c.SetDeadline(time.Time{})
	stop := context.AfterFunc(sctx, func() { c.Close() })
	defer stop()
	var b [1]byte
	_, err = c.Read(b[:])
	switch {
	case sctx.Err() == context.DeadlineExceeded:
		s.logf("server: %s: session ended by its time limit after %v", c.RemoteAddr(), time.Since(start).Round(time.Millisecond))
	case err == nil:
		s.logf("server: %s: closing: unexpected data on the control connection", c.RemoteAddr())
	default:
		s.logf("server: %s: session ended after %v", c.RemoteAddr(), time.Since(start).Round(time.Millisecond))
	}
}

func (s *Server) stream(c net.Conn, m *message, handshakeDone func()) {
	var tok [tokenLen]byte
	copy(tok[:], m.Token)
	peer := peerAddr(c.RemoteAddr())
	s.mu.Lock()
	sess := s.sessions[tok]
	switch {
	case sess == nil:
		s.mu.Unlock()
		s.logf("server: %s: closing: load stream for an unknown or ended session", c.RemoteAddr())
		return
	case sess.peer != peer:
		s.mu.Unlock()
		s.logf("server: %s: closing: load stream from another address than the session's %s", c.RemoteAddr(), sess.peer)
		return
	case sess.streams >= s.lim.MaxStreams:
		s.mu.Unlock()
		s.logf("server: %s: closing: session already has %d streams", c.RemoteAddr(), sess.streams)
		return
	}
	sess.streams++
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		sess.streams--
		s.mu.Unlock()
	}()
	handshakeDone()
	stop := context.AfterFunc(sess.ctx, func() { c.Close() })
	defer stop()
	c.SetDeadline(time.Time{})
	if err := setDSCP(c, m.DSCP); err != nil {
		s.logf("server: %s: cannot mark stream with DSCP %d: %v", c.RemoteAddr(), m.DSCP, err)
	}
	if m.Dir == DirDown {
		sendLoad(c)
		return
	}
	sinkLoad(c)
}

// maxProbesPerSecond caps the probe answers per session: 4 kinds at the
// smallest interval (10 ms) are 400 per second.
const maxProbesPerSecond = 1000

// loadChunk is the size of each write of load data. 128 KiB keeps the
// syscall count low (profiling showed 16 KiB writes cost 3× the CPU).
const loadChunk = 128 << 10

// rcvLowat batches receive wake-ups on load streams: 16 KiB is 4 ms at
// 32 Mbit/s and 130 ms at 1 Mbit/s, still inside one sampling step.
const rcvLowat = 16 << 10

func sendLoad(c net.Conn) {
	buf := make([]byte, loadChunk)
	for {
		if _, err := c.Write(buf); err != nil {
			return
		}
	}
}

// sinkLoad reads an upload stream to its end and then tells the client
// how many bytes arrived (8 bytes, big endian): the client's goodput then
// includes what was still queued on the path when it stopped sending.
func sinkLoad(c net.Conn) {
	setRcvLowat(c, rcvLowat)
	buf := make([]byte, loadChunk)
	var n int64
	for {
		m, err := c.Read(buf)
		n += int64(m)
		if err == io.EOF {
			binary.BigEndian.PutUint64(buf, uint64(n))
			c.SetWriteDeadline(time.Now().Add(handshakeTimeout))
			c.Write(buf[:8])
			return
		}
		if err != nil {
			return
		}
	}
}

func (s *Server) serveProbes(ctx context.Context, pc net.PacketConn) {
	buf := make([]byte, 2048)
	oob := make([]byte, 128)
	var p probe
	var lastLog time.Time
	// Kernel receive stamps keep the server's own wake-up latency out of
	// the client's RTT (its receive-to-send time is subtracted).
	enableRxTimestamps(pc)
	for {
		n, from, at, dscp, err := readStamped(pc, buf, oob)
		recv := at.UnixNano()
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			if time.Since(lastLog) > time.Second {
				s.logf("server: udp read: %v", err)
				lastLog = time.Now()
			}
			continue
		}
		if err := p.unmarshal(buf[:n]); err != nil || p.kind != probeRequest {
			continue // not ours or not a request: drop silently, never reflect
		}
		s.mu.Lock()
		sess := s.sessions[p.token]
		ok := sess != nil && sess.peer == peerAddr(from) && time.Now().Before(sess.deadline)
		if ok {
			// A client sends a handful of probes per interval; cap the
			// answers so a session cannot turn the server into a UDP
			// blaster, even towards itself.
			if sec := recv / int64(time.Second); sec != sess.probeSec {
				sess.probeSec, sess.probeCount = sec, 0
			}
			sess.probeCount++
			ok = sess.probeCount <= maxProbesPerSecond
		}
		s.mu.Unlock()
		if !ok {
			continue
		}
		p.kind = probeReply
		p.seenDSCP = 0
		if dscp >= 0 {
			p.seenDSCP = byte(dscp + 1)
		}
		p.serverRecv = recv
		p.serverSend = time.Now().UnixNano()
		// Answer with the mark the request arrived with, so RRUL's EF,
		// BE and BK probes are classified alike in both directions.
		writeMarked(pc, p.marshal(buf), from, max(dscp, 0))
	}
}
