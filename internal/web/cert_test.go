//go:build !sqm_notls

package web

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"strings"
	"testing"
	"time"
)

// selfSigned makes a certificate for key, returned as DER.
func selfSigned(t testing.TB, key crypto.Signer) []byte {
	t.Helper()
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "router.lan"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		DNSNames: []string{"router.lan"},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		t.Fatal(err)
	}
	return der
}

func pemOf(typ string, der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
}

// TestParseKeyPair: PEM and DER certificates with PKCS #8, SEC 1 and
// PKCS #1 keys in either form (uhttpd's pair is one of these), and the
// errors for a key of another certificate and for files of neither form.
func TestParseKeyPair(t *testing.T) {
	ec, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	other, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	rk, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	ecCert, rsaCert := selfSigned(t, ec), selfSigned(t, rk)
	ecSEC1, _ := x509.MarshalECPrivateKey(ec)
	ecPKCS8, _ := x509.MarshalPKCS8PrivateKey(ec)
	otherSEC1, _ := x509.MarshalECPrivateKey(other)
	rsaPKCS1 := x509.MarshalPKCS1PrivateKey(rk)
	for _, c := range []struct {
		name      string
		cert, key []byte
		err       string
	}{
		{"PEM, EC", pemOf("CERTIFICATE", ecCert), pemOf("EC PRIVATE KEY", ecSEC1), ""},
		{"DER, EC SEC 1", ecCert, ecSEC1, ""},
		{"DER, EC PKCS #8", ecCert, ecPKCS8, ""},
		{"DER certificate, PEM key", ecCert, pemOf("PRIVATE KEY", ecPKCS8), ""},
		{"PEM, RSA", pemOf("CERTIFICATE", rsaCert), pemOf("RSA PRIVATE KEY", rsaPKCS1), ""},
		{"DER, RSA PKCS #1", rsaCert, rsaPKCS1, ""},
		{"another key", ecCert, otherSEC1, "does not belong"},
		{"another key, PEM", pemOf("CERTIFICATE", ecCert), pemOf("EC PRIVATE KEY", otherSEC1), "does not belong"},
		{"not a certificate", []byte("hello"), ecSEC1, "neither PEM nor DER"},
		{"not a key", ecCert, []byte("hello"), "not a PKCS #8, EC or RSA private key"},
	} {
		t.Run(c.name, func(t *testing.T) {
			cert, err := ParseKeyPair(c.cert, c.key)
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("error %v, want %q", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(cert.Certificate) != 1 || cert.PrivateKey == nil {
				t.Errorf("chain of %d, key %T", len(cert.Certificate), cert.PrivateKey)
			}
		})
	}
}

func FuzzParseKeyPair(f *testing.F) {
	ec, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	der := selfSigned(f, ec)
	sec1, _ := x509.MarshalECPrivateKey(ec)
	f.Add(der, sec1)
	f.Add(pemOf("CERTIFICATE", der), pemOf("EC PRIVATE KEY", sec1))
	f.Add([]byte("-----BEGIN CERTIFICATE-----\n"), []byte{})
	f.Fuzz(func(t *testing.T, c, k []byte) {
		cert, err := ParseKeyPair(c, k)
		if err == nil && (len(cert.Certificate) == 0 || cert.PrivateKey == nil) {
			t.Errorf("accepted without a certificate or key")
		}
	})
}
