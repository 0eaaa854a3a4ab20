package main

import (
	"context"
	"os/signal"
	"syscall"
	"testing"
	"time"
)

// TestNotifyContextLikeSignal: notifyContext is cancelled by the signal
// with the cause signal.NotifyContext gives, and after stop it no longer
// takes the signal.
func TestNotifyContextLikeSignal(t *testing.T) {
	mine, stop := notifyContext(syscall.SIGUSR1)
	std, stopStd := signal.NotifyContext(context.Background(), syscall.SIGUSR1)
	defer stopStd()
	if err := syscall.Kill(syscall.Getpid(), syscall.SIGUSR1); err != nil {
		t.Fatal(err)
	}
	for _, ctx := range []context.Context{mine, std} {
		select {
		case <-ctx.Done():
		case <-time.After(10 * time.Second):
			t.Fatal("SIGUSR1 did not cancel the context")
		}
	}
	if a, b := context.Cause(mine).Error(), context.Cause(std).Error(); a != b || mine.Err() != std.Err() {
		t.Errorf("cause %q, err %v; signal.NotifyContext gives %q, %v", a, mine.Err(), b, std.Err())
	}
	stop()
	if mine.Err() != context.Canceled {
		t.Errorf("after stop: %v", mine.Err())
	}
	ctx2, stop2 := notifyContext(syscall.SIGUSR1)
	stop2()
	if context.Cause(ctx2) != context.Canceled {
		t.Errorf("stop without a signal: cause %v, want context.Canceled", context.Cause(ctx2))
	}
}
