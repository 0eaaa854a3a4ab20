// Command sqm is Smart Queue Management for Linux routers. All behaviour
// lives in internal/cli and the packages it wires; this file only connects
// the process to it.
package main

import (
	"context"
	"errors"
	"os"
	"os/signal"
	"syscall"

	"sqm/internal/cli"
)

func main() {
	disableTHP()
	ctx, stop := notifyContext(os.Interrupt, syscall.SIGTERM)
	code := cli.Run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// notifyContext is signal.NotifyContext(context.Background(), sigs...),
// the same cancellation and cause, without its context type's String
// method, which fmt's Stringer calls keep in the router build (2 KB of
// code on mipsle).
func notifyContext(sigs ...os.Signal) (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(context.Background())
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, sigs...)
	go func() {
		select {
		case s := <-ch:
			cancel(errors.New(s.String() + " signal received"))
		case <-ctx.Done():
		}
	}()
	return ctx, func() {
		cancel(nil)
		signal.Stop(ch)
	}
}
