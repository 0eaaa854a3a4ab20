//go:build linux && !sqm_noweb && sqm_notls

package cli

import (
	"flag"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sqm/internal/web"
)

// TestWebNoTLS: a build with -tags sqm_notls asked for HTTPS stops the
// daemon before it listens, saying the build has no TLS and why.
func TestWebNoTLS(t *testing.T) {
	dir := t.TempDir()
	h, err := web.HashPassword("notls-test")
	if err != nil {
		t.Fatal(err)
	}
	users := filepath.Join(dir, "users")
	if err := os.WriteFile(users, []byte("admin "+h+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	listen := l.Addr().String()
	l.Close()
	fs := flag.NewFlagSet("daemon", flag.ContinueOnError)
	webFlags(fs)
	if err := fs.Parse([]string{"--http", listen, "--http-users", users, "--http-cert", filepath.Join(dir, "c"), "--http-key", filepath.Join(dir, "k")}); err != nil {
		t.Fatal(err)
	}
	env := &Env{Stdout: io.Discard, Stderr: io.Discard, Getenv: func(string) string { return "" }}
	p, err := prepareWeb(env, fs, filepath.Join(dir, "no-config"))
	if p != nil {
		p.close()
	}
	if err == nil || !strings.Contains(err.Error(), "no TLS") || !strings.Contains(err.Error(), "sqm_notls") || !strings.Contains(err.Error(), "3 MB") {
		t.Fatalf("--http-cert in a build without TLS: %v; want an error saying the build has no TLS and why", err)
	}
}
