//go:build sqm_notls

package web

import (
	"errors"
	"net"
)

// TLSConfig is empty in a build without TLS: nothing can make one, so
// Server.TLS stays nil.
type TLSConfig struct{ _ [0]func() }

// HasTLS says whether this build can serve the page over HTTPS.
const HasTLS = false

// ErrNoTLS is LoadTLS's answer in a build with -tags sqm_notls.
var ErrNoTLS = errors.New("this build of sqm has no TLS (built with -tags sqm_notls: crypto/tls and its certificates cost about 3 MB on a mipsle router, so the router packages leave them out); serve the page over HTTP on the LAN or loopback, or use a build without sqm_notls for --http-cert")

// LoadTLS refuses: see ErrNoTLS.
func LoadTLS(certFile, keyFile string) (*TLSConfig, error) {
	return nil, ErrNoTLS
}

func tlsListener(ln net.Listener, c *TLSConfig) net.Listener {
	panic("web: TLS in a build without it") // TLSConfig cannot be made here
}
