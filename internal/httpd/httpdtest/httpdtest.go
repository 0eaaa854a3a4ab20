// Package httpdtest is for tests of httpd handlers: a request and a
// recorder to call a handler in-process, and a server on loopback to
// reach it with a real client (net/http's, in tests).
package httpdtest

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net"
	"net/url"
	"strings"
	"time"

	"sqm/internal/httpd"
)

// NewRequest is a request as the server would pass it, for target
// ("/path?query"): HTTP/1.1, Host example.com, from 192.0.2.1:1234. It
// panics on a target the server would refuse.
func NewRequest(method, target string, body io.Reader) *httpd.Request {
	u, err := url.ParseRequestURI(target)
	if err != nil {
		panic("httpdtest: target " + target + ": " + err.Error())
	}
	r := &httpd.Request{Method: method, Target: target, URL: u, Proto: "HTTP/1.1", ProtoMinor: 1,
		Header: httpd.Header{}, Host: "example.com", RemoteAddr: "192.0.2.1:1234", Body: strings.NewReader("")}
	if body != nil {
		b, _ := io.ReadAll(body)
		r.Body, r.ContentLength = bytes.NewReader(b), int64(len(b))
	}
	return r.WithContext(context.Background())
}

// Recorder records a handler's answer.
type Recorder struct {
	Code        int
	HeaderMap   httpd.Header
	Body        bytes.Buffer
	wroteHeader bool
}

func NewRecorder() *Recorder { return &Recorder{Code: 200, HeaderMap: httpd.Header{}} }

func (r *Recorder) Header() httpd.Header { return r.HeaderMap }

func (r *Recorder) WriteHeader(code int) {
	if !r.wroteHeader {
		r.Code, r.wroteHeader = code, true
	}
}

func (r *Recorder) Write(p []byte) (int, error) {
	r.WriteHeader(200)
	return r.Body.Write(p)
}

// Server is h served by httpd on a loopback port.
type Server struct {
	URL      string // http://127.0.0.1:PORT
	Listener net.Listener
	srv      *httpd.Server
	done     chan struct{}
}

// NewServer serves h on 127.0.0.1 with httpd's defaults.
func NewServer(h httpd.Handler) *Server {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic("httpdtest: " + err.Error())
	}
	s := &Server{URL: "http://" + ln.Addr().String(), Listener: ln, srv: &httpd.Server{Handler: h}, done: make(chan struct{})}
	go func() { s.srv.Serve(ln); close(s.done) }()
	return s
}

// Close stops the server, waiting a little for requests in progress.
func (s *Server) Close() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	s.srv.Shutdown(ctx)
	<-s.done
}

// RoundTrip writes raw (one or more requests, as bytes) to addr and
// returns all the server sent back until it closed the connection or
// wait passed: for tests of what a real client would never send.
func RoundTrip(addr string, raw string, wait time.Duration) (string, error) {
	c, err := net.DialTimeout("tcp", addr, wait)
	if err != nil {
		return "", err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(wait))
	if _, err := io.WriteString(c, raw); err != nil {
		return "", err
	}
	var out bytes.Buffer
	_, err = io.Copy(&out, bufio.NewReader(c))
	return out.String(), err
}
