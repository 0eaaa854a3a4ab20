//go:build linux && !sqm_notest

package cli

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"golang.org/x/sys/unix"
)

// noStreamServer speaks just enough of the sqm control protocol (2-byte
// length, JSON) to welcome one client, then stops listening, so every load
// stream the client opens is refused and the client logs a note for each:
// a run that exercises both the progress line and the notes, without root.
func noStreamServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	t.Cleanup(func() { ln.Close(); <-done })
	go func() {
		defer close(done)
		c, err := ln.Accept()
		ln.Close()
		if err != nil {
			return
		}
		defer c.Close()
		read := func() map[string]any {
			var n [2]byte
			if _, err := io.ReadFull(c, n[:]); err != nil {
				return nil
			}
			b := make([]byte, binary.BigEndian.Uint16(n[:]))
			if _, err := io.ReadFull(c, b); err != nil {
				return nil
			}
			var m map[string]any
			json.Unmarshal(b, &m)
			return m
		}
		write := func(m map[string]any) {
			b, _ := json.Marshal(m)
			c.Write(append(binary.BigEndian.AppendUint16(nil, uint16(len(b))), b...))
		}
		if m := read(); m == nil || m["type"] != "hello" {
			return
		}
		write(map[string]any{"type": "challenge", "version": 1, "nonce": make([]byte, 32)})
		if m := read(); m == nil || m["type"] != "auth" {
			return
		}
		write(map[string]any{"type": "welcome", "version": 1, "token": make([]byte, 16), "grace_ms": 5000})
		io.Copy(io.Discard, c) // the session lasts until the client closes
	}()
	return ln.Addr().String()
}

// testArgs is a short speedtest whose streams noStreamServer refuses.
func testArgs(addr string) []string {
	return []string{"test", "--mode", "speedtest", "--streams", "1", "--duration", "300ms", "--idle", "200ms",
		"--interval", "50ms", "--no-icmp", addr}
}

// TestTestCommandPlainOffTerminal runs `sqm test` with stdout and stderr
// sent to a file and to a pipe, and checks neither gets a carriage return
// or an escape code, while the notes still arrive as plain lines on stderr
// and the result on stdout.
func TestTestCommandPlainOffTerminal(t *testing.T) {
	type sink struct {
		w    *os.File
		read func() string
	}
	file := func(t *testing.T) sink {
		f, err := os.Create(filepath.Join(t.TempDir(), "out"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.Close() })
		return sink{f, func() string { b, _ := os.ReadFile(f.Name()); return string(b) }}
	}
	pipe := func(t *testing.T) sink {
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		var b bytes.Buffer
		done := make(chan struct{})
		go func() { io.Copy(&b, r); close(done) }()
		t.Cleanup(func() { r.Close() })
		return sink{w, func() string { w.Close(); <-done; return b.String() }}
	}
	for _, tt := range []struct {
		name           string
		stdout, stderr func(*testing.T) sink
	}{
		{"files", file, file},
		{"pipes", pipe, pipe},
		{"stdout pipe, stderr file", pipe, file},
	} {
		t.Run(tt.name, func(t *testing.T) {
			out, errs := tt.stdout(t), tt.stderr(t)
			getenv := func(k string) string {
				if k == "TERM" {
					return "xterm-256color"
				}
				return os.Getenv(k)
			}
			code := run(t.Context(), &Env{Stdout: out.w, Stderr: errs.w, Getenv: getenv}, testArgs(noStreamServer(t)))
			o, e := out.read(), errs.read()
			if code != 0 {
				t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, o, e)
			}
			for name, s := range map[string]string{"stdout": o, "stderr": e} {
				if strings.ContainsAny(s, "\r\x1b") {
					t.Errorf("%s has a carriage return or escape code:\n%q", name, s)
				}
			}
			if !strings.Contains(e, "sqm test: down stream BE could not start") {
				t.Errorf("stderr lacks the note about the refused stream:\n%s", e)
			}
			if !strings.Contains(o, "Download:") {
				t.Errorf("stdout lacks the result:\n%s", o)
			}
		})
	}
}

// openPTY returns both ends of a new pseudo-terminal.
func openPTY(t *testing.T) (master, slave *os.File) {
	t.Helper()
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminals here: %v", err)
	}
	t.Cleanup(func() { m.Close() })
	if err := unix.IoctlSetPointerInt(int(m.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Skipf("unlockpt: %v", err)
	}
	n, err := unix.IoctlGetInt(int(m.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Skipf("ptsname: %v", err)
	}
	s, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("open the pty's terminal end: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return m, s
}

// TestTestCommandProgressOnTerminal gives `sqm test` a terminal as stderr
// and checks the progress line appears there (rewritten in place) and is
// cleared before each note, while stdout (a pipe) stays plain; with
// TERM=dumb the terminal gets plain notes only.
func TestTestCommandProgressOnTerminal(t *testing.T) {
	for _, tt := range []struct {
		term     string
		progress bool
	}{{"xterm-256color", true}, {"dumb", false}} {
		t.Run(tt.term, func(t *testing.T) {
			master, slave := openPTY(t)
			var tty bytes.Buffer
			var mu sync.Mutex
			read := make(chan struct{})
			go func() {
				defer close(read)
				b := make([]byte, 4096)
				for {
					n, err := master.Read(b)
					mu.Lock()
					tty.Write(b[:n])
					mu.Unlock()
					if err != nil {
						return
					}
				}
			}()
			r, w, err := os.Pipe()
			if err != nil {
				t.Fatal(err)
			}
			var out bytes.Buffer
			outDone := make(chan struct{})
			go func() { io.Copy(&out, r); close(outDone) }()
			getenv := func(k string) string {
				if k == "TERM" {
					return tt.term
				}
				return os.Getenv(k)
			}
			code := run(t.Context(), &Env{Stdout: w, Stderr: slave, Getenv: getenv}, testArgs(noStreamServer(t)))
			w.Close()
			<-outDone
			r.Close()
			// Closing the terminal end makes the master's reads end once
			// everything written has been read.
			slave.Close()
			<-read
			mu.Lock()
			e := tty.String()
			mu.Unlock()
			if code != 0 {
				t.Fatalf("exit %d\nstdout:\n%s\nterminal:\n%q", code, out.String(), e)
			}
			if strings.ContainsAny(out.String(), "\r\x1b") {
				t.Errorf("stdout (a pipe) has a carriage return or escape code:\n%q", out.String())
			}
			hasProgress := strings.Contains(e, "\r\x1b[K") && strings.Contains(e, "Mbit/s  latency")
			if hasProgress != tt.progress {
				t.Errorf("progress on the terminal: %v, want %v:\n%q", hasProgress, tt.progress, e)
			}
			if !tt.progress && strings.Contains(e, "\x1b") {
				t.Errorf("escape codes on a TERM=dumb terminal:\n%q", e)
			}
			if tt.progress && !strings.Contains(e, "\r\x1b[Ksqm test: down stream BE could not start") &&
				!strings.Contains(e, "\nsqm test: down stream BE could not start") {
				t.Errorf("note not on a line of its own:\n%q", e)
			}
		})
	}
}
