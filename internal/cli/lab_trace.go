//go:build linux && !sqm_nolab

package cli

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"sqm/internal/lab"
	"sqm/internal/trace"
)

// runLabTrace is `sqm lab --trace-down/--trace-up`: the modem follows the
// traces, the shaping is fixed or sqm's autorate.
func runLabTrace(ctx context.Context, env *Env, fs *flag.FlagSet, opts lab.Options) error {
	tr, err := labTraces(fs, &opts)
	if err != nil {
		return err
	}
	start := time.Now()
	opts.Progress = func(phase string) {
		fmt.Fprintf(env.Stderr, "[%6.1fs] %s\n", time.Since(start).Seconds(), phase)
	}
	rep, err := lab.RunTrace(ctx, opts, tr)
	if err != nil {
		return err
	}
	if p := fs.Lookup("plot").Value.String(); p != "" {
		if err := rep.WritePlot(p + "-trace.svg"); err != nil {
			return err
		}
		opts.Progress("wrote " + p + "-trace.svg")
	}
	return labOutput(env, fs.Lookup("json").Value.String() == "true", rep)
}

// labTraces reads the trace flags and checks what does not go with them;
// it sets opts.Duration to the longer trace when --duration was not given.
func labTraces(fs *flag.FlagSet, opts *lab.Options) (lab.Traces, error) {
	var tr lab.Traces
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	for _, bad := range []string{"tune", "target", "mode"} {
		if set[bad] {
			return tr, usageError("--%s does not go with --trace-down/--trace-up (a trace run loads both directions at once for --duration)", bad)
		}
	}
	if dir := fs.Lookup("cake-autorate").Value.String(); dir != "" {
		if fs.Lookup("autorate").Value.String() == "true" {
			return tr, usageError("--autorate and --cake-autorate each name the controller of the run: give one")
		}
		if st, err := os.Stat(filepath.Join(dir, "cake-autorate.sh")); err != nil || !st.Mode().IsRegular() {
			return tr, usageError("--cake-autorate %s: no cake-autorate.sh there (give the directory of a lynxthecat/cake-autorate checkout)", dir)
		}
		tr.Controller = lab.CakeAutorate(dir)
	}
	if fs.Lookup("autorate").Value.String() == "true" {
		if lab.Autorate == nil {
			return tr, fmt.Errorf("lab: --autorate: sqm's autorate controller is not in this build (-tags sqm_noautorate); run without --autorate for the fixed shaping (--shape-down/--shape-up)")
		}
		tr.Controller = lab.Autorate()
	}
	tr.NoLoad = fs.Lookup("no-load").Value.String() == "true"
	var longest time.Duration
	for _, d := range []struct {
		flag string
		into **trace.Trace
	}{{"trace-down", &tr.Down}, {"trace-up", &tr.Up}} {
		file := fs.Lookup(d.flag).Value.String()
		if file == "" {
			continue
		}
		t, err := trace.ReadFile(file)
		if err != nil {
			return tr, usageError("--%s: %v", d.flag, err)
		}
		*d.into = t
		longest = max(longest, t.Length)
	}
	if !set["duration"] {
		opts.Duration = min(max(longest, 2*time.Second), 10*time.Minute)
	}
	return tr, nil
}
