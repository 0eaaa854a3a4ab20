//go:build !sqm_notls

package web

import (
	"crypto/tls"
	"net"
)

// TLSConfig is the page's HTTPS setup (LoadTLS).
type TLSConfig = tls.Config

// HasTLS says whether this build can serve the page over HTTPS.
const HasTLS = true

// LoadTLS reads the certificate and key (LoadCert) into the page's TLS
// setup: TLS 1.2 or later, HTTP/1.1 only (the page's server speaks no
// HTTP/2, whose streams would let one connection hold a hundred requests).
func LoadTLS(certFile, keyFile string) (*TLSConfig, error) {
	cert, err := LoadCert(certFile, keyFile)
	if err != nil {
		return nil, err
	}
	return &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12, NextProtos: []string{"http/1.1"}}, nil
}

// tlsListener wraps the capped listener: the handshake happens on a
// connection's first read, inside the server's read-header timeout.
func tlsListener(ln net.Listener, c *TLSConfig) net.Listener {
	return tls.NewListener(ln, c)
}
