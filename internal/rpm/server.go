package rpm

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"net/netip"
	"os"
	"strings"
	"sync"
	"time"

	"sqm/internal/json"
	"sqm/internal/peerkey"
)

// Paths the server answers. They are Apple's (networkQuality's servers
// publish the same layout), so a client configured by hand for those works
// here too.
const (
	PathConfig = "/api/v1/config"
	PathSmall  = "/api/v1/small"
	PathLarge  = "/api/v1/large"
	PathUpload = "/api/v1/upload"
)

// largeChunk is the size of each write of the large object. Go's HTTP/2
// server makes DATA frames of up to 16 KB from each write, and a self
// probe's response waits behind the frame being written: 4 KB writes
// halved that wait on a 10 Mbit/s link, but on a loaded 2-core machine
// they also left the download less steady and the namespace test's
// handshakes further from ping (docs/rpm.md, "Where a probe's time
// goes"), so the writes stay at 64 KB until that is understood.
const largeChunk = 64 << 10

// zeroChunk is what every large response sends. One read-only buffer serves
// all streams: HTTP/2 keeps a reference to what a handler wrote until the
// peer's window lets it out, so a buffer per stream (64 KB each) is what a
// client that never opens its window would make the server hold.
var zeroChunk = make([]byte, largeChunk)

// largeSize is the size the large object announces: the draft asks for at
// least 8 GB so that no client finishes it within a test.
const largeSize int64 = 8 << 30

// Defaults of ServerOptions' limits.
const (
	// goresponsiveness has a foreign probe on a new connection in flight
	// up to 100 times a second, each taking three to four round trips:
	// on a bloated link with a 0.5 s round trip that is 150-200
	// connections still in their first request, besides its load
	// connections.
	defaultPerAddr     = 256
	defaultTotal       = 1024
	defaultLoadPerAddr = 4 * MNP // both directions at once, twice over
	defaultLoadTotal   = 256
	defaultStall       = 10 * time.Second
	// A test from one address has its load streams, a self probe or two
	// on each and its foreign probes in flight at once: 2*MNP + 2*2*MNP
	// + what a second of probing at the usual 100 probes/s leaves
	// waiting on a bloated link.
	defaultStreamsPerAddr = 256
	defaultStreamsTotal   = 2048
	// maxStreams is what each connection may have open at once: the
	// usual 100. A load connection carries its transfer and the self
	// probes in flight on it, and goresponsiveness (strict about the
	// server's limit) opens a new connection for a self probe past it,
	// then aborts on finding its probe did not reuse the load
	// connection. What a client can park is bounded per address by
	// StreamsPerAddr instead.
	maxStreams = 100
	// shortTimeout bounds everything but a transfer: the configuration
	// and the small object are a few hundred bytes.
	shortTimeout = 15 * time.Second
)

// ServerOptions configures Serve.
type ServerOptions struct {
	// Cert is the TLS certificate; nil generates a self-signed one.
	Cert *tls.Certificate
	// MaxDuration ends any single download or upload after this long
	// (default 60 s), so one client cannot keep the link loaded for hours.
	MaxDuration time.Duration
	// Secret, when set, puts every endpoint under the path prefix
	// "/"+PathToken(Secret), the configuration document's URLs included;
	// anything else is a bodiless 404. A path is what every
	// responsiveness client can be given (goresponsiveness --path or
	// --url, networkQuality -C), where a header or a client certificate
	// would need a client of our own.
	Secret string
	// PerAddr and Total bound open connections per client address (IPv6:
	// per /64, see peerkey) and overall (defaults 256 and 1024). A
	// connection past either takes the place of the one of that address
	// (or, for Total, of any) that has been idle longest, and is refused
	// only when none is idle: goresponsiveness opens a fresh connection
	// for every foreign probe and leaves it open, so refusing at the count
	// would starve its load connections of slots.
	PerAddr, Total int
	// LoadPerAddr and LoadTotal bound concurrent transfers (large object
	// and upload streams), which are what costs the server memory and the
	// link its capacity (defaults 64 and 256). Past them a transfer gets
	// 503 at once.
	LoadPerAddr, LoadTotal int
	// StreamsPerAddr and StreamsTotal bound requests in progress of any
	// kind (defaults 256 and 2048), transfers included: each holds a
	// goroutine and its response until the peer's window takes it. Past
	// them a request gets 503 at once.
	StreamsPerAddr, StreamsTotal int
	// Stall ends a transfer that moved nothing for this long (default
	// 10 s): a client that never opens its flow-control window must not
	// hold a stream, a goroutine and queued data until MaxDuration.
	Stall time.Duration
	Logf  func(format string, a ...any)
}

func (o *ServerOptions) defaults() {
	if o.Logf == nil {
		o.Logf = func(string, ...any) {}
	}
	if o.MaxDuration <= 0 {
		o.MaxDuration = 60 * time.Second
	}
	if o.PerAddr <= 0 {
		o.PerAddr = defaultPerAddr
	}
	if o.Total <= 0 {
		o.Total = defaultTotal
	}
	if o.LoadPerAddr <= 0 {
		o.LoadPerAddr = defaultLoadPerAddr
	}
	if o.LoadTotal <= 0 {
		o.LoadTotal = defaultLoadTotal
	}
	if o.StreamsPerAddr <= 0 {
		o.StreamsPerAddr = defaultStreamsPerAddr
	}
	if o.StreamsTotal <= 0 {
		o.StreamsTotal = defaultStreamsTotal
	}
	if o.Stall <= 0 {
		o.Stall = defaultStall
	}
}

// PathToken is the path segment a secret puts the RPM endpoints under: a
// keyed hash of it, so the path (which a client shows in its output and a
// server admin hands out) does not reveal the secret the bufferbloat
// protocol authenticates with.
func PathToken(secret string) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte("sqm rpm path prefix v1"))
	return hex.EncodeToString(m.Sum(nil)[:16])
}

// PathPrefix is "/"+PathToken(secret), or "" without a secret.
func PathPrefix(secret string) string {
	if secret == "" {
		return ""
	}
	return "/" + PathToken(secret)
}

// handler serves the draft's endpoints under the secret's prefix.
type handler struct {
	o       ServerOptions
	token   string   // "" without a secret
	streams *counter // requests in progress
	load    *counter // transfers in progress
}

// Handler serves the draft's four endpoints plus Apple's config path,
// under PathPrefix(o.Secret), with o's transfer limits.
func Handler(o ServerOptions) http.Handler {
	o.defaults()
	h := &handler{o: o, load: newCounter(o.LoadPerAddr, o.LoadTotal), streams: newCounter(o.StreamsPerAddr, o.StreamsTotal)}
	if o.Secret != "" {
		h.token = PathToken(o.Secret)
	}
	return h
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	key := peerkey.OfAddrPort(r.RemoteAddr)
	if !h.streams.acquire(key) {
		refuse(w)
		return
	}
	defer h.streams.release(key)
	h.serve(w, r, key)
	// The response's last bytes go out while the slot is held: net/http
	// would otherwise write them after the handler returned, and a peer
	// that keeps its window shut would park a goroutine per stream
	// outside any count (until the write deadline).
	http.NewResponseController(w).Flush()
}

// refuse answers 503 with headers only: they are not flow-controlled, so
// a refusal cannot itself be parked by a peer that never reads.
func refuse(w http.ResponseWriter) {
	w.Header().Set("Retry-After", "10")
	w.WriteHeader(http.StatusServiceUnavailable)
}

func (h *handler) serve(w http.ResponseWriter, r *http.Request, key netip.Prefix) {
	p := r.URL.Path
	prefix := ""
	if h.token != "" {
		seg, rest, _ := strings.Cut(strings.TrimPrefix(p, "/"), "/")
		if subtle.ConstantTimeCompare([]byte(seg), []byte(h.token)) != 1 {
			// Nothing a stranger could learn from: no body, no hint.
			w.WriteHeader(http.StatusNotFound)
			return
		}
		prefix, p = "/"+seg, "/"+rest
	}
	if p != PathUpload && r.ContentLength != 0 {
		// A body on a GET would sit in the server's receive window
		// for as long as the handler runs.
		http.Error(w, "no request body here", http.StatusBadRequest)
		return
	}
	switch p {
	case WellKnownPath, PathConfig:
		h.config(w, r, prefix)
	case PathSmall:
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Header().Set("Content-Length", "1")
		w.Write([]byte{'x'})
	case PathLarge:
		if r.Method != http.MethodGet {
			http.Error(w, "GET only", http.StatusMethodNotAllowed)
			return
		}
		h.transfer(w, r, key, h.large)
	case PathUpload:
		if r.Method != http.MethodPost && r.Method != http.MethodPut {
			http.Error(w, "POST only", http.StatusMethodNotAllowed)
			return
		}
		h.transfer(w, r, key, h.upload)
	default:
		w.WriteHeader(http.StatusNotFound)
	}
}

func (h *handler) config(w http.ResponseWriter, r *http.Request, prefix string) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		http.Error(w, "GET only", http.StatusMethodNotAllowed)
		return
	}
	base := "https://" + r.Host + prefix
	if r.TLS == nil {
		base = "http://" + r.Host + prefix
	}
	// Both the current key names and the older ones, so clients of
	// either generation (networkQuality, goresponsiveness) work.
	doc := map[string]any{
		"version": 1,
		"urls": map[string]string{
			"large_download_url":       base + PathLarge,
			"small_download_url":       base + PathSmall,
			"upload_url":               base + PathUpload,
			"large_https_download_url": base + PathLarge,
			"small_https_download_url": base + PathSmall,
			"https_upload_url":         base + PathUpload,
		},
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(doc)
}

// transfer runs a large download or an upload if the client's address
// and the server have a transfer slot left.
func (h *handler) transfer(w http.ResponseWriter, r *http.Request, key netip.Prefix, run func(http.ResponseWriter, *http.Request, *http.ResponseController)) {
	if !h.load.acquire(key) {
		refuse(w)
		return
	}
	defer h.load.release(key)
	run(w, r, http.NewResponseController(w))
}

// progress moves a transfer's deadline on while data moves: the stall
// limit from the last progress, never past the end of MaxDuration.
// Setting a deadline costs a timer reset, so it is moved at most once a
// second; the stall limit is thus Stall to Stall+1s.
type progress struct {
	set       func(time.Time) error
	end, last time.Time
	stall     time.Duration
}

func (p *progress) moved(now time.Time) {
	if now.Sub(p.last) < time.Second {
		return
	}
	p.last = now
	d := now.Add(p.stall)
	if d.After(p.end) {
		d = p.end
	}
	p.set(d)
}

func (h *handler) large(w http.ResponseWriter, r *http.Request, rc *http.ResponseController) {
	now := time.Now()
	pr := progress{set: rc.SetWriteDeadline, end: now.Add(h.o.MaxDuration), stall: h.o.Stall}
	pr.moved(now)
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Length", fmt.Sprint(largeSize))
	for sent := int64(0); sent < largeSize; sent += largeChunk {
		if _, err := w.Write(zeroChunk); err != nil {
			return // the client went away, stalled, or the time cap hit
		}
		pr.moved(time.Now())
	}
}

// uploadBufs are the upload streams' read buffers, shared so that idle
// or stalled streams hold none.
var uploadBufs = sync.Pool{New: func() any { b := make([]byte, 16<<10); return &b }}

func (h *handler) upload(w http.ResponseWriter, r *http.Request, rc *http.ResponseController) {
	now := time.Now()
	// Both deadlines move: the server's WriteTimeout (for the short
	// answers) would otherwise reset an upload that outlives it, since
	// its response is written only at the end.
	set := func(d time.Time) error {
		rc.SetWriteDeadline(d)
		return rc.SetReadDeadline(d)
	}
	pr := progress{set: set, end: now.Add(h.o.MaxDuration), stall: h.o.Stall}
	pr.moved(now)
	for {
		bp := uploadBufs.Get().(*[]byte)
		_, err := r.Body.Read(*bp)
		uploadBufs.Put(bp)
		if err != nil {
			break
		}
		pr.moved(time.Now())
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.WriteHeader(http.StatusOK)
}

// counter counts concurrent holders per peer key and in total.
type counter struct {
	mu            sync.Mutex
	perKey, total int
	by            map[netip.Prefix]int
	n             int
}

func newCounter(perKey, total int) *counter {
	return &counter{perKey: perKey, total: total, by: map[netip.Prefix]int{}}
}

func (c *counter) acquire(k netip.Prefix) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.by[k] >= c.perKey || c.n >= c.total {
		return false
	}
	c.by[k]++
	c.n++
	return true
}

func (c *counter) release(k netip.Prefix) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n--
	if c.by[k]--; c.by[k] <= 0 {
		delete(c.by, k)
	}
}

// Serve answers responsiveness clients on ln with HTTP/2 over TLS until
// ctx ends.
func Serve(ctx context.Context, ln net.Listener, o ServerOptions) error {
	o.defaults()
	cert := o.Cert
	if cert == nil {
		c, err := SelfSigned()
		if err != nil {
			return err
		}
		cert = &c
	}
	lim := newConnLimit(o.PerAddr, o.Total, o.Logf)
	srv := &http.Server{
		Handler:           Handler(o),
		ReadHeaderTimeout: 10 * time.Second,
		// Per stream in HTTP/2; a transfer moves its own deadlines
		// on as it progresses (see progress).
		ReadTimeout:    shortTimeout,
		WriteTimeout:   shortTimeout,
		IdleTimeout:    60 * time.Second,
		MaxHeaderBytes: 16 << 10,
		TLSConfig:      &tls.Config{Certificates: []tls.Certificate{*cert}, MinVersion: tls.VersionTLS12, NextProtos: []string{"h2"}},
		HTTP2: &http.HTTP2Config{
			MaxConcurrentStreams: maxStreams,
			// The smallest frame HTTP/2 allows, so no peer makes a
			// connection buffer a megabyte per frame.
			MaxReadFrameSize: 16 << 10,
			// What a peer can make a connection buffer unread: the
			// upload handler reads as it arrives, and no other
			// endpoint takes a body, so this bounds memory, not speed
			// (1 MB per stream is 80 Mbit/s at 100 ms per upload
			// connection).
			MaxReceiveBufferPerConnection: 1 << 20,
			MaxReceiveBufferPerStream:     1 << 20,
			// A peer whose TCP window stays shut loses the connection.
			WriteByteTimeout: o.Stall,
		},
		ConnState: lim.state,
		// Handshake failures from scanners and from probes a client
		// abandons at the end of its test are routine; logging each one
		// would let any stranger flood the log.
		ErrorLog: log.New(io.Discard, "", 0),
	}
	srv.Protocols = new(http.Protocols)
	srv.Protocols.SetHTTP2(true)
	done := make(chan struct{})
	go func() {
		select {
		case <-ctx.Done():
			sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			srv.Shutdown(sctx)
			srv.Close()
		case <-done:
		}
	}()
	err := srv.ServeTLS(&limitListener{Listener: ln, lim: lim}, "", "")
	close(done)
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// Listen opens a TCP listener whose connections keep little unsent data
// (see notsentLowat), so the self probes measure the network's queue and
// not this server's socket buffers.
func Listen(ctx context.Context, addr string) (net.Listener, error) {
	lc := net.ListenConfig{Control: lowatControl}
	return lc.Listen(ctx, "tcp", addr)
}

// connLimit keeps the count of open connections per peer key and in
// all, and which of them are idle (no stream open), so that a new
// connection can take an idle one's place.
type connLimit struct {
	perKey, total int
	logf          func(string, ...any)

	mu      sync.Mutex
	by      map[netip.Prefix][]*countedConn
	n       int
	lastLog time.Time
}

func newConnLimit(perKey, total int, logf func(string, ...any)) *connLimit {
	return &connLimit{perKey: perKey, total: total, logf: logf, by: map[netip.Prefix][]*countedConn{}}
}

// admit counts c in under key, closing the longest idle connection of
// the same key (or of any, when the total is reached) to make room. It
// reports false when there is no room and nothing to close.
func (l *connLimit) admit(c *countedConn) bool {
	var evict []*countedConn
	defer func() {
		for _, e := range evict {
			e.Close()
		}
	}()
	l.mu.Lock()
	defer l.mu.Unlock()
	mine := l.by[c.key]
	// Each connection chosen is taken out of the count here, before its
	// Close runs, so two arrivals cannot both count on one eviction.
	if len(mine) >= l.perKey {
		e := oldestIdle(mine)
		if e == nil {
			l.refused(c.key, len(mine))
			return false
		}
		l.remove(e)
		evict = append(evict, e)
	}
	if l.n >= l.total {
		var e *countedConn
		for _, cs := range l.by {
			if o := oldestIdle(cs); o != nil && (e == nil || o.since.Before(e.since)) {
				e = o
			}
		}
		if e == nil {
			l.refused(c.key, len(l.by[c.key]))
			return false
		}
		l.remove(e)
		evict = append(evict, e)
	}
	l.by[c.key] = append(l.by[c.key], c)
	l.n++
	c.since = time.Now()
	c.admitted = c.since
	return true
}

func (l *connLimit) refused(key netip.Prefix, mine int) {
	if time.Since(l.lastLog) > 10*time.Second {
		l.lastLog = time.Now()
		l.logf("sqm server: rpm: refusing connections from %s (%d open from it, none idle, %d in all)", key, mine, l.n)
	}
}

// startGrace is how long a connection that has not yet sent a request is
// left alone: on a bloated uplink the first request of a new load
// connection can queue for a second behind the client's own uploads, and
// a client that connects and says nothing for longer than this gives up
// its place to one that is being used.
const startGrace = 10 * time.Second

// evictable is an idle connection that has served a request (net/http
// reports an HTTP/2 connection idle from its preface on, before its
// first stream), or one that has sent none for startGrace.
func (c *countedConn) evictable(now time.Time) bool {
	return c.idle && (c.actives >= 2 || now.Sub(c.admitted) > startGrace)
}

func oldestIdle(cs []*countedConn) *countedConn {
	var o *countedConn
	now := time.Now()
	for _, c := range cs {
		if c.evictable(now) && (o == nil || c.since.Before(o.since)) {
			o = c
		}
	}
	return o
}

// remove takes c out of the count, once; l.mu is held.
func (l *connLimit) remove(c *countedConn) {
	if c.gone {
		return
	}
	c.gone = true
	cs := l.by[c.key]
	for i, x := range cs {
		if x == c {
			cs = append(cs[:i], cs[i+1:]...)
			break
		}
	}
	if len(cs) == 0 {
		delete(l.by, c.key)
	} else {
		l.by[c.key] = cs
	}
	l.n--
}

// state follows net/http's view of each connection: for HTTP/2 it is
// idle when no stream is open.
func (l *connLimit) state(nc net.Conn, s http.ConnState) {
	if tc, ok := nc.(*tls.Conn); ok {
		nc = tc.NetConn()
	}
	c, ok := nc.(*countedConn)
	if !ok {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	switch s {
	case http.StateIdle, http.StateActive:
		c.idle = s == http.StateIdle
		c.since = time.Now()
		if s == http.StateActive {
			c.actives++ // once at the preface, then at each stream after an idle spell
		}
	case http.StateClosed, http.StateHijacked:
		l.remove(c)
	}
}

// limitListener counts the connections it accepts into a connLimit and
// closes at once those it has no room for (the server is meant to face
// strangers: one client must not be able to hold every slot).
type limitListener struct {
	net.Listener
	lim *connLimit
}

func (l *limitListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				time.Sleep(50 * time.Millisecond)
				continue
			}
			return nil, err
		}
		if tc, ok := c.(*net.TCPConn); ok {
			if rc, err := tc.SyscallConn(); err == nil {
				lowatControl("", "", rc)
			}
		}
		cc := &countedConn{Conn: c, l: l.lim, key: peerkey.OfAddrPort(c.RemoteAddr().String())}
		if !l.lim.admit(cc) {
			c.Close()
			continue
		}
		return cc, nil
	}
}

// countedConn is a connection in a connLimit; its fields other than Conn,
// l and key are guarded by l.mu.
type countedConn struct {
	net.Conn
	l        *connLimit
	key      netip.Prefix
	idle     bool      // no stream open (a fresh connection is not idle: it is in its handshake)
	actives  int       // times it became active; 2 or more once it has had a stream
	since    time.Time // when it was admitted or last changed state
	admitted time.Time
	gone     bool // taken out of the count
}

func (c *countedConn) Close() error {
	c.l.mu.Lock()
	c.l.remove(c)
	c.l.mu.Unlock()
	return c.Conn.Close()
}

// SelfSigned makes an ECDSA P-256 certificate for this host, valid for 30
// days from an hour ago (clock skew), for the names localhost and the
// host name. Clients must then be told to skip verification (--insecure);
// a --cert/--key pair from a CA they trust avoids that.
func SelfSigned() (tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, err
	}
	names := []string{"localhost"}
	if h, err := os.Hostname(); err == nil && h != "" && h != "localhost" {
		names = append(names, h)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return tls.Certificate{}, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: "sqm server (self-signed)"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(30 * 24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:     names,
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return tls.Certificate{}, err
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, nil
}

// Fingerprint is the SHA-256 of a certificate's DER form, in the
// colon-separated hex that browsers and openssl print, so a user can
// compare what a client sees with what the server logged.
func Fingerprint(c *tls.Certificate) string {
	if c == nil || len(c.Certificate) == 0 {
		return ""
	}
	sum := sha256.Sum256(c.Certificate[0])
	var b strings.Builder
	for i, x := range sum {
		if i > 0 {
			b.WriteByte(':')
		}
		fmt.Fprintf(&b, "%02X", x)
	}
	return b.String()
}
