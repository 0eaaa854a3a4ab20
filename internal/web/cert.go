//go:build !sqm_notls

package web

import (
	"crypto"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
)

// LoadCert reads the page's certificate and key for HTTPS. Both PEM and
// DER files are taken: OpenWrt's uhttpd keeps its self-signed pair in
// /etc/uhttpd.crt and /etc/uhttpd.key, written by px5g in either form
// depending on the release, and the page can share it.
func LoadCert(certFile, keyFile string) (tls.Certificate, error) {
	c, err := os.ReadFile(certFile)
	if err != nil {
		return tls.Certificate{}, err
	}
	k, err := os.ReadFile(keyFile)
	if err != nil {
		return tls.Certificate{}, err
	}
	cert, err := ParseKeyPair(c, k)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("%s and %s: %w", certFile, keyFile, err)
	}
	return cert, nil
}

// ParseKeyPair is LoadCert's parser: PEM (any number of certificates,
// the server's first) or one DER certificate, and a PEM or DER key in
// PKCS #8, SEC 1 (EC) or PKCS #1 (RSA) form, which must belong to the
// certificate.
func ParseKeyPair(certData, keyData []byte) (tls.Certificate, error) {
	if cert, err := tls.X509KeyPair(certData, keyData); err == nil {
		return cert, nil
	}
	var chain [][]byte
	for rest := certData; ; {
		var b *pem.Block
		if b, rest = pem.Decode(rest); b == nil {
			break
		}
		if b.Type == "CERTIFICATE" {
			chain = append(chain, b.Bytes)
		}
	}
	if len(chain) == 0 {
		chain = [][]byte{certData} // DER
	}
	leaf, err := x509.ParseCertificate(chain[0])
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("certificate: neither PEM nor DER: %v", err)
	}
	keyDER := keyData
	if b, _ := pem.Decode(keyData); b != nil {
		keyDER = b.Bytes
	}
	key, err := parseKey(keyDER)
	if err != nil {
		return tls.Certificate{}, err
	}
	pub, ok := key.(interface{ Public() crypto.PublicKey })
	if !ok {
		return tls.Certificate{}, errors.New("key: not a signing key")
	}
	if eq, ok := pub.Public().(interface{ Equal(crypto.PublicKey) bool }); !ok || !eq.Equal(leaf.PublicKey) {
		return tls.Certificate{}, errors.New("the key does not belong to the certificate")
	}
	return tls.Certificate{Certificate: chain, PrivateKey: key, Leaf: leaf}, nil
}

func parseKey(der []byte) (crypto.PrivateKey, error) {
	if k, err := x509.ParsePKCS8PrivateKey(der); err == nil {
		return k, nil
	}
	if k, err := x509.ParseECPrivateKey(der); err == nil {
		return k, nil
	}
	if k, err := x509.ParsePKCS1PrivateKey(der); err == nil {
		return k, nil
	}
	return nil, errors.New("key: not a PKCS #8, EC or RSA private key in PEM or DER")
}
