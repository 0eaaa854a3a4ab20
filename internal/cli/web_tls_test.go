//go:build linux && !sqm_noweb

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
	"errors"
	"flag"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/netip"
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

// TestHTTPHosts: --http-hosts (option http_hosts, a list is joined by
// spaces) takes names, comma or space separated; an address or a port is
// refused with the reason.
func TestHTTPHosts(t *testing.T) {
	got, err := httpHosts("router.example.com, gw.lan\tnas-1")
	if err != nil || strings.Join(got, "|") != "router.example.com|gw.lan|nas-1" {
		t.Errorf("names: %q %v", got, err)
	}
	for in, want := range map[string]string{
		"192.168.1.1":     "is an address",
		"[fd00::1]":       "is an address",
		"router.lan:8080": "no port",
		"a/b":             "letters, digits",
	} {
		if _, err := httpHosts(in); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v; want %q", in, err, want)
		}
	}
}

// TestWANPeerCheck: a client whose route leaves through a shaped interface
// is named; loopback, other devices and unknown routes are let in.
func TestWANPeerCheck(t *testing.T) {
	routes := map[string]string{"203.0.113.9": "pppoe-wan", "192.168.1.20": "br-lan", "2001:db8::9": "pppoe-wan"}
	check := wanPeerCheck([]string{"pppoe-wan", "eth1"}, func(a netip.Addr) (string, error) {
		if d, ok := routes[a.String()]; ok {
			return d, nil
		}
		return "", errors.New("no route")
	})
	for a, want := range map[string]string{"203.0.113.9": "pppoe-wan", "2001:db8::9": "pppoe-wan", "192.168.1.20": "", "127.0.0.1": "", "198.51.100.1": ""} {
		if got := check(netip.MustParseAddr(a)); got != want {
			t.Errorf("%s: %q; want %q", a, got, want)
		}
	}
	if got := wanPeerCheck(nil, nil)(netip.MustParseAddr("203.0.113.9")); got != "" {
		t.Errorf("no shaped interfaces: %q", got)
	}
}
