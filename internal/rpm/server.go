package rpm

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"
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

// largeSize is the size the large object announces: the draft asks for at
// least 8 GB so that no client finishes it within a test.
const largeSize int64 = 8 << 30

// ServerOptions configures Serve.
type ServerOptions struct {
	// Cert is the TLS certificate; nil generates a self-signed one.
	Cert *tls.Certificate
	// MaxDuration ends any single download or upload after this long
	// (default 60 s), so one client cannot keep the link loaded for hours.
	MaxDuration time.Duration
	// PerAddr and Total bound concurrent connections per client address
	// and overall (defaults 64 and 512): a test needs up to 2*MNP load
	// connections plus its foreign probes in flight.
	PerAddr, Total int
	Logf           func(format string, a ...any)
}

// Handler serves the draft's four endpoints plus Apple's config path.
func Handler(maxDuration time.Duration) http.Handler {
	if maxDuration <= 0 {
		maxDuration = 60 * time.Second
	}
	mux := http.NewServeMux()
	config := func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			http.Error(w, "GET only", http.StatusMethodNotAllowed)
			return
		}
		base := "https://" + r.Host
		if r.TLS == nil {
			base = "http://" + r.Host
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
	mux.HandleFunc(WellKnownPath, config)
	mux.HandleFunc(PathConfig, config)
	mux.HandleFunc(PathSmall, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Header().Set("Content-Length", "1")
		w.Write([]byte{'x'})
	})
	mux.HandleFunc(PathLarge, func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet {
			http.Error(w, "GET only", http.StatusMethodNotAllowed)
			return
		}
		rc := http.NewResponseController(w)
		rc.SetWriteDeadline(time.Now().Add(maxDuration))
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Header().Set("Content-Length", fmt.Sprint(largeSize))
		buf := make([]byte, largeChunk)
		for sent := int64(0); sent < largeSize; sent += int64(len(buf)) {
			if _, err := w.Write(buf); err != nil {
				return // the client went away or the time cap hit
			}
		}
	})
	mux.HandleFunc(PathUpload, func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost && r.Method != http.MethodPut {
			http.Error(w, "POST only", http.StatusMethodNotAllowed)
			return
		}
		rc := http.NewResponseController(w)
		rc.SetReadDeadline(time.Now().Add(maxDuration))
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/octet-stream")
		w.WriteHeader(http.StatusOK)
	})
	return mux
}

// Serve answers responsiveness clients on ln with HTTP/2 over TLS until
// ctx ends.
func Serve(ctx context.Context, ln net.Listener, o ServerOptions) error {
	if o.Logf == nil {
		o.Logf = func(string, ...any) {}
	}
	if o.PerAddr <= 0 {
		o.PerAddr = 64
	}
	if o.Total <= 0 {
		o.Total = 512
	}
	cert := o.Cert
	if cert == nil {
		c, err := SelfSigned()
		if err != nil {
			return err
		}
		cert = &c
	}
	srv := &http.Server{
		Handler:           Handler(o.MaxDuration),
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       60 * time.Second,
		MaxHeaderBytes:    16 << 10,
		TLSConfig:         &tls.Config{Certificates: []tls.Certificate{*cert}, MinVersion: tls.VersionTLS12, NextProtos: []string{"h2"}},
		HTTP2:             &http.HTTP2Config{MaxConcurrentStreams: 100},
		// Handshake failures from scanners and from probes a client
		// abandons at the end of its test are routine; logging each one
		// would let any stranger flood the log.
		ErrorLog: log.New(io.Discard, "", 0),
	}
	srv.Protocols = new(http.Protocols)
	srv.Protocols.SetHTTP2(true)
	lim := &limitListener{Listener: ln, perAddr: o.PerAddr, total: o.Total, count: map[string]int{}, logf: o.Logf}
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
	err := srv.ServeTLS(lim, "", "")
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

// limitListener refuses connections beyond a per-address and a total
// count, closing them at once: one client must not be able to hold every
// slot (the server is meant to face strangers).
type limitListener struct {
	net.Listener
	perAddr, total int
	mu             sync.Mutex
	count          map[string]int
	n              int
	lastLog        time.Time
	logf           func(string, ...any)
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
		host, _, _ := net.SplitHostPort(c.RemoteAddr().String())
		l.mu.Lock()
		if l.count[host] >= l.perAddr || l.n >= l.total {
			if time.Since(l.lastLog) > 10*time.Second {
				l.lastLog = time.Now()
				l.logf("sqm server: rpm: refusing connections from %s (%d open from it, %d in all)", host, l.count[host], l.n)
			}
			l.mu.Unlock()
			c.Close()
			continue
		}
		l.count[host]++
		l.n++
		l.mu.Unlock()
		return &countedConn{Conn: c, l: l, host: host}, nil
	}
}

type countedConn struct {
	net.Conn
	l    *limitListener
	host string
	once sync.Once
}

func (c *countedConn) Close() error {
	c.once.Do(func() {
		c.l.mu.Lock()
		c.l.n--
		if c.l.count[c.host]--; c.l.count[c.host] <= 0 {
			delete(c.l.count, c.host)
		}
		c.l.mu.Unlock()
	})
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
