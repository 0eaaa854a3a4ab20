package cli

import (
	"context"
	"errors"
	"flag"
)

// TODO(owner of this command): replace this placeholder.
func cmdTest() *command {
	return &command{
		name:    "test",
		summary: "(not built yet)",
		usage:   "sqm test",
		help:    "Not built yet.",
		run: func(ctx context.Context, env *Env, fs *flag.FlagSet, args []string) error {
			return errors.New("not implemented yet")
		},
	}
}
