//go:build !sqm_notest

package cli

import (
	"bytes"
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// sqm test takes the secret from the same sources as sqm server
// (--secret-file, SQM_SERVER_SECRET, --secret), so it need not show in ps;
// a wrong secret from any of them is refused by the server, which shows
// the secret was really sent.
func TestTestSecretSources(t *testing.T) {
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	var srvLog syncBuffer
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int)
	go func() {
		done <- run(ctx, &Env{Stdout: &srvLog, Stderr: &srvLog, Getenv: func(string) string { return "" }},
			[]string{"server", "--listen", addr, "--secret", "s3cret"})
	}()
	defer func() {
		cancel()
		<-done
	}()
	waitListening(t, &srvLog, cancel)

	dir := t.TempDir()
	file := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good, bad := file("good", "s3cret\n"), file("bad", "wrong\n")
	for _, tt := range []struct {
		name   string
		args   []string
		env    string // SQM_SERVER_SECRET
		ok     bool
		stderr string // wanted in the output when set
		noWarn bool
		iperf3 bool
	}{
		{name: "file", args: []string{"--secret-file", good}, ok: true, noWarn: true},
		{name: "env", env: "s3cret", ok: true, noWarn: true},
		{name: "file wins over env", args: []string{"--secret-file", good}, env: "wrong", ok: true, noWarn: true},
		{name: "flag warns", args: []string{"--secret", "s3cret"}, ok: true, stderr: "warning: --secret is visible"},
		{name: "wrong file", args: []string{"--secret-file", bad}},
		{name: "wrong env", env: "wrong"},
		{name: "none", noWarn: true},
		{name: "both flags", args: []string{"--secret", "s3cret", "--secret-file", good}, stderr: "not both"},
		{name: "missing file", args: []string{"--secret-file", filepath.Join(dir, "nope")}, stderr: "--secret-file: open"},
		{name: "file for iperf3", args: []string{"--iperf3", "192.0.2.1", "--secret-file", good}, stderr: "--secret-file is for an 'sqm server'"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			getenv := func(k string) string {
				if k == serverSecretEnv {
					return tt.env
				}
				return ""
			}
			args := append([]string{"test", "--mode", "idle", "--duration", "300ms", "--interval", "50ms", "--quiet"}, tt.args...)
			if !strings.Contains(strings.Join(tt.args, " "), "--iperf3") {
				args = append(args, addr)
			}
			var out, errb bytes.Buffer
			code := run(context.Background(), &Env{Stdout: &out, Stderr: &errb, Getenv: getenv}, args)
			if (code == 0) != tt.ok {
				t.Fatalf("exit %d, want success %v; stderr:\n%s", code, tt.ok, errb.String())
			}
			if tt.stderr != "" && !strings.Contains(errb.String(), tt.stderr) {
				t.Errorf("stderr %q, want %q", errb.String(), tt.stderr)
			}
			if tt.noWarn && strings.Contains(errb.String(), "warning") {
				t.Errorf("unexpected warning: %s", errb.String())
			}
		})
	}
}
