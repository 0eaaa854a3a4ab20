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

	"sqm/internal/bloat/probewire"
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
	// MaxClientsPerAddr bounds the sessions of one address key, the address
	// for IPv4 and its /64 for IPv6 (default 1): one client cannot take
	// every slot, and two tests from one link would only measure each other.
	MaxClientsPerAddr int
	// MaxHandshakes bounds the connections of strangers (addresses without
	// a session) that have not yet said what they are (default 128).
	MaxHandshakes int
	// MaxHandshakesPerAddr bounds those per address key (default 8), so one
	// host cannot fill the pool. A client's own load streams are not
	// counted here but against its session.
	MaxHandshakesPerAddr int
	// HandshakeTimeout bounds how long a connection may take to say what it
	// is and, for a control connection, to finish the handshake (default 5 s).
	HandshakeTimeout time.Duration
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
	if l.MaxClientsPerAddr <= 0 {
		l.MaxClientsPerAddr = defaultMaxClientsPerAddr
	}
	if l.MaxHandshakes <= 0 {
		l.MaxHandshakes = defaultMaxHandshakes
	}
	if l.MaxHandshakesPerAddr <= 0 {
		l.MaxHandshakesPerAddr = defaultMaxHandshakesPerAddr
	}
	if l.HandshakeTimeout <= 0 {
		l.HandshakeTimeout = defaultHandshakeTimeout
	}
	return l
}

// drainWriteTimeout bounds the write of an upload's byte count, so a peer
// that stops reading cannot hold the stream's goroutine.
const drainWriteTimeout = 5 * time.Second

// Server serves load and probes to clients of one listener pair. Create it
// with NewServer; Serve runs it.
type Server struct {
	lim  Limits
	logf func(format string, args ...any)
	// maxGrace caps the grace granted beyond a session's schedule:
	// maxSessionGrace, lowered by tests to play a server that grants less.
	maxGrace time.Duration

	// logs throttles the lines strangers can cause (refusals, malformed
	// or silent connections, accept errors).
	logs *logLimiter

	mu       sync.Mutex
	sessions map[[tokenLen]byte]*session
	adm      *admission
	refused  map[string]int // refusals and closes by reason, since NewServer
	// freed is closed (and replaced) whenever a session ends, waking
	// handshakes waiting for their address's slot; waiting counts them.
	freed   chan struct{}
	waiting int
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

// NewServer returns a server enforcing lim. logf receives session starts
// and ends (per address) and refused or malformed connections (per kind):
// the first in a 10 s window in full, the rest as one count, so a flood
// cannot flood the log. nil discards them.
func NewServer(lim Limits, logf func(format string, args ...any)) *Server {
	if logf == nil {
		logf = func(string, ...any) {}
	}
	lim = lim.withDefaults()
	return &Server{lim: lim, logf: logf, maxGrace: maxSessionGrace, logs: newLogLimiter(logf, defaultLogEvery),
		sessions: map[[tokenLen]byte]*session{}, adm: newAdmission(lim), refused: map[string]int{}, freed: make(chan struct{})}
}

// reject counts a refusal or close for reason and logs it through the
// limiter; the line names the peer and what happened.
func (s *Server) reject(peer net.Addr, reason, format string, args ...any) {
	s.mu.Lock()
	s.refused[reason]++
	s.mu.Unlock()
	s.logs.printf(reason, peerAddr(peer), "server: %s: %s", peer, fmt.Sprintf(format, args...))
}

// refusals returns the counts of refusals and closes by reason.
func (s *Server) refusals() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := make(map[string]int, len(s.refused))
	for k, v := range s.refused {
		m[k] = v
	}
	return m
}

// Serve accepts control and load connections on ln and answers probes on
// pc until ctx is cancelled, then closes both, ends all sessions, and
// returns nil. pc may be nil (no UDP probes). Failed accepts (out of file
// descriptors, say) are retried after a growing pause, never fatal: Serve
// returns an error only if someone else closes ln.
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
	wg.Add(1)
	go func() {
		defer wg.Done()
		s.flushLogs(ctx)
	}()
	var err error
	var delay time.Duration
	for {
		c, aerr := ln.Accept()
		if aerr != nil {
			if ctx.Err() != nil {
				break
			}
			if errors.Is(aerr, net.ErrClosed) {
				err = fmt.Errorf("server: accept on %s: %w", ln.Addr(), aerr)
				break
			}
			delay = nextAcceptDelay(delay)
			s.reject(ln.Addr(), "accept failing", "accept: %v; retrying after %v", aerr, delay)
			t := time.NewTimer(delay)
			select {
			case <-ctx.Done():
			case <-t.C:
			}
			t.Stop()
			continue
		}
		delay = 0
		s.mu.Lock()
		tk, why := s.adm.admitConn(peerAddr(c.RemoteAddr()))
		s.mu.Unlock()
		if tk == nil {
			s.reject(c.RemoteAddr(), why, "refused: %s (limits: %d per address, %d in all)", why, s.lim.MaxHandshakesPerAddr, s.lim.MaxHandshakes)
			c.Close()
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.handle(ctx, c, tk)
		}()
	}
	cancel()
	ln.Close()
	if pc != nil {
		pc.Close()
	}
	wg.Wait()
	s.logs.flush(true)
	return err
}

// flushLogs writes the log limiter's summaries as their windows end.
func (s *Server) flushLogs(ctx context.Context) {
	t := time.NewTicker(s.logs.every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			s.logs.flush(false)
		}
	}
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

// handle serves one admitted connection; tk is its admission charge,
// released when the connection becomes a session or stream, or closes.
func (s *Server) handle(ctx context.Context, c net.Conn, tk *ticket) {
	done := func() {
		s.mu.Lock()
		s.adm.release(tk)
		s.mu.Unlock()
	}
	defer done()
	defer c.Close()
	stop := context.AfterFunc(ctx, func() { c.Close() })
	defer stop()
	handshakeEnd := time.Now().Add(s.lim.HandshakeTimeout)
	c.SetDeadline(handshakeEnd)
	m, err := readMessage(c)
	if err != nil {
		var ne net.Error
		switch {
		case ctx.Err() != nil: // shutting down: not the peer's doing
			return
		case errors.Is(err, io.EOF):
			s.reject(c.RemoteAddr(), "closed silently", "closing: peer closed without a word")
			return
		case errors.As(err, &ne) && ne.Timeout():
			s.reject(c.RemoteAddr(), "handshake timeout", "closing: nothing complete said within %v", s.lim.HandshakeTimeout)
			return
		}
		s.reject(c.RemoteAddr(), "bad first message", "closing: first message: %v", err)
		return
	}
	switch m.Type {
	case msgHello:
		s.control(ctx, c, m, done, handshakeEnd)
	case msgStream:
		s.stream(c, m, done)
	default:
		s.reject(c.RemoteAddr(), "bad first message", "closing: unexpected %q as first message", m.Type)
	}
}

// refuse tells the client why, and logs it under reason.
func (s *Server) refuse(c net.Conn, reason, format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	s.reject(c.RemoteAddr(), reason, "refused: %s", msg)
	// The handshake's deadline may have passed while waiting for a slot.
	c.SetWriteDeadline(time.Now().Add(time.Second))
	writeMessage(c, &message{Type: msgError, Error: msg})
}

func (s *Server) control(ctx context.Context, c net.Conn, hello *message, handshakeDone func(), handshakeEnd time.Time) {
	if hello.Version != ProtocolVersion {
		s.refuse(c, "wrong version", "protocol version %d not supported; this server speaks version %d (update sqm on one side)", hello.Version, ProtocolVersion)
		return
	}
	nonce := make([]byte, 32)
	rand.Read(nonce)
	if err := writeMessage(c, &message{Type: msgChallenge, Version: ProtocolVersion, Nonce: nonce}); err != nil {
		return
	}
	auth, err := readMessage(c)
	if err != nil {
		s.reject(c.RemoteAddr(), "bad auth", "closing: auth: %v", err)
		return
	}
	if auth.Type != msgAuth {
		s.reject(c.RemoteAddr(), "bad auth", "closing: expected auth, got %q", auth.Type)
		return
	}
	if s.lim.Secret != "" && subtle.ConstantTimeCompare(auth.MAC, mac(s.lim.Secret, nonce)) != 1 {
		s.refuse(c, "wrong secret", "wrong or missing secret (pass the server's secret to the client)")
		return
	}
	d := time.Duration(hello.DurationMs) * time.Millisecond
	if d > s.lim.MaxDuration {
		s.refuse(c, "over limits", "test of %v exceeds this server's limit of %v; use a shorter --duration", d, s.lim.MaxDuration)
		return
	}
	if hello.Streams > s.lim.MaxStreams {
		s.refuse(c, "over limits", "%d streams exceed this server's limit of %d per client; use fewer --streams", hello.Streams, s.lim.MaxStreams)
		return
	}
	peer := peerAddr(c.RemoteAddr())
	if why := s.admitSession(ctx, peer, handshakeEnd); why != "" {
		if why == refusedSessionsPerAddr {
			s.refuse(c, why, "server busy: your address already has %d test(s) running, this server's limit per address (per /64 for IPv6); try again when it ends", s.lim.MaxClientsPerAddr)
		} else {
			s.refuse(c, why, "server busy: %d clients are testing; try again later", s.lim.MaxClients)
		}
		return
	}
	var tok [tokenLen]byte
	rand.Read(tok[:])
	grace := grantGrace(time.Duration(hello.GraceMs)*time.Millisecond, s.maxGrace)
	sctx, cancel := context.WithTimeout(ctx, d+grace)
	defer cancel()
	sess := &session{peer: peer, deadline: time.Now().Add(d + grace), ctx: sctx, cancel: cancel}
	s.mu.Lock()
	s.sessions[tok] = sess
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.sessions, tok)
		s.adm.endSession(sess.peer)
		close(s.freed)
		s.freed = make(chan struct{})
		s.mu.Unlock()
	}()
	// The connection is a session now: give back its handshake charge
	// before the welcome, not after. Released after, a client that acted
	// on the welcome at once could find its own finished handshake still
	// counted (a stranger refused for a pool that was not full;
	// TestServerStreamsAdmittedDuringFlood failed so in 4 of 800 runs).
	handshakeDone()
	err = writeMessage(c, &message{Type: msgWelcome, Version: ProtocolVersion, Token: tok[:],
		MaxDurationMs: s.lim.MaxDuration.Milliseconds(), MaxStreams: s.lim.MaxStreams, GraceMs: grace.Milliseconds()})
	if err != nil {
		return
	}
	start := time.Now()
	// Session lines are throttled per address key: a client's test is two
	// lines, but a stranger looping short sessions is a count.
	sessLog := func(what, format string, args ...any) {
		s.logs.printf(what+" "+addrKey(sess.peer).String(), sess.peer, "server: %s: "+format, append([]any{c.RemoteAddr()}, args...)...)
	}
	sessLog("sessions started from", "session started (%v + %v grace, %d streams)", d, grace, hello.Streams)
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
		sessLog("sessions ended from", "session ended by its time limit after %v", time.Since(start).Round(time.Millisecond))
	case err == nil:
		s.reject(c.RemoteAddr(), "bad session", "closing: unexpected data on the control connection")
	default:
		sessLog("sessions ended from", "session ended after %v", time.Since(start).Round(time.Millisecond))
	}
}

// admitSession takes a session slot for peer. When the address's own
// sessions stand in the way (its limit, or the server's if it holds one)
// it waits, until the handshake's end, for one of them to end: a client that starts its next test right after the last one (the
// lab does, before and after shaping) must not be refused only because the
// server has not yet noticed the last control connection close.
func (s *Server) admitSession(ctx context.Context, peer netip.Addr, until time.Time) string {
	t := time.NewTimer(time.Until(until))
	defer t.Stop()
	s.mu.Lock()
	defer s.mu.Unlock()
	for {
		why := s.adm.admitSession(peer)
		if why == "" || !s.adm.holds(peer) {
			return why
		}
		freed := s.freed
		s.waiting++
		s.mu.Unlock()
		select {
		case <-freed:
		case <-t.C:
		case <-ctx.Done():
		}
		s.mu.Lock()
		s.waiting--
		if time.Now().After(until) || ctx.Err() != nil {
			return s.adm.admitSession(peer)
		}
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
		s.reject(c.RemoteAddr(), "bad stream", "closing: load stream for an unknown or ended session")
		return
	case sess.peer != peer:
		s.mu.Unlock()
		s.reject(c.RemoteAddr(), "bad stream", "closing: load stream from another address than the session's %s", sess.peer)
		return
	case sess.streams >= s.lim.MaxStreams:
		s.mu.Unlock()
		s.reject(c.RemoteAddr(), "bad stream", "closing: session already has %d streams", sess.streams)
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
			c.SetWriteDeadline(time.Now().Add(drainWriteTimeout))
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
	var echo echoLimiter
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
		if err := p.Unmarshal(buf[:n]); err != nil || (p.Kind != probeRequest && p.Kind != probewire.EchoRequest) {
			continue // not ours or not a request: drop silently, never reflect
		}
		if p.Kind == probewire.EchoRequest {
			// Sessionless: only on a server without a secret (one with a
			// secret serves its own clients only), and rate-limited.
			if s.lim.Secret != "" || !echo.allow(peerAddr(from), recv) {
				continue
			}
			p.Kind = probewire.EchoReply
			p.SeenDSCP = 0
			if dscp >= 0 {
				p.SeenDSCP = byte(dscp + 1)
			}
			p.ServerRecv = recv
			p.ServerSend = time.Now().UnixNano()
			writeMarked(pc, p.Marshal(buf), from, max(dscp, 0))
			continue
		}
		s.mu.Lock()
		sess := s.sessions[p.Token]
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
		p.Kind = probeReply
		p.SeenDSCP = 0
		if dscp >= 0 {
			p.SeenDSCP = byte(dscp + 1)
		}
		p.ServerRecv = recv
		p.ServerSend = time.Now().UnixNano()
		// Answer with the mark the request arrived with, so RRUL's EF,
		// BE and BK probes are classified alike in both directions.
		writeMarked(pc, p.Marshal(buf), from, max(dscp, 0))
	}
}
