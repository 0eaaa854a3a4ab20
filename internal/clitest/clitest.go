// Package clitest lets a package's test binary stand in for the sqm
// command, so tests run the real command line (in a namespace, under
// setpriv, as a daemon to signal) without building a binary first.
//
// It lives apart from internal/testutil because it imports internal/cli,
// which imports most of the tree: import it only from external test
// packages (package x_test), never from a package cli depends on.
package clitest

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"runtime/pprof"
	"syscall"
	"testing"

	"sqm/internal/cli"
)

// asSQM is set in a child's environment to make the test binary run cli
// instead of tests. One name serves every package: each test binary only
// ever re-executes itself.
const asSQM = "SQM_TEST_BINARY_AS_SQM"

// HoldDaemon=1 in a Command's environment holds `sqm daemon` right after
// it catches its signals, before it opens anything: it prints HeldMarker
// on stderr and waits for a line on stdin. A test sends signals in that
// window, then lets the daemon go on.
const (
	HoldDaemon = "SQM_TEST_HOLD_DAEMON"
	HeldMarker = "sqm-test: daemon holding after catching its signals"
)

// Main is a whole TestMain: it runs the sqm command when the binary was
// started by Command (exiting with its status, SIGINT/SIGTERM cancelling
// it as in cmd/sqm), and the tests otherwise.
func Main(m *testing.M) {
	if os.Getenv(asSQM) == "1" {
		if os.Getenv(HoldDaemon) == "1" {
			cli.DaemonSignalsCaught = func() {
				fmt.Fprintln(os.Stderr, HeldMarker)
				bufio.NewReader(os.Stdin).ReadString('\n')
			}
		}
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		endProfile := childProfile()
		code := cli.Run(ctx, os.Args[1:], os.Stdout, os.Stderr)
		stop()
		endProfile()
		os.Exit(code)
	}
	os.Exit(m.Run())
}

// ChildProfile in the environment (tools/vmtest -cpuprofile sets it)
// makes each sqm the test binary runs write its CPU profile to
// VALUE.PID.cpu.prof: a daemon the lab started is a process of its own,
// which the test binary's -test.cpuprofile does not see.
const ChildProfile = "SQM_TEST_CPUPROFILE"

func childProfile() func() {
	prefix := os.Getenv(ChildProfile)
	if prefix == "" {
		return func() {}
	}
	f, err := os.Create(fmt.Sprintf("%s.%d.cpu.prof", prefix, os.Getpid()))
	if err != nil {
		fmt.Fprintln(os.Stderr, "sqm-test: no CPU profile:", err)
		return func() {}
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		fmt.Fprintln(os.Stderr, "sqm-test: no CPU profile:", err)
		f.Close()
		return func() {}
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}
}

// Command is `sqm args...` run by the test binary; its package's TestMain
// must call Main.
func Command(args ...string) *exec.Cmd {
	cmd := exec.Command(Binary(), args...)
	cmd.Env = Env()
	return cmd
}

// Binary is the path to run as sqm when a wrapper (setpriv, sudo) goes in
// front of it; give that command Env.
func Binary() string { return os.Args[0] }

// Env is the environment that makes Binary act as sqm.
func Env() []string { return append(os.Environ(), asSQM+"=1") }
