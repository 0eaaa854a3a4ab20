// Command sqm is Smart Queue Management for Linux routers. All behaviour
// lives in internal/cli and the packages it wires; this file only connects
// the process to it.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"sqm/internal/cli"
)

func main() {
	disableTHP()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli.Run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
