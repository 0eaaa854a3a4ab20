// Package iperf3test starts Debian's iperf3 server for tests.
package iperf3test

import (
	"bufio"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Require skips the test when the iperf3 binary is missing.
func Require(t testing.TB) {
	t.Helper()
	if _, err := exec.LookPath("iperf3"); err != nil {
		t.Skip("needs iperf3 (Debian package iperf3; scripts/setup.sh installs it)")
	}
}

// FreePort returns a TCP port on 127.0.0.1 that was free a moment ago.
func FreePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// Serve starts `iperf3 -s` bound to bind:port, prefixed by prefix (e.g.
// "ip netns exec NS"), waits until it listens and stops it at cleanup. It
// returns the address to connect to. Readiness is read from the server's
// own "Server listening" line, not by connecting: a connection would count
// as a (failed) test in its log.
func Serve(t testing.TB, prefix []string, bind string, port int) string {
	t.Helper()
	Require(t)
	args := append(append([]string{}, prefix...), "iperf3", "-s", "--forceflush", "-B", bind, "-p", strconv.Itoa(port))
	cmd := exec.Command(args[0], args[1:]...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ready := make(chan struct{})
	var (
		mu        sync.Mutex
		log       strings.Builder
		listening bool
	)
	logDone := make(chan struct{})
	go func() {
		defer close(logDone)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			mu.Lock()
			log.WriteString(sc.Text() + "\n")
			first := !listening && strings.Contains(sc.Text(), "Server listening")
			listening = listening || first
			mu.Unlock()
			if first {
				close(ready)
			}
		}
		mu.Lock()
		defer mu.Unlock()
		if !listening {
			close(ready)
		}
	}()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-logDone
		cmd.Wait()
		if t.Failed() {
			t.Logf("iperf3 server output:\n%s%s", log.String(), stderr.String())
		}
	})
	select {
	case <-ready:
	case <-time.After(10 * time.Second):
		t.Fatal("iperf3 -s did not say it listens within 10 s")
	}
	mu.Lock()
	ok := listening
	mu.Unlock()
	if !ok {
		<-logDone
		cmd.Wait()
		t.Fatalf("iperf3 -s failed to start:\n%s%s", log.String(), stderr.String())
	}
	return net.JoinHostPort(bind, strconv.Itoa(port))
}
