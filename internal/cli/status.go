package cli

import (
	"context"
	"errors"
	"flag"
)

// TODO(owner of this command): replace this placeholder.
func cmdStatus() *command {
	return &command{
		name:    "status",
		summary: "(not built yet)",
		usage:   "sqm status",
		help:    "Not built yet.",
		run: func(ctx context.Context, env *Env, fs *flag.FlagSet, args []string) error {
			return errors.New("not implemented yet")
		},
	}
}
