//go:build !sqm_notest

package cli

import (
	"context"
	"flag"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"sqm/internal/bloat"
	"sqm/internal/netperf"
)

func TestServerSecretSources(t *testing.T) {
	dir := t.TempDir()
	file := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := file("good", "s3cret\n")
	crlf := file("crlf", "s3cret\r\n")
	empty := file("empty", "")
	blank := file("blank", "\n")
	twoLines := file("two", "s3cret\nmore\n")
	long := file("long", strings.Repeat("x", maxSecretLen+1))
	unreadable := file("unreadable", "s3cret")
	if err := os.Chmod(unreadable, 0); err != nil {
		t.Fatal(err)
	}
	type secretCase struct {
		name       string
		args       []string
		env        string
		want       string // secret
		wantSource string
		wantErr    string
	}
	tests := []secretCase{
		{"none", nil, "", "", "", ""},
		{"env", nil, "fromenv", "fromenv", serverSecretEnv, ""},
		{"flag", []string{"--secret", "x"}, "", "x", "--secret", ""},
		{"flag wins over env", []string{"--secret", "x"}, "fromenv", "x", "--secret", ""},
		{"file", []string{"--secret-file", good}, "", "s3cret", "--secret-file " + good, ""},
		{"file wins over env", []string{"--secret-file", good}, "fromenv", "s3cret", "--secret-file " + good, ""},
		{"file with crlf", []string{"--secret-file", crlf}, "", "s3cret", "--secret-file " + crlf, ""},
		{"both flags", []string{"--secret", "x", "--secret-file", good}, "", "", "", "not both"},
		{"empty flag", []string{"--secret", ""}, "", "", "", "--secret is empty"},
		{"empty file name", []string{"--secret-file", ""}, "", "", "", "needs a file name"},
		{"missing file", []string{"--secret-file", filepath.Join(dir, "nope")}, "", "", "", "no such file"},
		{"empty file", []string{"--secret-file", empty}, "", "", "", empty + ": empty"},
		{"blank file", []string{"--secret-file", blank}, "", "", "", blank + ": empty"},
		{"two lines", []string{"--secret-file", twoLines}, "", "", "", "more than one line"},
		{"too long", []string{"--secret-file", long}, "", "", "", "longer than 1024 bytes"},
		{"directory", []string{"--secret-file", dir}, "", "", "", "--secret-file " + dir},
	}
	if os.Geteuid() != 0 { // root reads files whatever their mode
		tests = append(tests, secretCase{"unreadable", []string{"--secret-file", unreadable}, "", "", "", "permission denied"})
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fs := flag.NewFlagSet("server", flag.ContinueOnError)
			var secret, secretFile string
			fs.StringVar(&secret, "secret", "", "")
			fs.StringVar(&secretFile, "secret-file", "", "")
			if err := fs.Parse(tt.args); err != nil {
				t.Fatal(err)
			}
			env := &Env{Getenv: func(k string) string {
				if k == serverSecretEnv {
					return tt.env
				}
				return ""
			}}
			got, source, err := serverSecret(env, fs, secret, secretFile)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want || source != tt.wantSource {
				t.Errorf("secret %q from %q, err %v; want %q from %q", got, source, err, tt.want, tt.wantSource)
			}
		})
	}
}

// The secret from the environment is used (and a client without it is
// refused), and bad limits or secret files stop the server before it
// listens.
func TestServerCommand(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"server", "--max-clients-per-addr", "0"}, "must be positive"},
		{[]string{"server", "--max-clients", "2", "--max-clients-per-addr", "3"}, "exceeds --max-clients"},
		{[]string{"server", "--max-handshakes", "4", "--max-handshakes-per-addr", "8"}, "exceeds --max-handshakes"},
		{[]string{"server", "--handshake-timeout", "0s"}, "must be positive"},
		{[]string{"server", "--listen", "127.0.0.1:0", "--secret-file", filepath.Join(t.TempDir(), "nope")}, "--secret-file: open"},
	} {
		var out syncBuffer
		code := run(context.Background(), &Env{Stdout: &out, Stderr: &out, Getenv: func(string) string { return "" }}, tt.args)
		if code == 0 || !strings.Contains(out.String(), tt.want) || strings.Contains(out.String(), "listening") {
			t.Errorf("%q: exit %d, output %q; want an error with %q before listening", tt.args, code, out.String(), tt.want)
		}
	}

	// --secret still works but warns: ps shows it. (A cancelled context
	// stops the server right after the secret is taken.)
	var warn syncBuffer
	stopped, stop := context.WithCancel(context.Background())
	stop()
	run(stopped, &Env{Stdout: &warn, Stderr: &warn, Getenv: func(string) string { return "" }}, []string{"server", "--listen", "127.0.0.1:0", "--secret", "x"})
	if !strings.Contains(warn.String(), "warning: --secret is visible") {
		t.Errorf("--secret without a warning:\n%s", warn.String())
	}

	var log syncBuffer
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int)
	getenv := func(k string) string {
		if k == serverSecretEnv {
			return "fromenv"
		}
		return ""
	}
	go func() {
		done <- run(ctx, &Env{Stdout: &log, Stderr: &log, Getenv: getenv}, []string{"server", "--listen", "127.0.0.1:0"})
	}()
	listening := regexp.MustCompile(`listening on (127\.0\.0\.1:\d+) .*secret from ` + serverSecretEnv)
	var addr string
	for i := 0; i < 250 && addr == ""; i++ {
		if m := listening.FindStringSubmatch(log.String()); m != nil {
			addr = m[1]
		}
		time.Sleep(20 * time.Millisecond)
	}
	if addr == "" {
		cancel()
		t.Fatalf("server did not say it listens with the secret from the environment:\n%s", log.String())
	}
	o := bloat.Options{Addr: addr, Mode: bloat.ModeIdle, Duration: 200 * time.Millisecond, Interval: 50 * time.Millisecond, NoICMP: true}
	if _, err := bloat.Run(context.Background(), o); err == nil || !strings.Contains(err.Error(), "secret") {
		t.Errorf("client without the secret: %v, want refused", err)
	}
	o.Secret = "fromenv"
	if _, err := bloat.Run(context.Background(), o); err != nil {
		t.Errorf("client with the secret from the environment: %v", err)
	}
	cancel()
	if code := <-done; code != 0 {
		t.Errorf("server exit %d:\n%s", code, log.String())
	}
}

// TestServerNetperfFlag: --netperf's forms, its errors before anything
// listens, and its start-up line (the passphrase with a secret).
func TestServerNetperfFlag(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"server", "--listen", "127.0.0.1:0", "--netperf=nope"}, "want HOST:PORT"},
		{[]string{"server", "--listen", "127.0.0.1:0", "--netperf", "127.0.0.1:9"}, "--netperf takes its address with '=': --netperf=127.0.0.1:9"},
		{[]string{"server", "--listen", "127.0.0.1:0", "--netperf=" + taken.Addr().String()}, "--netperf: listen tcp " + taken.Addr().String()},
	} {
		var out syncBuffer
		code := run(context.Background(), &Env{Stdout: &out, Stderr: &out, Getenv: func(string) string { return "" }}, tt.args)
		if code == 0 || !strings.Contains(out.String(), tt.want) || strings.Contains(out.String(), "listening") {
			t.Errorf("%q: exit %d, output %q; want an error with %q before listening", tt.args, code, out.String(), tt.want)
		}
	}
	// A cancelled context stops the server right after it listens.
	stopped, stop := context.WithCancel(context.Background())
	stop()
	var log syncBuffer
	code := run(stopped, &Env{Stdout: &log, Stderr: &log, Getenv: func(string) string { return "" }},
		[]string{"server", "--listen", "127.0.0.1:0", "--netperf=127.0.0.1:0", "--secret", "s3cret"})
	want := "netperf clients must give -Z " + netperf.Passphrase("s3cret")
	if code != 0 || !regexp.MustCompile(`netperf: listening on 127\.0\.0\.1:\d+ \(tcp\); `).MatchString(log.String()) || !strings.Contains(log.String(), want) {
		t.Errorf("--netperf with a secret: exit %d, want a start-up line with %q:\n%s", code, want, log.String())
	}
}
