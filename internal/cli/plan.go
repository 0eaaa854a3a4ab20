package cli

import (
	"context"
	"errors"
	"flag"
)

// TODO(owner of this command): replace this placeholder.
func cmdPlan() *command {
	return &command{
		name:    "plan",
		summary: "(not built yet)",
		usage:   "sqm plan",
		help:    "Not built yet.",
		run: func(ctx context.Context, env *Env, fs *flag.FlagSet, args []string) error {
			return errors.New("not implemented yet")
		},
	}
}
