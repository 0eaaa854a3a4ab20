package cli

import (
	"context"
	"errors"
	"flag"
)

// TODO(owner of this command): replace this placeholder.
func cmdRestart() *command {
	return &command{
		name:    "restart",
		summary: "(not built yet)",
		usage:   "sqm restart",
		help:    "Not built yet.",
		run: func(ctx context.Context, env *Env, fs *flag.FlagSet, args []string) error {
			return errors.New("not implemented yet")
		},
	}
}
