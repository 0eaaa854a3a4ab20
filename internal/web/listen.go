package web

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"sync"
	"time"

	"sqm/internal/logger"
)

// ResolveListen turns --http's ADDR into host:port. A bare port or ":PORT"
// means loopback: the page is opt-in, and reaching it from the LAN is a
// second, explicit choice (naming the LAN address).
func ResolveListen(addr string) (string, error) {
	if addr == "" {
		return "", errors.New("empty address; use PORT, HOST:PORT or [IPv6]:PORT")
	}
	if _, err := netip.ParseAddr(addr); err == nil {
		return "", fmt.Errorf("%q has no port; use %s:PORT", addr, addr)
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		host, port = "", addr // "8080"
	}
	// A number only: a service name would depend on /etc/services, which
	// minimal systems (a fresh Debian root, many router images) lack, so
	// the same config would listen on one box and fail on another.
	if n, err := strconv.ParseUint(port, 10, 16); err != nil || n == 0 {
		return "", fmt.Errorf("%q: port %q is not a port number 1-65535", addr, port)
	}
	if host == "" {
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, port), nil
}

// CheckListen refuses addresses that would expose the page on the WAN:
// the wildcard addresses (they include the WAN's), and any address of the
// given interfaces (the ones sqm shapes, which face the internet). addrsOf
// returns an interface's addresses (net.InterfaceByName(...).Addrs in the
// daemon). A host name is refused too: what it resolves to can change.
func CheckListen(hostport string, wan []string, addrsOf func(iface string) ([]netip.Addr, error)) error {
	host, _, err := net.SplitHostPort(hostport)
	if err != nil {
		return err
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		if host == "localhost" {
			return nil
		}
		return fmt.Errorf("%q: give an IP address (a LAN address or 127.0.0.1), not a host name", host)
	}
	ip = ip.Unmap()
	if ip.IsUnspecified() {
		return fmt.Errorf("%s would listen on every address, the WAN's included; name a LAN address or 127.0.0.1", host)
	}
	for _, iface := range wan {
		addrs, err := addrsOf(iface)
		if err != nil {
			continue // not there (yet): nothing of it to collide with
		}
		for _, a := range addrs {
			if a.Unmap() == ip.WithZone("") || a.Unmap().WithZone("") == ip.WithZone("") {
				return fmt.Errorf("%s is an address of %s, which sqm shapes (the WAN side); the page must not face the internet: name a LAN address or 127.0.0.1", host, iface)
			}
		}
	}
	return nil
}

// limits bound what one client, and all of them together, can hold of the
// daemon that keeps the WAN shaped. Each connection costs a goroutine and
// a few KiB of buffers; a LAN host that opens thousands and sends nothing,
// or sends headers and then stalls the body, must not pile them up.
type limits struct {
	// readHeader bounds the time from a connection's first byte (or a
	// TLS handshake) to the end of a request's headers; read, to the end
	// of its body (bodies are at most 64 KiB of JSON); write, the time
	// to answer it; idle, a kept-alive connection's wait for its next
	// request.
	readHeader, read, write, idle time.Duration
	// maxConns and maxPerClient cap the connections held (clientKey:
	// IPv6 counts by /64); a browser opens about six per host.
	maxConns, maxPerClient int
	maxHeaderBytes         int
}

var defaultLimits = limits{
	readHeader: 10 * time.Second, read: 20 * time.Second,
	// A config change waits for the daemon to apply it (its lock wait is
	// 10 s); tests and tunes answer at once and run on.
	write: time.Minute, idle: time.Minute,
	maxConns: 128, maxPerClient: 16, maxHeaderBytes: 8 << 10,
}

func (l limits) orDefaults() limits {
	d := defaultLimits
	pick := func(v *time.Duration, def time.Duration) {
		if *v == 0 {
			*v = def
		}
	}
	pick(&l.readHeader, d.readHeader)
	pick(&l.read, d.read)
	pick(&l.write, d.write)
	pick(&l.idle, d.idle)
	if l.maxConns == 0 {
		l.maxConns = d.maxConns
	}
	if l.maxPerClient == 0 {
		l.maxPerClient = d.maxPerClient
	}
	if l.maxHeaderBytes == 0 {
		l.maxHeaderBytes = d.maxHeaderBytes
	}
	return l
}

// Serve runs the page on ln until ctx is done. ln is a plain TCP
// listener: Serve caps its connections (limitListener) below TLS, so a
// connection over the caps costs no handshake.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	s.listen = ln.Addr().String()
	s.once.Do(s.init)
	s.ctx = ctx
	lim := s.limits
	ll := newLimitListener(ln, lim.maxConns, lim.maxPerClient)
	ll.refused = s.refusedLog()
	if s.WANPeer != nil {
		ll.peer = func(a netip.Addr) string {
			if dev := s.WANPeer(a); dev != "" {
				return "client reached through " + dev + ", which sqm shapes (the WAN side)"
			}
			return ""
		}
	}
	s.conns.Store(ll)
	var inner net.Listener = ll
	if s.TLS != nil {
		inner = tls.NewListener(ll, s.TLS)
	}
	srv := &http.Server{
		Handler:           s,
		ReadHeaderTimeout: lim.readHeader,
		ReadTimeout:       lim.read,
		WriteTimeout:      lim.write,
		IdleTimeout:       lim.idle,
		MaxHeaderBytes:    lim.maxHeaderBytes,
		BaseContext:       func(net.Listener) context.Context { return ctx },
		// HTTP/1.1 only: HTTP/2 would let one connection hold 100 or
		// more streams, each with its own goroutine and buffers.
		TLSNextProto: map[string]func(*http.Server, *tls.Conn, http.Handler){},
		// The server's own complaints (a LAN scanner's broken TLS
		// handshake, a client gone mid-request) are no daemon errors.
		ErrorLog: log.New(s.log().Writer(logger.LevelDebug), "", 0),
	}
	done := make(chan struct{})
	go func() {
		select {
		case <-ctx.Done():
			sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			srv.Shutdown(sctx)
			cancel()
		case <-done:
		}
	}()
	err := srv.Serve(inner)
	close(done)
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// refusedLog logs connections closed at the caps: the first of each
// minute, with how many the minute before had, so a flood is one line a
// minute.
func (s *Server) refusedLog() func(netip.Prefix, string) {
	var mu sync.Mutex
	var at time.Time
	n := 0
	return func(key netip.Prefix, why string) {
		mu.Lock()
		defer mu.Unlock()
		n++
		if now := s.clock(); at.IsZero() || now.Sub(at) >= logEvery {
			s.log().Warn("web: connections refused", "client", key.String(), "why", why, "refused", n, "note", "at most one line a minute")
			at, n = now, 0
		}
	}
}
