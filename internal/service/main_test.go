package service_test

import (
	"context"
	"os"
	"os/signal"
	"syscall"
	"testing"

	"sqm/internal/cli"
)

// TestMain lets the test binary act as the sqm command (helperEnv), so that
// multi-process tests (concurrent starts, a daemon killed mid-apply) run the
// code under test without a separate build.
func TestMain(m *testing.M) {
	if os.Getenv(helperEnv) == "1" {
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		code := cli.Run(ctx, os.Args[1:], os.Stdout, os.Stderr)
		stop()
		os.Exit(code)
	}
	os.Exit(m.Run())
}
