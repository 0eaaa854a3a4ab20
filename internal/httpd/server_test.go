package httpd

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// read answers reads one response from br with net/http's client parser
// (an independent reading of what the server sent).
func readResponse(t *testing.T, br *bufio.Reader, method string) (*http.Response, string) {
	t.Helper()
	res, err := http.ReadResponse(br, &http.Request{Method: method})
	if err != nil {
		t.Fatalf("reading the response: %v", err)
	}
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatalf("reading the body: %v", err)
	}
	return res, string(b)
}

func dial(t *testing.T, addr string) (net.Conn, *bufio.Reader) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(guard))
	return c, bufio.NewReader(c)
}

// closed reports whether the server closed c (within guard), after
// whatever it still sent.
func closed(c net.Conn, br *bufio.Reader) bool {
	c.SetReadDeadline(time.Now().Add(guard))
	_, err := io.Copy(io.Discard, br)
	return !isTimeout(err)
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// TestKeepAlive: HTTP/1.1 keeps the connection (pipelined requests are
// answered in order), Connection: close ends it; HTTP/1.0 ends it unless
// asked to keep it; after MaxRequestsPerConn the server says close and
// closes.
func TestKeepAlive(t *testing.T) {
	var n atomic.Int32
	s := &Server{MaxRequestsPerConn: 3, Handler: HandlerFunc(func(w ResponseWriter, r *Request) {
		fmt.Fprintf(w, "%s %d", r.URL.Path, n.Add(1))
	})}
	addr := okServer(t, s)

	c, br := dial(t, addr)
	io.WriteString(c, "GET /a HTTP/1.1\r\nHost: x\r\n\r\nGET /b HTTP/1.1\r\nHost: x\r\n\r\n")
	for _, want := range []string{"/a", "/b"} {
		res, body := readResponse(t, br, "GET")
		if !strings.HasPrefix(body, want+" ") || res.Close || res.ContentLength != int64(len(body)) {
			t.Fatalf("pipelined %s: %q close %v length %d", want, body, res.Close, res.ContentLength)
		}
	}
	io.WriteString(c, "GET /c HTTP/1.1\r\nHost: x\r\n\r\nGET /d HTTP/1.1\r\nHost: x\r\n\r\n")
	if res, body := readResponse(t, br, "GET"); !res.Close || !strings.HasPrefix(body, "/c ") {
		t.Errorf("the 3rd request of a connection capped at 3: close %v %q; want Connection: close", res.Close, body)
	}
	if !closed(c, br) {
		t.Error("the connection stayed open past its request cap")
	}

	c, br = dial(t, addr)
	io.WriteString(c, "GET /e HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
	if res, _ := readResponse(t, br, "GET"); !res.Close || !closed(c, br) {
		t.Error("Connection: close did not close")
	}
	c, br = dial(t, addr)
	io.WriteString(c, "GET /f HTTP/1.0\r\n\r\n")
	if res, _ := readResponse(t, br, "GET"); !res.Close || !closed(c, br) {
		t.Error("HTTP/1.0 without keep-alive did not close")
	}
	c, br = dial(t, addr)
	io.WriteString(c, "GET /g HTTP/1.0\r\nConnection: keep-alive\r\n\r\nGET /h HTTP/1.0\r\n\r\n")
	if res, _ := readResponse(t, br, "GET"); res.Close || res.Header.Get("Connection") != "keep-alive" {
		t.Errorf("HTTP/1.0 keep-alive: close %v, Connection %q", res.Close, res.Header.Get("Connection"))
	}
	if _, body := readResponse(t, br, "GET"); !strings.HasPrefix(body, "/h ") {
		t.Errorf("second HTTP/1.0 request: %q", body)
	}
}

// TestTimeouts: a connection that sends nothing, one that stalls its
// header, one that stalls its body and a kept-alive one left idle are
// each closed after their timeout; a client that does not read a large
// answer fails the handler's writes after the write timeout.
func TestTimeouts(t *testing.T) {
	writeErr := make(chan error, 1)
	s := &Server{ReadHeaderTimeout: 150 * time.Millisecond, ReadTimeout: 300 * time.Millisecond,
		IdleTimeout: 200 * time.Millisecond, WriteTimeout: 300 * time.Millisecond,
		Handler: HandlerFunc(func(w ResponseWriter, r *Request) {
			if r.URL.Path == "/big" {
				chunk := make([]byte, 64<<10)
				for range 1 << 12 { // 256 MiB: more than any socket buffers
					if _, err := w.Write(chunk); err != nil {
						writeErr <- err
						return
					}
				}
				writeErr <- nil
				return
			}
			_, err := io.ReadAll(r.Body)
			if err != nil {
				Error(w, err.Error(), StatusBadRequest)
				return
			}
			io.WriteString(w, "ok")
		})}
	addr := okServer(t, s)
	for name, raw := range map[string]string{
		"silent":         "",
		"stalled header": "GET / HTTP/1.1\r\nHost: x\r\n",
		"stalled body":   "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\nabc",
	} {
		c, br := dial(t, addr)
		io.WriteString(c, raw)
		start := time.Now()
		if !closed(c, br) {
			t.Errorf("%s: the connection stayed open", name)
		} else if d := time.Since(start); d > 2*time.Second {
			t.Errorf("%s: closed after %v", name, d)
		}
	}
	c, br := dial(t, addr)
	io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	readResponse(t, br, "GET")
	if !closed(c, br) {
		t.Error("an idle kept-alive connection stayed open")
	}
	c, _ = dial(t, addr)
	io.WriteString(c, "GET /big HTTP/1.1\r\nHost: x\r\n\r\n")
	select {
	case err := <-writeErr:
		if err == nil || !isTimeout(err) {
			t.Errorf("writing to a client that does not read: %v; want a timeout", err)
		}
	case <-time.After(guard):
		t.Error("the handler's writes to a client that does not read never failed")
	}
}

// TestResponses: a buffered body goes with its Content-Length, a large
// or flushed one chunked (HTTP/1.1) or until close (1.0), HEAD gets the
// length without the body, a handler's declared length is kept, and 304
// has neither.
func TestResponses(t *testing.T) {
	big := strings.Repeat("0123456789abcdef", 10000) // 160 kB: over the buffer
	s := &Server{Handler: HandlerFunc(func(w ResponseWriter, r *Request) {
		switch r.URL.Path {
		case "/small":
			w.Header().Set("Content-Type", "text/plain")
			io.WriteString(w, "hello")
		case "/big":
			io.WriteString(w, big)
		case "/flush":
			io.WriteString(w, "a")
			w.(Flusher).Flush()
			io.WriteString(w, "b")
		case "/declared":
			w.Header().Set("Content-Length", "3")
			io.WriteString(w, "abc")
		case "/short":
			w.Header().Set("Content-Length", "10")
			io.WriteString(w, "abc")
		case "/304":
			w.WriteHeader(StatusNotModified)
		case "/split":
			w.Header().Set("X-Echo", "a\r\nSet-Cookie: evil=1")
		}
	})}
	addr := okServer(t, s)
	get := func(method, path, proto string) (*http.Response, string, net.Conn, *bufio.Reader) {
		c, br := dial(t, addr)
		fmt.Fprintf(c, "%s %s %s\r\nHost: x\r\n\r\n", method, path, proto)
		res, body := readResponse(t, br, method)
		return res, body, c, br
	}
	if res, body, _, _ := get("GET", "/small", "HTTP/1.1"); body != "hello" || res.ContentLength != 5 || res.Header.Get("Date") == "" {
		t.Errorf("small: %q length %d", body, res.ContentLength)
	}
	if res, body, c, br := get("HEAD", "/small", "HTTP/1.1"); body != "" || res.ContentLength != 5 {
		t.Errorf("HEAD small: %q length %d; want no body and length 5", body, res.ContentLength)
	} else {
		// No body came after the header: the next answer on the
		// connection starts right there.
		io.WriteString(c, "GET /declared HTTP/1.1\r\nHost: x\r\n\r\n")
		if _, body := readResponse(t, br, "GET"); body != "abc" {
			t.Errorf("the answer after HEAD: %q", body)
		}
	}
	if res, body, _, _ := get("GET", "/big", "HTTP/1.1"); body != big || len(res.TransferEncoding) != 1 || res.TransferEncoding[0] != "chunked" {
		t.Errorf("big: %d bytes, transfer encoding %v; want %d chunked", len(body), res.TransferEncoding, len(big))
	}
	if res, body, c, br := get("GET", "/big", "HTTP/1.0"); body != big || !res.Close || !closed(c, br) {
		t.Errorf("big over 1.0: %d bytes, close %v", len(body), res.Close)
	}
	if res, body, _, _ := get("GET", "/flush", "HTTP/1.1"); body != "ab" || len(res.TransferEncoding) != 1 {
		t.Errorf("flush: %q %v", body, res.TransferEncoding)
	}
	if res, body, _, _ := get("GET", "/declared", "HTTP/1.1"); body != "abc" || res.ContentLength != 3 || res.Close {
		t.Errorf("declared: %q %d close %v", body, res.ContentLength, res.Close)
	}
	c, _ := dial(t, addr)
	io.WriteString(c, "GET /short HTTP/1.1\r\nHost: x\r\n\r\n")
	if out, err := io.ReadAll(c); !strings.HasSuffix(string(out), "\r\n\r\nabc") || isTimeout(err) {
		t.Errorf("a body shorter than its declared length: %q, %v; want it sent and the connection closed", out, err)
	}
	if res, body, _, _ := get("GET", "/304", "HTTP/1.1"); res.StatusCode != 304 || body != "" || res.Header.Get("Content-Length") != "" {
		t.Errorf("304: %d %q %v", res.StatusCode, body, res.Header)
	}
	if res, _, _, _ := get("GET", "/split", "HTTP/1.1"); res.Header.Get("Set-Cookie") != "" || res.Header.Get("X-Echo") != "a  Set-Cookie: evil=1" {
		t.Errorf("a header value with CRLF: %v; want it on its own line", res.Header)
	}
}

// TestExpectContinue: the server sends 100 Continue when the handler
// reads the body, and none when it answers without reading it (then it
// closes: the client might send the body or not).
func TestExpectContinue(t *testing.T) {
	s := &Server{Handler: HandlerFunc(func(w ResponseWriter, r *Request) {
		if r.URL.Path == "/read" {
			b, _ := io.ReadAll(r.Body)
			w.Write(b)
			return
		}
		Error(w, "no", StatusForbidden)
	})}
	addr := okServer(t, s)
	c, br := dial(t, addr)
	io.WriteString(c, "POST /read HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 5\r\n\r\n")
	line, err := br.ReadString('\n')
	if err != nil || line != "HTTP/1.1 100 Continue\r\n" {
		t.Fatalf("before the body: %q %v; want 100 Continue", line, err)
	}
	br.ReadString('\n')
	io.WriteString(c, "hello")
	if res, body := readResponse(t, br, "POST"); res.StatusCode != 200 || body != "hello" || res.Close {
		t.Errorf("after 100: %d %q close %v", res.StatusCode, body, res.Close)
	}
	c, br = dial(t, addr)
	io.WriteString(c, "POST /refuse HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 5\r\n\r\n")
	if res, _ := readResponse(t, br, "POST"); res.StatusCode != 403 || !res.Close || !closed(c, br) {
		t.Errorf("refused without reading: %d close %v; want 403 and the connection closed", res.StatusCode, res.Close)
	}
}

// TestUnreadBody: a body the handler leaves is skipped, and the next
// request on the connection is read from after it.
func TestUnreadBody(t *testing.T) {
	addr := okServer(t, &Server{Handler: HandlerFunc(func(w ResponseWriter, r *Request) { io.WriteString(w, r.URL.Path) })})
	c, br := dial(t, addr)
	io.WriteString(c, "POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: 22\r\n\r\nGET /evil HTTP/1.1\r\n\r\nGET /b HTTP/1.1\r\nHost: x\r\n\r\n")
	for _, want := range []string{"/a", "/b"} {
		if _, body := readResponse(t, br, "GET"); body != want {
			t.Errorf("%q; want %q", body, want)
		}
	}
}

// TestPanic: a handler's panic is a 500 (when nothing was sent yet),
// logged, and the connection is closed.
func TestPanic(t *testing.T) {
	var logged atomic.Bool
	s := &Server{Handler: HandlerFunc(func(w ResponseWriter, r *Request) { panic("boom") }),
		Log: func(msg string, args ...any) {
			if strings.Contains(fmt.Sprint(args...), "boom") {
				logged.Store(true)
			}
		}}
	addr := okServer(t, s)
	c, br := dial(t, addr)
	io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	if res, _ := readResponse(t, br, "GET"); res.StatusCode != 500 || !closed(c, br) {
		t.Errorf("panic: %d", res.StatusCode)
	}
	if !logged.Load() {
		t.Error("the panic was not logged")
	}
}

// TestShutdown: idle connections are closed at once, a request in
// progress finishes, and Serve returns ErrServerClosed.
func TestShutdown(t *testing.T) {
	release := make(chan struct{})
	entered := make(chan struct{})
	s := &Server{Handler: HandlerFunc(func(w ResponseWriter, r *Request) {
		if r.URL.Path == "/slow" {
			close(entered)
			<-release
		}
		io.WriteString(w, "done")
	})}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- s.Serve(ln) }()
	addr := ln.Addr().String()
	idle, ibr := dial(t, addr)
	io.WriteString(idle, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	readResponse(t, ibr, "GET")
	busy, bbr := dial(t, addr)
	io.WriteString(busy, "GET /slow HTTP/1.1\r\nHost: x\r\n\r\n")
	<-entered
	shut := make(chan error, 1)
	go func() { shut <- s.Shutdown(context.Background()) }()
	if !closed(idle, ibr) {
		t.Error("an idle connection stayed open during shutdown")
	}
	close(release)
	if res, body := readResponse(t, bbr, "GET"); body != "done" || !res.Close {
		t.Errorf("the request in progress: %q close %v; want it finished with Connection: close", body, res.Close)
	}
	if err := <-shut; err != nil {
		t.Errorf("Shutdown: %v", err)
	}
	if err := <-served; err != ErrServerClosed {
		t.Errorf("Serve after Shutdown: %v", err)
	}
}

// TestMux: exact paths, the root alone, GET answering HEAD, 405 with
// Allow, 404.
func TestMux(t *testing.T) {
	m := NewMux()
	hit := func(name string) HandlerFunc {
		return func(w ResponseWriter, r *Request) { io.WriteString(w, name) }
	}
	m.HandleFunc("GET /{$}", hit("root"))
	m.HandleFunc("GET /api/x", hit("get x"))
	m.HandleFunc("POST /api/x", hit("post x"))
	m.Handle("/any", hit("any"))
	for _, tc := range []struct {
		method, path string
		code         int
		body, allow  string
	}{
		{"GET", "/", 200, "root", ""},
		{"HEAD", "/", 200, "root", ""},
		{"GET", "/index.html", 404, "no page", ""},
		{"GET", "/api/x", 200, "get x", ""},
		{"POST", "/api/x", 200, "post x", ""},
		{"PUT", "/api/x", 405, "takes GET, HEAD, POST", "GET, HEAD, POST"},
		{"POST", "/", 405, "takes GET, HEAD", "GET, HEAD"},
		{"GET", "/api/x/", 404, "no page", ""},
		{"GET", "/api", 404, "no page", ""},
		{"DELETE", "/any", 200, "any", ""},
	} {
		w := &recorder{h: Header{}}
		r := &Request{Method: tc.method, Header: Header{}}
		r.URL, _ = urlOf(tc.path)
		m.ServeHTTP(w, r)
		if w.code != tc.code || !strings.Contains(w.body.String(), tc.body) || w.h.Get("Allow") != tc.allow {
			t.Errorf("%s %s: %d %q Allow %q; want %d %q Allow %q", tc.method, tc.path, w.code, w.body.String(), w.h.Get("Allow"), tc.code, tc.body, tc.allow)
		}
	}
	for _, p := range []string{"GET /a/{x}", "/dir/", "GET /api/x"} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("pattern %q was taken", p)
				}
			}()
			m.HandleFunc(p, hit("x"))
		}()
	}
}

type recorder struct {
	h    Header
	code int
	body bytes.Buffer
}

func (r *recorder) Header() Header { return r.h }
func (r *recorder) WriteHeader(c int) {
	if r.code == 0 {
		r.code = c
	}
}
func (r *recorder) Write(p []byte) (int, error) { r.WriteHeader(200); return r.body.Write(p) }

// TestCookies: Set-Cookie with the attributes the page uses; a cookie
// that cannot be written is left out.
func TestCookies(t *testing.T) {
	for _, tc := range []struct {
		c    Cookie
		want string
	}{
		{Cookie{Name: "sqm_session", Value: "abc-_", Path: "/", HttpOnly: true, SameSite: SameSiteStrict}, "sqm_session=abc-_; Path=/; HttpOnly; SameSite=Strict"},
		{Cookie{Name: "s", Value: "", Path: "/", MaxAge: -1, Secure: true, HttpOnly: true, SameSite: SameSiteStrict}, "s=; Path=/; Max-Age=0; HttpOnly; Secure; SameSite=Strict"},
		{Cookie{Name: "s", Value: "v", MaxAge: 60, SameSite: SameSiteLax}, "s=v; Max-Age=60; SameSite=Lax"},
		{Cookie{Name: "s", Value: "v", Expires: time.Date(2026, 12, 1, 23, 0, 0, 0, time.FixedZone("x", 3600)), SameSite: SameSiteNone, Secure: true}, "s=v; Expires=Tue, 01 Dec 2026 22:00:00 GMT; Secure; SameSite=None"},
		{Cookie{Name: "s", Value: "a;b"}, ""},
		{Cookie{Name: "s", Value: "a b"}, ""},
		{Cookie{Name: "s t", Value: "v"}, ""},
		{Cookie{Name: "s", Value: "v", Path: "/;x"}, ""},
	} {
		w := &recorder{h: Header{}}
		SetCookie(w, &tc.c)
		if got := w.h.Get("Set-Cookie"); got != tc.want {
			t.Errorf("%+v: %q; want %q", tc.c, got, tc.want)
		}
	}
}
