package httpd

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"runtime/debug"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Server serves HTTP/1.x on listeners. The zero durations mean no
// timeout; the zero limits take the defaults below.
type Server struct {
	Handler Handler
	// ReadHeaderTimeout bounds the time from a request's first byte (a
	// new connection's accept, or a TLS handshake) to the end of its
	// header; ReadTimeout, to the end of its body; WriteTimeout, from the
	// end of the header to the end of the response; IdleTimeout, a
	// kept-alive connection's wait for its next request.
	ReadHeaderTimeout, ReadTimeout, WriteTimeout, IdleTimeout time.Duration
	// MaxHeaderBytes caps a request's line and header (DefaultMaxHeaderBytes).
	MaxHeaderBytes int
	// MaxBodyBytes caps a request body (DefaultMaxBodyBytes).
	MaxBodyBytes int64
	// MaxRequestsPerConn is how many requests one connection may carry
	// before the server closes it (DefaultMaxRequestsPerConn): a client
	// cannot keep one connection, and what it holds, for ever.
	MaxRequestsPerConn int
	// Secure marks requests as having come over TLS (the listener is a
	// tls.NewListener): Request.Secure, and https in absolute targets.
	Secure bool
	// BaseContext is the requests' context's parent (Background if nil).
	BaseContext context.Context
	// Log, when set, is told of what the server itself drops: a panic in
	// a handler, a refused request, a failed accept.
	Log func(msg string, args ...any)

	mu       sync.Mutex
	lns      map[net.Listener]bool
	conns    map[*conn]bool
	closing  bool
	shutdown chan struct{}
}

const (
	DefaultMaxHeaderBytes     = 8 << 10
	DefaultMaxBodyBytes       = 64 << 10
	DefaultMaxRequestsPerConn = 100
	// maxFields caps the header fields of a request; a browser sends 20.
	maxFields = 100
	// bufferBytes is what a response may hold before it goes out chunked;
	// the page's largest answers (its script, a plot) fit.
	bufferBytes = 64 << 10
)

// ErrServerClosed is Serve's return after Shutdown.
var ErrServerClosed = errors.New("httpd: server closed")

func (s *Server) logf(msg string, args ...any) {
	if s.Log != nil {
		s.Log(msg, args...)
	}
}

// Serve accepts connections on ln and serves each on its own goroutine
// until Shutdown; it then returns ErrServerClosed.
func (s *Server) Serve(ln net.Listener) error {
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		return ErrServerClosed
	}
	if s.lns == nil {
		s.lns, s.conns, s.shutdown = map[net.Listener]bool{}, map[*conn]bool{}, make(chan struct{})
	}
	s.lns[ln] = true
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.lns, ln)
		s.mu.Unlock()
	}()
	var backoff time.Duration
	for {
		nc, err := ln.Accept()
		if err != nil {
			if s.isClosing() {
				return ErrServerClosed
			}
			if errors.Is(err, net.ErrClosed) {
				return err
			}
			// Out of descriptors, say: wait and try again rather than
			// end the page (the caps in front make this rare).
			backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
			s.logf("httpd: accept failed", "err", err, "retry_in", backoff.String())
			select {
			case <-time.After(backoff):
			case <-s.shutdown:
			}
			continue
		}
		backoff = 0
		c := &conn{s: s, nc: nc}
		if !s.track(c, true) {
			nc.Close()
			return ErrServerClosed
		}
		go c.serve()
	}
}

func (s *Server) isClosing() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closing
}

func (s *Server) track(c *conn, add bool) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if add {
		if s.closing {
			return false
		}
		s.conns[c] = true
	} else {
		delete(s.conns, c)
	}
	return true
}

// Shutdown stops accepting, closes idle connections, lets requests in
// progress finish until ctx ends, then closes what is left.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	if s.lns == nil {
		s.lns, s.conns, s.shutdown = map[net.Listener]bool{}, map[*conn]bool{}, make(chan struct{})
	}
	if !s.closing {
		s.closing = true
		close(s.shutdown)
	}
	for ln := range s.lns {
		ln.Close()
	}
	s.mu.Unlock()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		s.mu.Lock()
		n := 0
		for c := range s.conns {
			if c.isIdle() {
				c.nc.Close()
			} else {
				n++
			}
		}
		if n == 0 || ctx.Err() != nil {
			for c := range s.conns {
				c.nc.Close()
			}
			s.mu.Unlock()
			return ctx.Err()
		}
		s.mu.Unlock()
		select {
		case <-ctx.Done():
		case <-tick.C:
		}
	}
}

// conn is one client connection.
type conn struct {
	s  *Server
	nc net.Conn
	br *bufio.Reader
	bw *bufio.Writer

	mu   sync.Mutex
	idle bool // waiting for a request: Shutdown may close it
}

func (c *conn) isIdle() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.idle
}

func (c *conn) setIdle(v bool) {
	c.mu.Lock()
	c.idle = v
	c.mu.Unlock()
}

func (c *conn) serve() {
	s := c.s
	defer func() {
		c.nc.Close()
		s.track(c, false)
	}()
	c.br = bufio.NewReaderSize(c.nc, 4<<10)
	c.bw = bufio.NewWriterSize(c.nc, 4<<10)
	maxReq := s.MaxRequestsPerConn
	if maxReq <= 0 {
		maxReq = DefaultMaxRequestsPerConn
	}
	lim := Limits{HeaderBytes: s.MaxHeaderBytes, Fields: maxFields, Body: s.MaxBodyBytes, Secure: s.Secure}
	if lim.HeaderBytes <= 0 {
		lim.HeaderBytes = DefaultMaxHeaderBytes
	}
	if lim.Body <= 0 {
		lim.Body = DefaultMaxBodyBytes
	}
	for n := 0; n < maxReq; n++ {
		if n > 0 {
			c.setIdle(true)
			if s.isClosing() {
				return
			}
			c.nc.SetReadDeadline(deadline(s.IdleTimeout))
			if _, err := c.br.Peek(1); err != nil {
				return
			}
			c.setIdle(false)
		}
		if !c.serveOne(lim, n == maxReq-1) {
			return
		}
	}
}

func deadline(d time.Duration) time.Time {
	if d <= 0 {
		return time.Time{}
	}
	return time.Now().Add(d)
}

// serveOne reads and answers one request; false: close the connection.
func (c *conn) serveOne(lim Limits, last bool) bool {
	s := c.s
	start := time.Now()
	hd := s.ReadHeaderTimeout
	if hd <= 0 || s.ReadTimeout > 0 && s.ReadTimeout < hd {
		hd = s.ReadTimeout
	}
	if hd > 0 {
		c.nc.SetReadDeadline(start.Add(hd))
	} else {
		c.nc.SetReadDeadline(time.Time{})
	}
	req, err := ReadRequest(c.br, lim)
	if err != nil {
		var re *RequestError
		if errors.As(err, &re) {
			c.nc.SetWriteDeadline(deadline(s.WriteTimeout))
			s.logf("httpd: request refused", "remote", c.nc.RemoteAddr().String(), "status", re.Code, "why", re.Msg)
			c.refuse(re)
		}
		return false
	}
	if s.ReadTimeout > 0 {
		c.nc.SetReadDeadline(start.Add(s.ReadTimeout))
	} else {
		c.nc.SetReadDeadline(time.Time{})
	}
	c.nc.SetWriteDeadline(deadline(s.WriteTimeout))
	req.RemoteAddr = c.nc.RemoteAddr().String()
	req.Secure = s.Secure
	b := &body{c: c, left: req.ContentLength, expect: req.ProtoMinor == 1 && req.Header.Get("Expect") != ""}
	req.Body = b
	base := s.BaseContext
	if base == nil {
		base = context.Background()
	}
	ctx, cancel := context.WithCancel(base)
	req.ctx = ctx
	w := &response{c: c, req: req, header: Header{}, body: b, head: req.Method == "HEAD", cl: -1}
	w.close = last || !keepAlive(req) || s.isClosing()
	ok := c.run(w, req)
	cancel()
	if !ok {
		return false
	}
	w.finish()
	if err := c.bw.Flush(); err != nil || w.close || b.err != nil {
		return false
	}
	if b.left > 0 {
		if b.expect && !b.continued {
			return false // the client waits for a 100 we never sent
		}
		if _, err := io.Copy(io.Discard, b); err != nil {
			return false
		}
	}
	return true
}

// run calls the handler; a panic is logged and closes the connection
// (an answer may be half sent).
func (c *conn) run(w *response, req *Request) (ok bool) {
	defer func() {
		if p := recover(); p != nil {
			c.s.logf("httpd: handler panicked", "method", req.Method, "path", req.URL.Path, "panic", fmt.Sprint(p), "stack", string(debug.Stack()))
			if !w.wroteWire {
				w.header = Header{}
				w.code, w.wroteHeader, w.buf, w.n = StatusInternalServerError, true, nil, 0
				w.close = true
				io.WriteString(w, "sqm: internal error\n")
				w.finish()
				c.bw.Flush()
			}
			ok = false
		}
	}()
	c.s.Handler.ServeHTTP(w, req)
	return true
}

// keepAlive: HTTP/1.1 keeps the connection unless the client says close;
// HTTP/1.0 only if it asks for keep-alive.
func keepAlive(r *Request) bool {
	closeTok, keepTok := false, false
	for _, v := range r.Header.Values("Connection") {
		for _, t := range strings.Split(v, ",") {
			switch strings.ToLower(strings.TrimSpace(t)) {
			case "close":
				closeTok = true
			case "keep-alive":
				keepTok = true
			}
		}
	}
	if closeTok {
		return false
	}
	return r.ProtoMinor == 1 || keepTok
}

// refuse answers a request that ReadRequest refused, and the connection
// is then closed: what follows on it cannot be trusted to be framed.
func (c *conn) refuse(re *RequestError) {
	msg := "sqm: " + strconv.Itoa(re.Code) + " " + StatusText(re.Code) + ": " + re.Msg + "\n"
	fmt.Fprintf(c.bw, "HTTP/1.1 %d %s\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: %d\r\nConnection: close\r\nDate: %s\r\n\r\n%s",
		re.Code, StatusText(re.Code), len(msg), time.Now().UTC().Format(TimeFormat), msg)
	c.bw.Flush()
}

// body is a request body framed by Content-Length.
type body struct {
	c         *conn
	left      int64
	expect    bool // Expect: 100-continue, answered on the first Read
	continued bool
	started   bool // the response has gone out: too late for a 100
	err       error
}

func (b *body) Read(p []byte) (int, error) {
	if b.err != nil {
		return 0, b.err
	}
	if b.left <= 0 {
		return 0, io.EOF
	}
	if b.expect && !b.continued {
		if b.started {
			return 0, errors.New("httpd: body read after the response began, without the 100 Continue the client waits for")
		}
		b.continued = true
		io.WriteString(b.c.bw, "HTTP/1.1 100 Continue\r\n\r\n")
		if err := b.c.bw.Flush(); err != nil {
			b.err = err
			return 0, err
		}
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.c.br.Read(p)
	b.left -= int64(n)
	if err == io.EOF && b.left > 0 {
		err = io.ErrUnexpectedEOF
	}
	if err != nil {
		b.err = err
		return n, err
	}
	if b.left == 0 {
		return n, io.EOF
	}
	return n, nil
}

// response is the server's ResponseWriter: the body is held in buf until
// the handler returns (then sent with its Content-Length) unless the
// handler declared a Content-Length, flushed, or wrote more than
// bufferBytes: then it streams.
type response struct {
	c      *conn
	req    *Request
	header Header
	body   *body

	code        int
	wroteHeader bool
	wroteWire   bool // the status line has gone to the connection
	head        bool
	close       bool
	chunked     bool // streaming in chunks
	buf         []byte
	n           int64 // body bytes the handler wrote
	cl          int64 // the declared Content-Length when streaming with one, or -1
	err         error
}

func (w *response) Header() Header { return w.header }

func (w *response) WriteHeader(code int) {
	if w.wroteHeader {
		return
	}
	if code < 200 || code > 999 {
		code = StatusInternalServerError // 1xx are the server's to send
	}
	w.wroteHeader, w.code = true, code
	if v := w.header.Get("Content-Length"); v != "" {
		if n, err := strconv.ParseInt(v, 10, 64); err == nil && n >= 0 {
			w.cl = n
		} else {
			w.header.Del("Content-Length")
		}
	}
}

// bodyless statuses carry no body and no length.
func bodyless(code int) bool { return code == StatusNoContent || code == StatusNotModified }

func (w *response) Write(p []byte) (int, error) {
	if !w.wroteHeader {
		w.WriteHeader(StatusOK)
	}
	if w.err != nil {
		return 0, w.err
	}
	if bodyless(w.code) {
		return 0, fmt.Errorf("httpd: status %d has no body", w.code)
	}
	if w.cl >= 0 && w.n+int64(len(p)) > w.cl {
		w.close = true
		return 0, fmt.Errorf("httpd: body longer than the declared Content-Length %d", w.cl)
	}
	w.n += int64(len(p))
	if w.head {
		return len(p), nil
	}
	if !w.wroteWire && w.cl < 0 && len(w.buf)+len(p) <= bufferBytes {
		w.buf = append(w.buf, p...)
		return len(p), nil
	}
	if !w.wroteWire {
		w.startWire(-1)
	}
	return w.wire(p)
}

// wire writes body bytes to the connection, as a chunk when chunked.
func (w *response) wire(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	var err error
	if w.chunked {
		_, err = fmt.Fprintf(w.c.bw, "%x\r\n", len(p))
		if err == nil {
			_, err = w.c.bw.Write(p)
		}
		if err == nil {
			_, err = io.WriteString(w.c.bw, "\r\n")
		}
	} else {
		_, err = w.c.bw.Write(p)
	}
	if err != nil {
		w.err, w.close = err, true
		return 0, err
	}
	return len(p), nil
}

// Flush sends the header and what is buffered; the rest streams.
func (w *response) Flush() {
	if !w.wroteHeader {
		w.WriteHeader(StatusOK)
	}
	if !w.wroteWire {
		w.startWire(-1)
	}
	if err := w.c.bw.Flush(); err != nil {
		w.err, w.close = err, true
	}
}

// startWire writes the status line and header. length is the body's
// length when known (the whole body is in buf), else -1: the declared
// Content-Length, chunks (HTTP/1.1), or the connection's end (1.0).
func (w *response) startWire(length int64) {
	w.wroteWire = true
	w.body.started = true
	h := w.header
	h.Del("Transfer-Encoding")
	if strings.EqualFold(h.Get("Connection"), "close") || w.c.s.isClosing() {
		w.close = true
	}
	h.Del("Connection")
	if w.body.expect && !w.body.continued && w.body.left > 0 {
		w.close = true // the client may or may not send the body now
	}
	switch {
	case bodyless(w.code):
		h.Del("Content-Length")
	case w.cl >= 0:
		// the handler's
	case length >= 0:
		h.Set("Content-Length", strconv.FormatInt(length, 10))
	case w.head:
	case w.req.ProtoMinor == 1:
		w.chunked = true
		h.Set("Transfer-Encoding", "chunked")
	default:
		w.close = true
	}
	if w.close {
		h.Set("Connection", "close")
	} else if w.req.ProtoMinor == 0 {
		h.Set("Connection", "keep-alive")
	}
	if h.Get("Date") == "" {
		h.Set("Date", time.Now().UTC().Format(TimeFormat))
	}
	bw := w.c.bw
	text := StatusText(w.code)
	if text == "" {
		text = "Status"
	}
	fmt.Fprintf(bw, "HTTP/1.1 %d %s\r\n", w.code, text)
	keys := make([]string, 0, len(h))
	for k := range h {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if !isToken(k) {
			continue
		}
		for _, v := range h[k] {
			bw.WriteString(k)
			bw.WriteString(": ")
			bw.WriteString(cleanValue(v))
			bw.WriteString("\r\n")
		}
	}
	bw.WriteString("\r\n")
	if len(w.buf) > 0 {
		buf := w.buf
		w.buf = nil
		w.wire(buf)
	}
}

// cleanValue keeps a handler's header value on its line: CR, LF and NUL
// become spaces (a value from a request echoed back cannot split the
// response).
func cleanValue(v string) string {
	if strings.IndexFunc(v, func(r rune) bool { return r == '\r' || r == '\n' || r == 0 }) < 0 {
		return v
	}
	return strings.Map(func(r rune) rune {
		if r == '\r' || r == '\n' || r == 0 {
			return ' '
		}
		return r
	}, v)
}

// finish completes the response after the handler returned.
func (w *response) finish() {
	if !w.wroteHeader {
		w.WriteHeader(StatusOK)
	}
	if !w.wroteWire {
		n := int64(len(w.buf))
		if w.head {
			n = w.n
		}
		w.startWire(n)
	}
	if w.chunked && w.err == nil {
		io.WriteString(w.c.bw, "0\r\n\r\n")
	}
	if w.cl >= 0 && w.n != w.cl && !w.head {
		w.close = true // the client waits for bytes that will not come
	}
}
