package service_test

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"sqm/internal/clitest"
)

// TestDaemonEarlySIGHUP is issue 23 item 3: procd sends SIGHUP on every
// reload, and one that came while the daemon was still opening the web
// page, netlink and the link watcher ended the process (Go's default for
// SIGHUP), which procd counts as a crash. The daemon is held (clitest's
// hook) right after it catches its signals, before it opens anything;
// the test sends SIGHUP in that window, lets it go on, and wants it
// running, the early SIGHUP acted on as a reload once it is up, and a
// clean exit on SIGTERM. No section is enabled: nothing is shaped.
func TestDaemonEarlySIGHUP(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a daemon process; skipped with -short")
	}
	dir := t.TempDir()
	cfg := filepath.Join(dir, "sqm")
	if err := os.WriteFile(cfg, []byte("config queue 'wan'\n\toption enabled '0'\n\toption interface 'sqmnone0'\n\toption script 'simplest'\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := clitest.Command("daemon", "--config", cfg, "--state-dir", filepath.Join(dir, "run"),
		"--log-level", "info", "--poll-interval", "0", "--check-interval", "0")
	cmd.Env = append(cmd.Env, clitest.HoldDaemon+"=1")
	logs := &syncBuf{}
	cmd.Stdout, cmd.Stderr = logs, logs
	release, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-done
		if t.Failed() {
			t.Logf("daemon log:\n%s", logs)
		}
	})
	waitFor(t, 20*time.Second, "the daemon to catch its signals", func() bool { return strings.Contains(logs.String(), clitest.HeldMarker) })
	if err := cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	release.Write([]byte("go\n"))
	release.Close()
	var exited error
	gone := func() bool {
		select {
		case exited = <-done:
			done <- exited
			return true
		default:
			return false
		}
	}
	waitFor(t, 20*time.Second, "the early SIGHUP acted on as a reload", func() bool {
		return gone() || strings.Contains(logs.String(), `msg="reloading config" reason=SIGHUP`)
	})
	if gone() {
		t.Fatalf("the daemon ended on the early SIGHUP: %v", exited)
	}
	if i, j := strings.Index(logs.String(), `msg="daemon started"`), strings.Index(logs.String(), `reason=SIGHUP`); i < 0 || j < i {
		t.Errorf("the SIGHUP's reload does not follow the start")
	}
	cmd.Process.Signal(syscall.SIGTERM)
	waitFor(t, 20*time.Second, "exit on SIGTERM", gone)
	if exited != nil {
		t.Errorf("exit after SIGTERM: %v; want a clean exit", exited)
	}
}
