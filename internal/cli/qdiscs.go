//go:build linux

package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"path/filepath"

	"sqm/internal/features"
	"sqm/internal/luci"
)

// cmdQdiscs writes luci-app-sqm's qdisc list on its own, so that the
// OpenWrt init script can have it in place before `start` returns: the
// daemon writes it too, but only once procd has started it, after the
// init script (and LuCI's "Enable" button, which reloads the page at once)
// has moved on.
func cmdQdiscs() *command {
	return &command{
		name:    "qdiscs",
		summary: "probe which qdiscs the kernel has; rewrite LuCI's list of them",
		usage:   "sqm qdiscs [--state-dir DIR]",
		help: `Probes every qdisc sqm offers as a leaf by creating it where it
disturbs nothing (in a throwaway network namespace, or on a temporary IFB
device where the kernel has no namespaces), prints those the kernel has,
and makes <state-dir>/available_qdiscs hold one empty file for each: the
list luci-app-sqm shows (/var/run/sqm/available_qdiscs on OpenWrt). The
daemon does the same at start and on every reload; the OpenWrt init script
runs it before it starts the daemon. A qdisc whose probe could not tell is
left as it was and makes the command exit 1. Needs root.

Example:

  $ sqm qdiscs
  cake
  fq_codel
  htb`,
		flags: func(fs *flag.FlagSet) {
			stateDirFlag(fs)
		},
		run: func(ctx context.Context, env *Env, fs *flag.FlagSet, args []string) error {
			if len(args) > 0 {
				return usageError("qdiscs takes no arguments")
			}
			dir := filepath.Join(stateDir(env, fs), "available_qdiscs")
			p := features.NewProber()
			avail, err := luci.RefreshQdiscs(dir, p.Qdiscs, func(err error) bool { return errors.Is(err, features.ErrNotAvailable) })
			for _, q := range avail {
				fmt.Fprintln(env.Stdout, q)
			}
			return err
		},
	}
}
