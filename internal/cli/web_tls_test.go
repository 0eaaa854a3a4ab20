//go:build linux && !sqm_noweb && !sqm_notls

package cli

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"flag"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"sqm/internal/web"
)

// TestWebHTTPS: with --http-cert and --http-key (here a DER pair, as
// OpenWrt's px5g may write uhttpd's) the page listens for HTTPS only, a
// client that trusts the certificate gets the page, and the login's
// session cookie is Secure; one flag without the other, or a key of
// another certificate, stops the daemon before it listens.
func TestWebHTTPS(t *testing.T) {
	dir := t.TempDir()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	other, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(7), Subject: pkix.Name{CommonName: "router"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(err)
	kder, _ := x509.MarshalECPrivateKey(key)
	oder, _ := x509.MarshalECPrivateKey(other)
	certFile, keyFile, otherFile := filepath.Join(dir, "uhttpd.crt"), filepath.Join(dir, "uhttpd.key"), filepath.Join(dir, "other.key")
	must(os.WriteFile(certFile, der, 0o644))
	must(os.WriteFile(keyFile, kder, 0o600))
	must(os.WriteFile(otherFile, oder, 0o600))
	h, err := web.HashPassword("https-test")
	must(err)
	usersFile := filepath.Join(dir, "users")
	must(os.WriteFile(usersFile, []byte("admin "+h+"\n"), 0o600))
	env := &Env{Stdout: io.Discard, Stderr: io.Discard, Getenv: func(string) string { return "" }}
	// --http takes no port 0: borrow a free port from the kernel.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	must(err)
	listen := l.Addr().String()
	l.Close()
	prepare := func(args ...string) (*webPage, error) {
		fs := flag.NewFlagSet("daemon", flag.ContinueOnError)
		webFlags(fs)
		must(fs.Parse(append([]string{"--http", listen, "--http-users", usersFile}, args...)))
		return prepareWeb(env, fs, filepath.Join(dir, "no-config"))
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--http-cert", certFile}, "--http-cert and --http-key go together"},
		{[]string{"--http-key", keyFile}, "--http-cert and --http-key go together"},
		{[]string{"--http-cert", certFile, "--http-key", otherFile}, "the key does not belong to the certificate"},
		{[]string{"--http-cert", certFile, "--http-key", filepath.Join(dir, "missing")}, "no such file"},
	} {
		if p, err := prepare(c.args...); err == nil || !strings.Contains(err.Error(), c.want) {
			if p != nil {
				p.close()
			}
			t.Errorf("%v: %v; want %q", c.args, err, c.want)
		}
	}

	p, err := prepare("--http-cert", certFile, "--http-key", keyFile)
	must(err)
	users, err := web.LoadUsers(usersFile)
	must(err)
	srv := &web.Server{Users: users, ConfigPath: filepath.Join(dir, "no-config"), TLS: p.tls}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, p.ln) }()
	defer func() { cancel(); <-done }()
	addr := p.ln.Addr().String()

	pool := x509.NewCertPool()
	leaf, err := x509.ParseCertificate(der)
	must(err)
	pool.AddCert(leaf)
	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	res, err := c.Get("https://" + addr + "/")
	must(err)
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Errorf("GET / over HTTPS: %s", res.Status)
	}
	res, err = c.Post("https://"+addr+"/api/login", "application/json", strings.NewReader(`{"password":"https-test"}`))
	must(err)
	var login struct {
		CSRF string `json:"csrf"`
	}
	must(json.NewDecoder(res.Body).Decode(&login))
	res.Body.Close()
	if ck := res.Header.Get("Set-Cookie"); res.StatusCode != http.StatusOK || !strings.Contains(ck, "Secure") || !strings.Contains(ck, "HttpOnly") {
		t.Errorf("login over HTTPS: %s, cookie %q; want 200 and a Secure, HttpOnly cookie", res.Status, ck)
	}
	// Logout expires the cookie with the same attributes.
	req, err := http.NewRequest("POST", "https://"+addr+"/api/logout", strings.NewReader("{}"))
	must(err)
	req.Header.Set("Content-Type", "application/json")
	for _, ck := range res.Cookies() {
		req.AddCookie(ck)
	}
	req.Header.Set("X-CSRF-Token", login.CSRF)
	res, err = c.Do(req)
	must(err)
	res.Body.Close()
	if ck := res.Header.Get("Set-Cookie"); res.StatusCode != http.StatusOK || !strings.Contains(ck, "Max-Age=0") || !strings.Contains(ck, "Secure") {
		t.Errorf("logout over HTTPS: %s, cookie %q; want 200 and a Secure cookie expired", res.Status, ck)
	}
	// Plain HTTP to the same port gets no page.
	if res, err := (&http.Client{Timeout: 10 * time.Second}).Get("http://" + addr + "/"); err == nil {
		res.Body.Close()
		if res.StatusCode == http.StatusOK {
			t.Error("plain HTTP got the page")
		}
	}
}
