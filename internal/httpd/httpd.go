// Package httpd is the daemon's own HTTP/1.1 server: what its page
// (internal/web) and /metrics need, and nothing more. It exists for size:
// net/http always links crypto/tls and its HTTP/2 server, about 3.5 MB on
// a mipsle router, where a server on net/textproto and net/url costs a
// tenth of that. It is also strict where net/http is lenient, because a
// small server that refuses every ambiguous message cannot be smuggled
// past: request bodies are framed by one Content-Length only (chunked
// bodies get 411, other codings 501), header lines end in CRLF with no
// folding, bare CR or control bytes, and an HTTP/1.1 request must name
// exactly one Host.
//
// What it serves: HTTP/1.1 and 1.0 on a net.Listener (wrap it with
// tls.NewListener for HTTPS), keep-alive with a per-connection request
// cap, the read-header, read, write and idle timeouts, responses with a
// Content-Length when the handler's body fits the buffer and chunked when
// it streams (Flush, or a body larger than the buffer), HEAD, and
// Expect: 100-continue. Mux routes exact paths by method.
package httpd

import (
	"context"
	"io"
	"net/textproto"
	"net/url"
	"strings"
)

// Header is a message's header fields, keyed by their canonical form
// (textproto.CanonicalMIMEHeaderKey): Get, Set, Add, Del and Values.
type Header = textproto.MIMEHeader

// Request is one request as read from the connection (or built by
// httpdtest.NewRequest).
type Request struct {
	Method string
	// Target is the request-target as the client sent it.
	Target string
	// URL holds Path (decoded) and RawQuery of the target.
	URL *url.URL
	// Proto is "HTTP/1.1" or "HTTP/1.0"; ProtoMinor is 1 or 0.
	Proto      string
	ProtoMinor int
	Header     Header
	// Host is the Host header, or an absolute-form target's authority.
	Host string
	// RemoteAddr is the connection's peer, "ip:port".
	RemoteAddr string
	// ContentLength is the body's length (0: none).
	ContentLength int64
	// Body reads the body; it is never nil and ends at ContentLength.
	Body io.Reader
	// Secure says the request came over TLS (Server.Secure).
	Secure bool

	ctx context.Context
}

// Context is the request's context: the server's base context, cancelled
// when the handler returns.
func (r *Request) Context() context.Context {
	if r.ctx == nil {
		return context.Background()
	}
	return r.ctx
}

// WithContext returns a shallow copy of r with ctx.
func (r *Request) WithContext(ctx context.Context) *Request {
	c := *r
	c.ctx = ctx
	return &c
}

// Query parses the target's query; malformed pairs are left out.
func (r *Request) Query() url.Values {
	if r.URL == nil {
		return url.Values{}
	}
	v, _ := url.ParseQuery(r.URL.RawQuery)
	return v
}

// Handler answers a request.
type Handler interface {
	ServeHTTP(ResponseWriter, *Request)
}

// HandlerFunc is a function as a Handler.
type HandlerFunc func(ResponseWriter, *Request)

func (f HandlerFunc) ServeHTTP(w ResponseWriter, r *Request) { f(w, r) }

// ResponseWriter is what a handler answers with. Headers set after
// WriteHeader (or the first Write) are not sent.
type ResponseWriter interface {
	Header() Header
	WriteHeader(code int)
	Write([]byte) (int, error)
}

// Flusher is implemented by the server's ResponseWriter: Flush sends what
// was written so far, the response then goes on chunked (HTTP/1.1) or
// until the connection closes (HTTP/1.0).
type Flusher interface {
	Flush()
}

// Error answers with a plain-text message.
func Error(w ResponseWriter, msg string, code int) {
	h := w.Header()
	h.Del("Content-Length")
	h.Set("Content-Type", "text/plain; charset=utf-8")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(code)
	io.WriteString(w, msg)
	if !strings.HasSuffix(msg, "\n") {
		io.WriteString(w, "\n")
	}
}

// Status codes the page and the server itself use.
const (
	StatusContinue              = 100
	StatusOK                    = 200
	StatusAccepted              = 202
	StatusNoContent             = 204
	StatusNotModified           = 304
	StatusBadRequest            = 400
	StatusUnauthorized          = 401
	StatusForbidden             = 403
	StatusNotFound              = 404
	StatusMethodNotAllowed      = 405
	StatusRequestTimeout        = 408
	StatusConflict              = 409
	StatusLengthRequired        = 411
	StatusContentTooLarge       = 413
	StatusURITooLong            = 414
	StatusUnsupportedMediaType  = 415
	StatusExpectationFailed     = 417
	StatusMisdirectedRequest    = 421
	StatusTooManyRequests       = 429
	StatusHeaderFieldsTooLarge  = 431
	StatusInternalServerError   = 500
	StatusNotImplemented        = 501
	StatusServiceUnavailable    = 503
	StatusHTTPVersionNotSupport = 505
)

// StatusText is the reason phrase of code ("" if this package does not
// know it; the status line then says "Status").
func StatusText(code int) string {
	switch code {
	case 100:
		return "Continue"
	case 200:
		return "OK"
	case 201:
		return "Created"
	case 202:
		return "Accepted"
	case 204:
		return "No Content"
	case 301:
		return "Moved Permanently"
	case 302:
		return "Found"
	case 304:
		return "Not Modified"
	case 400:
		return "Bad Request"
	case 401:
		return "Unauthorized"
	case 403:
		return "Forbidden"
	case 404:
		return "Not Found"
	case 405:
		return "Method Not Allowed"
	case 408:
		return "Request Timeout"
	case 409:
		return "Conflict"
	case 411:
		return "Length Required"
	case 413:
		return "Content Too Large"
	case 414:
		return "URI Too Long"
	case 415:
		return "Unsupported Media Type"
	case 417:
		return "Expectation Failed"
	case 421:
		return "Misdirected Request"
	case 429:
		return "Too Many Requests"
	case 431:
		return "Request Header Fields Too Large"
	case 500:
		return "Internal Server Error"
	case 501:
		return "Not Implemented"
	case 503:
		return "Service Unavailable"
	case 505:
		return "HTTP Version Not Supported"
	}
	return ""
}

// TimeFormat is the date form of Date and Expires (RFC 9110 IMF-fixdate).
const TimeFormat = "Mon, 02 Jan 2006 15:04:05 GMT"
