// Package web is sqm's own page, served by the daemon (sqm daemon --http):
// the queues' state with live counters, the config form, a bufferbloat
// test, and sqm tune with its rates saved into the config. The page is
// static HTML, CSS and JS embedded in the binary and served
// gzip-compressed; everything it shows comes from a JSON API. No
// template engine: html/template would link reflection-heavy code that
// defeats the linker's dead-code removal, and a router binary pays for
// every kilobyte.
//
// Security model (docs/web.md): the server listens on loopback or a LAN
// address, never on the shaped (WAN) interfaces' addresses (see
// CheckListen), and closes connections from clients routed through them
// (WANPeer). It caps connections per client and in total and bounds how
// long a request may take (limits), answers only Host names of the router
// (hostPolicy: DNS rebinding), and throttles failed logins per client
// (throttle). Every API
// call needs a session from a login with a password or token whose salted
// PBKDF2 hash is in a users file; the session cookie is HttpOnly and
// SameSite=Strict, and every change also needs the session's CSRF token in
// the X-CSRF-Token header and a JSON body. A read-only login sees
// everything and changes nothing. The one exception is GET /metrics (when
// Metrics is set): it needs no login, as a node_exporter's does not,
// because a Prometheus scraper cannot log in; it is read-only counters,
// and the listen checks above keep it off the WAN.
package web

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"sqm/internal/json"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"sqm/internal/bloat"
	"sqm/internal/httpd"
	"sqm/internal/logger"
	"sqm/internal/tune"
)

// Server is the page and its API. The daemon fills in the functions; tests
// give fakes.
type Server struct {
	// ConfigPath is the UCI file the form edits.
	ConfigPath string
	// Status returns the page's view of the queues (JSON-encodable):
	// `sqm status --json`'s document plus what the daemon knows.
	Status func(ctx context.Context) (any, error)
	// Apply has the daemon reload the config file and reports what it did,
	// one line per interface.
	Apply func(ctx context.Context) ([]string, error)
	// Test runs a bufferbloat test; bloat.Run when nil.
	Test func(ctx context.Context, o bloat.Options) (*bloat.Result, error)
	// Tune runs `sqm tune` on a section for the page: it shapes the
	// section's interface as it measures and puts the shaping from before
	// back when it ends, however it ends. nil: the page offers no tuning
	// (a build without the tuner).
	Tune func(ctx context.Context, req TuneRequest) (*tune.Result, error)
	// TestServer is the default test server (host[:port]) the forms show.
	TestServer string
	// Qdiscs lists the qdiscs the kernel offers, for the form's choice.
	Qdiscs func() []string
	Users  *Users
	// Metrics is mounted at /metrics when set (Prometheus text format).
	Metrics httpd.Handler
	Log     *logger.Logger
	// Hosts are the names, beyond the router's own (see hostPolicy), that
	// the page answers to in the Host header (--http-hosts).
	Hosts []string
	// TLS, when set, makes Serve speak HTTPS (HTTP/1.1) only. A build
	// with -tags sqm_notls has no TLS (LoadTLS says why), and TLS stays nil.
	TLS *TLSConfig
	// WANPeer, when set, is asked about each connection's remote address
	// and names the shaped (WAN) interface the router reaches it through,
	// or "": CheckListen keeps the page off the WAN's addresses, but
	// Linux accepts a packet for the LAN address on any interface, so a
	// host on the WAN side could reach the page unless the firewall drops
	// it. Asked per connection, it follows routes and interfaces that
	// come later.
	WANPeer func(netip.Addr) string

	ctx      context.Context // the daemon's, for work that outlives a request
	sessions *sessions
	throttle *throttle
	hosts    *hostPolicy
	conns    atomic.Pointer[limitListener] // Serve's, nil under httptest
	listen   string                        // Serve's listen address
	limits   limits
	// clock is time.Now; tests step it. check is Users.Check; tests
	// hold it to have a login in flight.
	clock  func() time.Time
	check  func(pw string) (Role, bool)
	cfgMu  sync.Mutex // one config change at a time
	test   testRunner
	tune   tuneRunner
	busyMu sync.Mutex
	busy   string // "test" or "tune": what loads the link now (claim)
	once   sync.Once
	mux    *httpd.Mux
}

const (
	cookieName = "sqm_session"
	csrfHeader = "X-CSRF-Token"
)

func (s *Server) base() context.Context {
	if s.ctx == nil {
		return context.Background()
	}
	return s.ctx
}

func (s *Server) log() *logger.Logger {
	if s.Log == nil {
		return logger.New(logger.Discard)
	}
	return s.Log
}

// ServeHTTP routes requests. Security headers go on every response.
func (s *Server) ServeHTTP(w httpd.ResponseWriter, r *httpd.Request) {
	s.once.Do(s.init)
	h := w.Header()
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'; form-action 'self'")
	if !s.hosts.allowed(r.Host) {
		refuseHost(w, r)
		return
	}
	s.mux.ServeHTTP(w, r)
}

// refuseHost answers a request for a name the router does not answer to:
// most likely a page elsewhere that pointed its own name at the router
// (DNS rebinding), or a name the admin has not added with --http-hosts.
func refuseHost(w httpd.ResponseWriter, r *httpd.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	if r.Host == "" {
		w.WriteHeader(httpd.StatusBadRequest)
		fmt.Fprintln(w, "sqm: the request names no host (no Host header); this page answers only requests for the router's own names and addresses")
		return
	}
	w.WriteHeader(httpd.StatusMisdirectedRequest)
	fmt.Fprintf(w, "sqm: this router's page does not answer to the name %q (a page elsewhere may have pointed that name at the router: DNS rebinding). Use the router's address or host name, or add the name with --http-hosts (option http_hosts).\n", r.Host)
}

func (s *Server) init() {
	if s.clock == nil {
		s.clock = time.Now
	}
	if s.check == nil {
		s.check = func(pw string) (Role, bool) {
			if s.Users == nil {
				return "", false
			}
			return s.Users.Check(pw)
		}
	}
	s.limits = s.limits.orDefaults()
	s.sessions = newSessions(s.clock)
	s.throttle = newThrottle(s.clock, s.log())
	hostname, _ := os.Hostname()
	s.hosts = newHostPolicy(s.listen, hostname, searchDomains("/etc/resolv.conf"), s.Hosts, interfaceAddrs, s.clock)
	m := httpd.NewMux()
	m.HandleFunc("GET /{$}", s.asset("index.html"))
	m.HandleFunc("GET /app.js", s.asset("app.js"))
	m.HandleFunc("GET /style.css", s.asset("style.css"))
	m.HandleFunc("POST /api/login", s.login)
	m.HandleFunc("POST /api/logout", s.auth(RoleRead, true, s.logout))
	m.HandleFunc("GET /api/session", s.auth(RoleRead, false, s.sessionInfo))
	m.HandleFunc("GET /api/status", s.auth(RoleRead, false, s.status))
	m.HandleFunc("GET /api/config", s.auth(RoleRead, false, s.getConfig))
	m.HandleFunc("POST /api/config", s.auth(RoleAdmin, true, s.postConfig))
	m.HandleFunc("GET /api/test", s.auth(RoleRead, false, s.getTest))
	m.HandleFunc("POST /api/test", s.auth(RoleAdmin, true, s.postTest))
	m.HandleFunc("GET /api/test/plot.svg", s.auth(RoleRead, false, s.testPlot))
	m.HandleFunc("GET /api/tune", s.auth(RoleRead, false, s.getTune))
	m.HandleFunc("POST /api/tune", s.auth(RoleAdmin, true, s.postTune))
	m.HandleFunc("POST /api/tune/save", s.auth(RoleAdmin, true, s.postTuneSave))
	m.HandleFunc("GET /api/tune/plot.svg", s.auth(RoleRead, false, s.tunePlot))
	if s.Metrics != nil {
		m.Handle("GET /metrics", s.Metrics)
	}
	s.mux = m
}

type ctxKey struct{}

// auth wraps an API handler: a valid session with at least role, and for
// changes (csrf) the session's token and a JSON body.
func (s *Server) auth(need Role, csrf bool, next func(httpd.ResponseWriter, *httpd.Request, *session)) httpd.HandlerFunc {
	return func(w httpd.ResponseWriter, r *httpd.Request) {
		id, ok := r.Cookie(cookieName)
		var ses *session
		if ok {
			ses = s.sessions.get(id)
		}
		if ses == nil {
			jsonError(w, httpd.StatusUnauthorized, "not logged in")
			return
		}
		if csrf {
			if !jsonBody(r) {
				jsonError(w, httpd.StatusUnsupportedMediaType, "changes take a JSON body (Content-Type: application/json)")
				return
			}
			tok := r.Header.Get(csrfHeader)
			if tok == "" || subtle.ConstantTimeCompare([]byte(tok), []byte(ses.csrf)) != 1 {
				jsonError(w, httpd.StatusForbidden, "missing or wrong CSRF token ("+csrfHeader+" header)")
				return
			}
		}
		if need == RoleAdmin && ses.role != RoleAdmin {
			jsonError(w, httpd.StatusForbidden, "this login is read-only")
			return
		}
		next(w, r, ses)
	}
}

func jsonBody(r *httpd.Request) bool {
	ct := r.Header.Get("Content-Type")
	if i := strings.IndexByte(ct, ';'); i >= 0 {
		ct = ct[:i]
	}
	return strings.EqualFold(strings.TrimSpace(ct), "application/json")
}

func writeJSON(w httpd.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(v)
}

func jsonError(w httpd.ResponseWriter, code int, msg string) {
	writeJSON(w, code, map[string]string{"error": msg})
}

// readJSON decodes a small JSON body strictly: unknown fields are errors,
// so a misspelt field is not silently ignored.
func readJSON(w httpd.ResponseWriter, r *httpd.Request, v any) bool {
	dec := json.NewDecoder(&capReader{r: r.Body, left: maxBody})
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		jsonError(w, httpd.StatusBadRequest, "bad request body: "+err.Error())
		return false
	}
	return true
}

// maxBody is the largest JSON body the API reads: the server refuses
// larger ones with 413 before a handler runs, and readJSON holds to it
// for requests that come another way (tests).
const maxBody = 64 << 10

// capReader ends a body at maxBody with an error saying so.
type capReader struct {
	r    io.Reader
	left int64
}

func (c *capReader) Read(p []byte) (int, error) {
	if c.left <= 0 {
		var one [1]byte
		if n, _ := c.r.Read(one[:]); n > 0 {
			return 0, fmt.Errorf("body over %d bytes", maxBody)
		}
		return 0, io.EOF
	}
	if int64(len(p)) > c.left {
		p = p[:c.left]
	}
	n, err := c.r.Read(p)
	c.left -= int64(n)
	return n, err
}

type sessionReply struct {
	Role Role   `json:"role"`
	CSRF string `json:"csrf"`
}

func (s *Server) login(w httpd.ResponseWriter, r *httpd.Request) {
	if !jsonBody(r) {
		jsonError(w, httpd.StatusUnsupportedMediaType, "log in with a JSON body (Content-Type: application/json)")
		return
	}
	var req struct {
		Password string `json:"password"`
	}
	if !readJSON(w, r, &req) {
		return
	}
	key := remoteKey(r.RemoteAddr)
	if ok, wait, why := s.throttle.begin(key); !ok {
		secs := max(1, int((wait+time.Second-1)/time.Second))
		w.Header().Set("Retry-After", strconv.Itoa(secs))
		jsonError(w, httpd.StatusTooManyRequests, fmt.Sprintf("%s: try again in %d s", why, secs))
		return
	}
	role, ok := Role(""), false
	func() {
		defer func() { s.throttle.end(key, ok) }()
		role, ok = s.check(req.Password)
	}()
	if !ok {
		jsonError(w, httpd.StatusUnauthorized, "wrong password or token")
		return
	}
	id, ses := s.sessions.create(role)
	httpd.SetCookie(w, sessionCookie(r, id))
	s.log().Info("web login", "remote", r.RemoteAddr, "role", string(role))
	writeJSON(w, httpd.StatusOK, sessionReply{role, ses.csrf})
}

func (s *Server) logout(w httpd.ResponseWriter, r *httpd.Request, _ *session) {
	if id, ok := r.Cookie(cookieName); ok {
		s.sessions.drop(id)
	}
	c := sessionCookie(r, "")
	c.MaxAge = -1
	httpd.SetCookie(w, c)
	writeJSON(w, httpd.StatusOK, map[string]bool{"ok": true})
}

// sessionCookie carries a session id; login and logout set it with the
// same attributes, so a browser replaces the one it has (over HTTPS it is
// Secure both times).
func sessionCookie(r *httpd.Request, id string) *httpd.Cookie {
	return &httpd.Cookie{
		Name: cookieName, Value: id, Path: "/", HttpOnly: true,
		SameSite: httpd.SameSiteStrict, Secure: r.Secure,
	}
}

func (s *Server) sessionInfo(w httpd.ResponseWriter, r *httpd.Request, ses *session) {
	writeJSON(w, httpd.StatusOK, sessionReply{ses.role, ses.csrf})
}

func (s *Server) status(w httpd.ResponseWriter, r *httpd.Request, _ *session) {
	if s.Status == nil {
		jsonError(w, httpd.StatusServiceUnavailable, "no status source")
		return
	}
	v, err := s.Status(r.Context())
	if err != nil {
		jsonError(w, httpd.StatusInternalServerError, err.Error())
		return
	}
	writeJSON(w, httpd.StatusOK, map[string]any{"time": time.Now().UTC(), "status": v})
}

// errorList flattens errors.Join trees.
func errorList(err error) []error {
	if err == nil {
		return nil
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var out []error
		for _, e := range j.Unwrap() {
			out = append(out, errorList(e)...)
		}
		return out
	}
	return []error{err}
}

var errBusy = errors.New("a test is already running")
