//go:build !sqm_notest

package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// syncBuffer is a bytes.Buffer safe for the server's log goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestServerAndTestCommands runs `sqm server` and `sqm test` against each
// other on loopback.
func TestServerAndTestCommands(t *testing.T) {
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	var srvErr syncBuffer
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int)
	go func() {
		done <- run(ctx, &Env{Stdout: &srvErr, Stderr: &srvErr, Getenv: os.Getenv}, []string{"server", "--listen", addr, "--secret", "x"})
	}()
	waitListening(t, &srvErr, cancel)

	dir := t.TempDir()
	svg, flent := filepath.Join(dir, "p.svg"), filepath.Join(dir, "r.flent.gz")
	var out, errb bytes.Buffer
	code := run(context.Background(), &Env{Stdout: &out, Stderr: &errb, Getenv: os.Getenv},
		[]string{"test", "--duration", "1s", "--idle", "300ms", "--interval", "50ms", "--secret", "x", "--json", "--plot", svg, "--flent", flent, addr})
	if code != 0 {
		t.Fatalf("sqm test exit %d: %s", code, errb.String())
	}
	var res map[string]any
	if err := json.Unmarshal(out.Bytes(), &res); err != nil {
		t.Fatalf("--json output is not JSON: %v\n%s", err, out.String())
	}
	if res["download_mbps"].(float64) <= 0 || res["grade"] == "" {
		t.Errorf("result: download %v grade %v", res["download_mbps"], res["grade"])
	}
	for _, f := range []string{svg, flent} {
		if st, err := os.Stat(f); err != nil || st.Size() == 0 {
			t.Errorf("%s not written: %v", f, err)
		}
	}

	out.Reset()
	code = run(context.Background(), &Env{Stdout: &out, Stderr: &errb, Getenv: os.Getenv},
		[]string{"test", "--mode", "idle", "--duration", "500ms", "--quiet", "--secret", "x", addr})
	if code != 0 || !strings.Contains(out.String(), "Median:") || strings.Contains(out.String(), "\r") {
		t.Errorf("idle text run: exit %d, output:\n%q", code, out.String())
	}

	cancel()
	select {
	case code := <-done:
		if code != 0 {
			t.Errorf("server exit %d: %s", code, srvErr.String())
		}
	case <-time.After(5 * time.Second):
		t.Fatal("server did not stop on cancel")
	}
	if !strings.Contains(srvErr.String(), "session started") || !strings.Contains(srvErr.String(), "stopped") {
		t.Errorf("server log:\n%s", srvErr.String())
	}
}

func TestTestCommandUsage(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"test"}, "exactly one server"},
		{[]string{"test", "--mode", "fast", "h"}, "unknown --mode"},
		{[]string{"test", "-4", "-6", "h"}, "exclude"},
		{[]string{"test", "--mode", "speedtest", "--flent", "x.flent.gz", "h"}, "needs --mode rrul"},
		{[]string{"test", "--plot", "x.jpg", "h"}, ".svg or .png"},
		{[]string{"server", "extra"}, "no arguments"},
		{[]string{"server", "--max-clients", "0"}, "must be positive"},
	}
	for _, tt := range tests {
		var out, errb bytes.Buffer
		code := run(context.Background(), &Env{Stdout: &out, Stderr: &errb, Getenv: os.Getenv}, tt.args)
		if code != 2 || !strings.Contains(errb.String(), tt.want) {
			t.Errorf("%v: exit %d, stderr %q; want 2 and %q", tt.args, code, errb.String(), tt.want)
		}
	}
}
