package httpd

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net/textproto"
	"net/url"
	"strconv"
	"strings"
)

// RequestError is a request the server refuses before any handler sees
// it: Code is the status it answers with, Msg says what is wrong and where.
type RequestError struct {
	Code int
	Msg  string
}

func (e *RequestError) Error() string {
	return fmt.Sprintf("%d %s: %s", e.Code, StatusText(e.Code), e.Msg)
}

func refuse(code int, format string, args ...any) *RequestError {
	return &RequestError{Code: code, Msg: fmt.Sprintf(format, args...)}
}

// Limits bound what reading one request may hold.
type Limits struct {
	// HeaderBytes caps the request line and header fields together; over
	// it: 431 (414 when the request line alone is over it).
	HeaderBytes int
	// Fields caps the number of header fields (431 over it).
	Fields int
	// Body caps Content-Length (413 over it).
	Body int64
	// Secure: the connection is TLS, so an absolute-form target may say
	// https.
	Secure bool
}

// maxEmptyLines is how many empty lines may come before a request line:
// RFC 9112 asks servers to skip at least one (a client's stray CRLF after
// a body), and more than a few is a client sending garbage.
const maxEmptyLines = 4

// errNoRequest is a connection that closed (or timed out) before a
// request's first byte: no answer is owed.
var errNoRequest = errors.New("no request")

// lineReader reads CRLF-terminated lines within a byte budget.
type lineReader struct {
	br     *bufio.Reader
	budget int
	read   int // bytes of this request read so far
}

// line returns the next line without its CRLF. Over the budget it returns
// errTooLong; a line that does not end in CRLF, or holds a CR elsewhere,
// is a RequestError.
func (lr *lineReader) line(what string) ([]byte, error) {
	var buf []byte
	for {
		frag, err := lr.br.ReadSlice('\n')
		lr.read += len(frag)
		if lr.read > lr.budget {
			return nil, errTooLong
		}
		if err == bufio.ErrBufferFull {
			buf = append(buf, frag...)
			continue
		}
		if err != nil {
			if err == io.EOF && lr.read == 0 {
				return nil, errNoRequest
			}
			if lr.read == 0 {
				return nil, errNoRequest
			}
			return nil, err
		}
		if buf != nil {
			frag = append(buf, frag...)
		}
		n := len(frag)
		if n < 2 || frag[n-2] != '\r' {
			return nil, refuse(StatusBadRequest, "%s ends in a bare LF (lines end in CRLF)", what)
		}
		l := frag[:n-2]
		for i, c := range l {
			if c == '\r' {
				return nil, refuse(StatusBadRequest, "%s has a bare CR at byte %d", what, i)
			}
		}
		return l, nil
	}
}

var errTooLong = errors.New("over the header budget")

// ReadRequest reads one request's line and header fields from br and
// checks them; the body is left in br, framed by ContentLength (Body is
// set by the server). Errors are *RequestError for a request to refuse,
// errNoRequest for a connection that sent nothing, or the read error.
func ReadRequest(br *bufio.Reader, lim Limits) (*Request, error) {
	lr := &lineReader{br: br, budget: lim.HeaderBytes}
	var line []byte
	for empty := 0; ; empty++ {
		l, err := lr.line("the request line")
		if err == errTooLong {
			return nil, refuse(StatusURITooLong, "the request line is longer than %d bytes", lim.HeaderBytes)
		}
		if err != nil {
			return nil, err
		}
		if len(l) > 0 {
			line = l
			break
		}
		if empty >= maxEmptyLines {
			return nil, refuse(StatusBadRequest, "more than %d empty lines before the request line", maxEmptyLines)
		}
		lr.read = 0 // skipped lines are not the request's
	}
	r, err := parseRequestLine(string(line))
	if err != nil {
		return nil, err
	}
	r.Header = Header{}
	for n := 0; ; n++ {
		l, err := lr.line("a header line")
		if err == errTooLong {
			return nil, refuse(StatusHeaderFieldsTooLarge, "the request line and header fields are longer than %d bytes", lim.HeaderBytes)
		}
		if err == errNoRequest {
			err = io.ErrUnexpectedEOF
		}
		if err != nil {
			return nil, err
		}
		if len(l) == 0 {
			break
		}
		if n >= lim.Fields {
			return nil, refuse(StatusHeaderFieldsTooLarge, "more than %d header fields", lim.Fields)
		}
		if err := addField(r.Header, l, n+1); err != nil {
			return nil, err
		}
	}
	if err := checkRequest(r, lim); err != nil {
		return nil, err
	}
	return r, nil
}

func parseRequestLine(line string) (*Request, error) {
	method, rest, ok1 := strings.Cut(line, " ")
	target, proto, ok2 := strings.Cut(rest, " ")
	if !ok1 || !ok2 || strings.Contains(proto, " ") {
		return nil, refuse(StatusBadRequest, "request line %q: want METHOD SP TARGET SP HTTP/1.1, single spaces", clip(line))
	}
	if method == "" || !isToken(method) {
		return nil, refuse(StatusBadRequest, "method %q is not a token", clip(method))
	}
	if target == "" {
		return nil, refuse(StatusBadRequest, "empty request target")
	}
	for i := 0; i < len(target); i++ {
		if c := target[i]; c <= ' ' || c >= 0x7f || c == '#' {
			return nil, refuse(StatusBadRequest, "request target has byte %#02x at %d (controls, spaces, non-ASCII and # are not allowed; percent-encode them)", c, i)
		}
	}
	r := &Request{Method: method, Target: target, Proto: proto}
	switch proto {
	case "HTTP/1.1":
		r.ProtoMinor = 1
	case "HTTP/1.0":
	default:
		if len(proto) == 8 && strings.HasPrefix(proto, "HTTP/") && isDigit(proto[5]) && proto[6] == '.' && isDigit(proto[7]) {
			return nil, refuse(StatusHTTPVersionNotSupport, "%s: this server speaks HTTP/1.1 and 1.0", proto)
		}
		return nil, refuse(StatusBadRequest, "protocol %q: want HTTP/1.1 or HTTP/1.0", clip(proto))
	}
	return r, nil
}

// addField adds header line l (the n-th) to h.
func addField(h Header, l []byte, n int) error {
	if l[0] == ' ' || l[0] == '\t' {
		return refuse(StatusBadRequest, "header line %d starts with whitespace (obs-fold: line folding is not accepted)", n)
	}
	colon := -1
	for i, c := range l {
		if c == ':' {
			colon = i
			break
		}
	}
	if colon < 0 {
		return refuse(StatusBadRequest, "header line %d has no colon", n)
	}
	name := string(l[:colon])
	if name == "" {
		return refuse(StatusBadRequest, "header line %d has an empty field name", n)
	}
	if !isToken(name) {
		return refuse(StatusBadRequest, "header line %d: field name %q is not a token (no spaces before the colon)", n, clip(name))
	}
	v := l[colon+1:]
	for len(v) > 0 && (v[0] == ' ' || v[0] == '\t') {
		v = v[1:]
	}
	for len(v) > 0 && (v[len(v)-1] == ' ' || v[len(v)-1] == '\t') {
		v = v[:len(v)-1]
	}
	for i, c := range v {
		if c < ' ' && c != '\t' || c == 0x7f {
			return refuse(StatusBadRequest, "header %s: control byte %#02x in the value at %d", name, c, i)
		}
	}
	key := textproto.CanonicalMIMEHeaderKey(name)
	h[key] = append(h[key], string(v))
	return nil
}

// checkRequest applies the rules that need the whole header: the target's
// form, Host, and the body's framing.
func checkRequest(r *Request, lim Limits) error {
	hosts := r.Header.Values("Host")
	if len(hosts) > 1 {
		return refuse(StatusBadRequest, "%d Host header fields; a request names one", len(hosts))
	}
	if len(hosts) == 0 && r.ProtoMinor == 1 {
		return refuse(StatusBadRequest, "an HTTP/1.1 request needs a Host header field")
	}
	if len(hosts) == 1 {
		if !validHost(hosts[0]) {
			return refuse(StatusBadRequest, "Host %q is not a host[:port]", clip(hosts[0]))
		}
		r.Host = hosts[0]
	}
	if err := parseTarget(r, lim.Secure); err != nil {
		return err
	}
	te := r.Header.Values("Transfer-Encoding")
	cl := r.Header.Values("Content-Length")
	if len(te) > 0 {
		if len(cl) > 0 {
			return refuse(StatusBadRequest, "both Transfer-Encoding and Content-Length (an ambiguous body: request smuggling)")
		}
		if r.ProtoMinor == 0 {
			return refuse(StatusBadRequest, "Transfer-Encoding in an HTTP/1.0 request")
		}
		codings := strings.Split(strings.Join(te, ","), ",")
		last := strings.ToLower(strings.TrimSpace(codings[len(codings)-1]))
		if last == "chunked" && len(codings) == 1 {
			return refuse(StatusLengthRequired, "chunked request bodies are not taken; send the body with a Content-Length")
		}
		return refuse(StatusNotImplemented, "Transfer-Encoding %q is not implemented; send the body with a Content-Length", clip(strings.Join(te, ", ")))
	}
	switch len(cl) {
	case 0:
	case 1:
		v := cl[0]
		if v == "" || len(v) > 18 || strings.TrimLeft(v, "0123456789") != "" {
			return refuse(StatusBadRequest, "Content-Length %q is not a decimal number", clip(v))
		}
		n, _ := strconv.ParseInt(v, 10, 64)
		if n > lim.Body {
			return refuse(StatusContentTooLarge, "a body of %d bytes; this server takes at most %d", n, lim.Body)
		}
		r.ContentLength = n
	default:
		return refuse(StatusBadRequest, "%d Content-Length header fields (an ambiguous body: request smuggling)", len(cl))
	}
	if exp := r.Header.Values("Expect"); len(exp) > 0 && r.ProtoMinor == 1 {
		if len(exp) > 1 || !strings.EqualFold(exp[0], "100-continue") {
			return refuse(StatusExpectationFailed, "Expect %q: this server knows only 100-continue", clip(strings.Join(exp, ", ")))
		}
	}
	return nil
}

// parseTarget reads the target into URL (and Host, for absolute form).
func parseTarget(r *Request, secure bool) error {
	t := r.Target
	switch {
	case r.Method == "CONNECT":
		return refuse(StatusNotImplemented, "CONNECT: this server is no proxy")
	case t == "*":
		return refuse(StatusNotImplemented, "the asterisk target (OPTIONS *) is not served")
	case t[0] == '/':
		if strings.HasPrefix(t, "//") {
			return refuse(StatusBadRequest, "target %q starts with //", clip(t))
		}
	default:
		// Absolute form, as sent to proxies: RFC 9112 makes its
		// authority the request's host, so it must agree with Host.
		scheme, rest, ok := strings.Cut(t, "://")
		if !ok {
			return refuse(StatusBadRequest, "target %q: want a path (/...) or http://host/path", clip(t))
		}
		if !strings.EqualFold(scheme, "http") && !(secure && strings.EqualFold(scheme, "https")) {
			return refuse(StatusBadRequest, "target %q: scheme %q is not this server's", clip(t), clip(scheme))
		}
		auth, path := rest, "/"
		if i := strings.IndexAny(rest, "/?"); i >= 0 {
			auth, path = rest[:i], rest[i:]
			if path[0] == '?' {
				path = "/" + path
			}
		}
		// validHost refuses user info ('@'): a browser never sends it.
		if !validHost(auth) {
			return refuse(StatusBadRequest, "target %q: authority %q is not a host[:port]", clip(t), clip(auth))
		}
		if len(r.Header.Values("Host")) == 1 && !strings.EqualFold(r.Host, auth) {
			return refuse(StatusBadRequest, "target names host %q but the Host header says %q", clip(auth), clip(r.Host))
		}
		r.Host = auth
		t = path
	}
	u, err := url.ParseRequestURI(t)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return refuse(StatusBadRequest, "target %q: %v", clip(r.Target), err)
	}
	r.URL = u
	return nil
}

// validHost accepts a host[:port] of reg-name, IPv4 or [IPv6] characters;
// whether the server answers to it is the handler's choice.
func validHost(h string) bool {
	if h == "" {
		return false
	}
	for i := 0; i < len(h); i++ {
		c := h[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case strings.IndexByte("-._~!$&'()*+,;=:[]%", c) >= 0:
		default:
			return false
		}
	}
	return true
}

// isToken reports whether s is an RFC 9110 token (methods, field names).
func isToken(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0:
		default:
			return false
		}
	}
	return s != ""
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

// clip shortens what an error quotes from the request.
func clip(s string) string {
	if len(s) > 64 {
		return s[:64] + "..."
	}
	return s
}
