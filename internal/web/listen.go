package web

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"time"
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

// Serve runs the page on ln until ctx is done.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	s.ctx = ctx
	srv := &http.Server{
		Handler:           s,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    16 << 10,
		BaseContext:       func(net.Listener) context.Context { return ctx },
		// The server's own complaints (a LAN scanner's broken TLS
		// handshake, a client gone mid-request) are no daemon errors.
		ErrorLog: slog.NewLogLogger(s.log().Handler(), slog.LevelDebug),
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
	err := srv.Serve(ln)
	close(done)
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}
