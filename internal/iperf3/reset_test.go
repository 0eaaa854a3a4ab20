package iperf3_test

import (
	"context"
	"net"
	"os"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"sqm/internal/iperf3"
)

// resetConn is a control connection the server reset before it said
// anything: what a client meets when it connects into the backlog of the
// listening socket iperf3 3.12 closes after each test (make test saw it as
// "send cookie: ... connection reset by peer" on the test after another).
type resetConn struct{ net.Conn }

func (resetConn) Write([]byte) (int, error) {
	return 0, &net.OpError{Op: "write", Net: "tcp", Err: os.NewSyscallError("write", syscall.ECONNRESET)}
}

func (resetConn) Read([]byte) (int, error) {
	return 0, &net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("read", syscall.ECONNRESET)}
}

// settleCase starts a test whose first control connection is the one
// first(ctx) makes and the rest go to a working fake server: without Settle
// Start must fail saying each of want; within it, try once more and run.
func settleCase(t *testing.T, first func(ctx context.Context) (net.Conn, error), want ...string) {
	t.Helper()
	for _, settle := range []time.Duration{0, 2 * time.Second} {
		addr := fake(t, func(ctl net.Conn, accept func() net.Conn) { upToRunning(t, ctl, accept, 1) })
		var controls atomic.Int32
		real := dial(addr)
		d := func(ctx context.Context, stream int, send bool) (net.Conn, error) {
			if stream < 0 && controls.Add(1) == 1 {
				return first(ctx)
			}
			return real(ctx, stream, send)
		}
		tt, err := iperf3.Start(context.Background(), iperf3.Config{Direction: iperf3.Download, Streams: 1,
			Duration: time.Second, Dial: d, Settle: settle})
		if settle == 0 {
			for _, w := range want {
				if err == nil || !strings.Contains(err.Error(), w) {
					t.Errorf("without settle: err = %v, want it to say %q", err, w)
				}
			}
			if tt != nil {
				tt.Close()
			}
			continue
		}
		if err != nil {
			t.Fatalf("with settle %v: %v (the first answer must be asked again)", settle, err)
		}
		if n := controls.Load(); n != 2 {
			t.Errorf("%d control connections, want 2 (the first one and the retry)", n)
		}
		tt.Close()
	}
}

// TestStartResetOnCookie: a reset while sending the cookie is a connection
// the server never accepted, so Start tries again within Settle (and says
// what happened without it).
func TestStartResetOnCookie(t *testing.T) {
	settleCase(t, func(context.Context) (net.Conn, error) {
		a, b := net.Pipe()
		b.Close()
		return resetConn{a}, nil
	}, "send cookie", "connection reset")
}

// TestStartBusyThenFree: a server still ending the previous test answers
// ACCESS_DENIED; within Settle, Start asks again (and without it says the
// server is busy).
func TestStartBusyThenFree(t *testing.T) {
	settleCase(t, func(ctx context.Context) (net.Conn, error) {
		busy := fake(t, func(ctl net.Conn, _ func() net.Conn) { state(ctl, iperf3.AccessDenied) })
		return dial(busy)(ctx, -1, false)
	}, "server busy")
}
