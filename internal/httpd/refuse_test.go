package httpd

import (
	"bufio"
	"io"
	"net"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"
)

// refusals are requests the server must refuse, each with the status and
// a piece of the reason it must give. Each row was seen to fail once with
// its check turned off: scripts/httpd-mutations.py does that for each.
var refusals = []struct {
	name, raw string
	code      int
	why       string
}{
	// Framing: the shapes request smuggling is made of.
	{"two Content-Length", "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\nContent-Length: 3\r\n\r\nabc", 400, "2 Content-Length"},
	{"Content-Length list", "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 3, 3\r\n\r\nabc", 400, "not a decimal"},
	{"Content-Length and Transfer-Encoding", "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n", 400, "both Transfer-Encoding and Content-Length"},
	{"chunked body", "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n", 411, "Content-Length"},
	{"other coding", "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", 501, "not implemented"},
	{"Transfer-Encoding in 1.0", "POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n", 400, "HTTP/1.0"},
	{"Content-Length sign", "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: +3\r\n\r\nabc", 400, "not a decimal"},
	{"Content-Length negative", "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: -1\r\n\r\n", 400, "not a decimal"},
	{"Content-Length huge", "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 99999999999999999999\r\n\r\n", 400, "not a decimal"},
	{"body over the cap", "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 65537\r\n\r\n", 413, "at most 65536"},
	{"obs-fold", "GET / HTTP/1.1\r\nHost: a\r\nX-A: 1\r\n 2\r\n\r\n", 400, "obs-fold"},
	{"obs-fold tab", "GET / HTTP/1.1\r\nHost: a\r\nX-A: 1\r\n\t2\r\n\r\n", 400, "obs-fold"},
	{"bare CR in a value", "GET / HTTP/1.1\r\nHost: a\r\nX-A: 1\r2\r\n\r\n", 400, "bare CR"},
	{"bare CR in the request line", "GET /\r HTTP/1.1\r\nHost: a\r\n\r\n", 400, "bare CR"},
	{"bare LF", "GET / HTTP/1.1\nHost: a\r\n\r\n", 400, "bare LF"},
	{"bare LF header", "GET / HTTP/1.1\r\nHost: a\n\r\n", 400, "bare LF"},
	{"space before colon", "GET / HTTP/1.1\r\nHost: a\r\nContent-Length : 3\r\n\r\nabc", 400, "not a token"},
	{"bad name byte", "GET / HTTP/1.1\r\nHost: a\r\nX(A): 1\r\n\r\n", 400, "not a token"},
	{"empty name", "GET / HTTP/1.1\r\nHost: a\r\n: 1\r\n\r\n", 400, "empty field name"},
	{"no colon", "GET / HTTP/1.1\r\nHost: a\r\nX-A 1\r\n\r\n", 400, "no colon"},
	{"NUL in a value", "GET / HTTP/1.1\r\nHost: a\r\nX-A: 1\x002\r\n\r\n", 400, "control byte"},
	{"DEL in a value", "GET / HTTP/1.1\r\nHost: a\r\nX-A: 1\x7f\r\n\r\n", 400, "control byte"},
	// Host.
	{"no Host", "GET / HTTP/1.1\r\nX-A: 1\r\n\r\n", 400, "needs a Host"},
	{"two Hosts", "GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", 400, "2 Host"},
	{"bad Host", "GET / HTTP/1.1\r\nHost: a b\r\n\r\n", 400, "not a host"},
	{"Host with a slash", "GET / HTTP/1.1\r\nHost: a/b\r\n\r\n", 400, "not a host"},
	// Targets.
	{"absolute form, other host", "GET http://evil.example/ HTTP/1.1\r\nHost: a\r\n\r\n", 400, "Host header says"},
	{"absolute form, https on plain", "GET https://a/ HTTP/1.1\r\nHost: a\r\n\r\n", 400, "scheme"},
	{"absolute form, user info", "GET http://u@a/ HTTP/1.1\r\nHost: a\r\n\r\n", 400, "authority"},
	{"absolute form, other scheme", "GET ftp://a/ HTTP/1.1\r\nHost: a\r\n\r\n", 400, "scheme"},
	{"relative target", "GET index.html HTTP/1.1\r\nHost: a\r\n\r\n", 400, "want a path"},
	{"network-path target", "GET //a/b HTTP/1.1\r\nHost: a\r\n\r\n", 400, "starts with //"},
	{"fragment", "GET /#x HTTP/1.1\r\nHost: a\r\n\r\n", 400, "byte 0x23"},
	{"non-ASCII target", "GET /\xc3\xa9 HTTP/1.1\r\nHost: a\r\n\r\n", 400, "byte 0xc3"},
	{"bad escape", "GET /a%zz HTTP/1.1\r\nHost: a\r\n\r\n", 400, "invalid URL escape"},
	{"asterisk", "OPTIONS * HTTP/1.1\r\nHost: a\r\n\r\n", 501, "asterisk"},
	{"CONNECT", "CONNECT a:443 HTTP/1.1\r\nHost: a:443\r\n\r\n", 501, "no proxy"},
	// The request line.
	{"two spaces", "GET  / HTTP/1.1\r\nHost: a\r\n\r\n", 400, "single spaces"},
	{"no version", "GET /\r\nHost: a\r\n\r\n", 400, "single spaces"},
	{"bad method", "G(T / HTTP/1.1\r\nHost: a\r\n\r\n", 400, "not a token"},
	{"HTTP/2.0", "GET / HTTP/2.0\r\nHost: a\r\n\r\n", 505, "HTTP/1.1 and 1.0"},
	{"HTTP/1.2", "GET / HTTP/1.2\r\nHost: a\r\n\r\n", 505, "HTTP/1.1 and 1.0"},
	{"lower-case version", "GET / http/1.1\r\nHost: a\r\n\r\n", 400, "want HTTP/1.1"},
	{"empty lines", "\r\n\r\n\r\n\r\n\r\n\r\nGET / HTTP/1.1\r\nHost: a\r\n\r\n", 400, "empty lines"},
	// Sizes.
	{"long request line", "GET /" + strings.Repeat("a", 9000) + " HTTP/1.1\r\nHost: a\r\n\r\n", 414, "request line"},
	{"long header", "GET / HTTP/1.1\r\nHost: a\r\nX-A: " + strings.Repeat("a", 9000) + "\r\n\r\n", 431, "longer than 8192"},
	{"many fields", "GET / HTTP/1.1\r\nHost: a\r\n" + strings.Repeat("X-A: 1\r\n", 120) + "\r\n", 431, "more than 100"},
	// Expectations.
	{"unknown expectation", "POST / HTTP/1.1\r\nHost: a\r\nExpect: 200-ok\r\nContent-Length: 1\r\n\r\nx", 417, "100-continue"},
}

// okServer answers every request it is handed "ok", so a refusal comes
// from the server's checks alone.
func okServer(t *testing.T, s *Server) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if s.Handler == nil {
		s.Handler = HandlerFunc(func(w ResponseWriter, r *Request) { io.Copy(io.Discard, r.Body); io.WriteString(w, "ok") })
	}
	done := make(chan struct{})
	go func() { s.Serve(ln); close(done) }()
	t.Cleanup(func() {
		s.Shutdown(t.Context())
		<-done
	})
	return ln.Addr().String()
}

// exchange sends raw and returns what came back until the server closed
// the connection (or guard passed: then ok is false).
func exchange(t *testing.T, addr, raw string) (out string, closed bool) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(guard))
	io.WriteString(c, raw)
	b, err := io.ReadAll(c)
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		return string(b), false
	}
	return string(b), true
}

const guard = 5 * time.Second

// TestRefusals: each refused request gets its status, a body saying what
// is wrong, Connection: close, and the connection is closed: whatever
// follows it on the connection is never read as a request.
func TestRefusals(t *testing.T) {
	addr := okServer(t, &Server{})
	for _, tc := range refusals {
		t.Run(tc.name, func(t *testing.T) {
			// A second request follows: it must not be answered.
			out, closed := exchange(t, addr, tc.raw+"GET /smuggled HTTP/1.1\r\nHost: a\r\n\r\n")
			res, body := splitResponse(out)
			want := "HTTP/1.1 " + strconv.Itoa(tc.code) + " "
			if !strings.HasPrefix(res, want) || !strings.Contains(body, tc.why) {
				t.Fatalf("got %q\nwant %s... with %q in the body", out, want, tc.why)
			}
			if !strings.Contains(res, "\r\nConnection: close\r\n") || !closed {
				t.Errorf("the connection was not closed after the refusal: %q", out)
			}
			if strings.Count(out, "\r\nDate: ") != 1 {
				t.Errorf("more than one answer: %q", out)
			}
		})
	}
}

// TestAccepted: what the checks let through (so a check that refused too
// much would be seen).
func TestAccepted(t *testing.T) {
	addr := okServer(t, &Server{})
	for name, raw := range map[string]string{
		"origin form":             "GET /a/b?c=d HTTP/1.1\r\nHost: a\r\n\r\n",
		"absolute form, own host": "GET http://A:8080/x?y HTTP/1.1\r\nHost: a:8080\r\n\r\n",
		"1.0 without Host":        "GET / HTTP/1.0\r\n\r\n",
		"body":                    "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\n\r\nabc",
		"leading empty line":      "\r\nGET / HTTP/1.1\r\nHost: a\r\n\r\n",
		"obs-text value":          "GET / HTTP/1.1\r\nHost: a\r\nX-A: caf\xe9\r\n\r\n",
		"tab in a value":          "GET / HTTP/1.1\r\nHost: a\r\nX-A: 1\t2\r\n\r\n",
		"IPv6 host":               "GET / HTTP/1.1\r\nHost: [fd00::1]:80\r\n\r\n",
		"100-continue":            "POST / HTTP/1.1\r\nHost: a\r\nExpect: 100-Continue\r\nContent-Length: 1\r\n\r\nx",
		"Content-Length 0":        "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 0\r\n\r\n",
		"body at the cap":         "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 65536\r\n\r\n" + strings.Repeat("x", 65536),
	} {
		out, _ := exchange(t, addr, raw+"GET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n")
		if !strings.Contains(out, "HTTP/1.1 200 OK\r\n") || !strings.HasSuffix(out, "ok") {
			t.Errorf("%s: %q; want 200 ok", name, out)
		}
	}
}

func splitResponse(out string) (head, body string) {
	h, b, _ := strings.Cut(out, "\r\n\r\n")
	return h + "\r\n", b
}

// TestReadRequestFields: what a handler sees of an accepted request.
func TestReadRequestFields(t *testing.T) {
	raw := "POST http://router.lan:8080/api/x%20y?a=1&b=2 HTTP/1.1\r\nHost: router.lan:8080\r\nx-csrf-token:  tok \r\nCookie: a=1; sqm_session=\"abc\"; b=2\r\nContent-Length: 5\r\n\r\nhello"
	br := bufio.NewReader(strings.NewReader(raw))
	r, err := ReadRequest(br, Limits{HeaderBytes: 8192, Fields: 100, Body: 100})
	if err != nil {
		t.Fatal(err)
	}
	if r.Method != "POST" || r.Host != "router.lan:8080" || r.URL.Path != "/api/x y" || r.Query().Get("b") != "2" || r.ContentLength != 5 || r.ProtoMinor != 1 {
		t.Errorf("request %+v, URL %+v", r, r.URL)
	}
	if got := r.Header.Get("X-Csrf-Token"); got != "tok" {
		t.Errorf("X-CSRF-Token %q; want tok (the value without its spaces, the name in any case)", got)
	}
	if v, ok := r.Cookie("sqm_session"); !ok || v != "abc" {
		t.Errorf("cookie %q %v", v, ok)
	}
	if _, ok := r.Cookie("nope"); ok {
		t.Error("a cookie that is not there")
	}
	rest, _ := io.ReadAll(br)
	if string(rest) != "hello" {
		t.Errorf("body left in the reader: %q", rest)
	}
}

func urlOf(path string) (*url.URL, error) { return url.ParseRequestURI(path) }
