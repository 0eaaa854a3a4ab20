//go:build linux

package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"time"

	"sqm/internal/kernel"
	"sqm/internal/metrics"
	"sqm/internal/service"
	"sqm/internal/units"
)

// statusPromFlags are status's Prometheus flags.
func statusPromFlags(fs *flag.FlagSet) {
	fs.Bool("prom", false, "print Prometheus text format (0.0.4) instead of the table")
	fs.String("prom-file", "", "write Prometheus text format to `FILE` atomically (for node_exporter's or prometheus-node-exporter-lua's textfile collector)")
	units.DurationFlag(fs, "prom-interval", 0, "with --prom-file: rewrite the file every `DURATION` until stopped, so 32-bit kernel counters are extended across wraps (0: write once)")
}

// promRequested reports whether status should print metrics; it refuses
// flag combinations that cannot mean anything.
func promRequested(fs *flag.FlagSet) (bool, error) {
	prom, file := flagBool(fs, "prom"), flagString(fs, "prom-file")
	every := fs.Lookup("prom-interval").Value.(flag.Getter).Get().(time.Duration)
	switch {
	case (prom || file != "") && flagBool(fs, "json"):
		return false, usageError("--json and --prom/--prom-file: choose one output format")
	case prom && file != "":
		return false, usageError("--prom prints to stdout and --prom-file writes a file: choose one")
	case every != 0 && file == "":
		return false, usageError("--prom-interval needs --prom-file")
	case every < 0:
		return false, usageError("--prom-interval %v: must be positive (or 0 to write once)", every)
	}
	return prom || file != "", nil
}

// statusProm is `sqm status --prom` and `--prom-file`: the same snapshot
// the daemon's /metrics serves, of the named interfaces or of all shaped
// ones.
func statusProm(ctx context.Context, env *Env, fs *flag.FlagSet, ifaces []string) error {
	store := &service.Store{Dir: stateDir(env, fs)}
	conn, err := kernel.Open()
	if err != nil {
		return err
	}
	defer conn.Close()
	snapshot := func() (*metrics.Snapshot, error) {
		states, serr := store.All()
		states, ferr := selectStates(states, ifaces, store.Dir)
		snap, kerr := metrics.FromStates(conn, states)
		aerr := metrics.AddAutorate(snap, store, states)
		snap.Build = metrics.DefaultBuild(Version)
		return snap, errors.Join(serr, ferr, kerr, aerr)
	}
	c := metrics.NewCollector()
	file := flagString(fs, "prom-file")
	if file == "" {
		snap, err := snapshot()
		if werr := c.Write(env.Stdout, snap, err); werr != nil {
			return werr
		}
		return err
	}
	every := fs.Lookup("prom-interval").Value.(flag.Getter).Get().(time.Duration)
	for {
		snap, err := snapshot()
		if werr := c.WriteFile(file, snap, err); werr != nil {
			return werr
		}
		if every == 0 {
			return err
		}
		if err != nil {
			// Shown as sqm_scrape_error in the file; keep going.
			fmt.Fprintf(env.Stderr, "sqm status: %v\n", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(every):
		}
	}
}

// selectStates keeps the states of the named interfaces (all when none
// are named); a name sqm does not shape is an error, so a typo in a cron
// line is noticed.
func selectStates(states []*service.State, ifaces []string, dir string) ([]*service.State, error) {
	if len(ifaces) == 0 {
		return states, nil
	}
	by := map[string]*service.State{}
	for _, st := range states {
		by[st.Interface] = st
	}
	var out []*service.State
	var errs []error
	for _, i := range ifaces {
		if st := by[i]; st != nil {
			out = append(out, st)
		} else {
			errs = append(errs, fmt.Errorf("%s: not shaped by sqm (no state in %s)", i, dir))
		}
	}
	return out, errors.Join(errs...)
}
