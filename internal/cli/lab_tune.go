//go:build linux && !sqm_nolab

package cli

import (
	"context"
	"flag"
	"fmt"
	"os"
	"time"

	"sqm/internal/json"
	"sqm/internal/lab"
	"sqm/internal/plot"
	"sqm/internal/report"
	"sqm/internal/tune"
)

// labTunePoint is the load time of one tune point in the lab: --duration
// if given, else 6 s (the lab's 20 s default is for a single before/after
// comparison, and tune measures some 60 points).
func labTunePoint(fs *flag.FlagSet) time.Duration {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == "duration" })
	if set {
		return fs.Lookup("duration").Value.(flag.Getter).Get().(time.Duration)
	}
	return 6 * time.Second
}

// runLabTune is `sqm lab --tune` on this machine's kernel.
func runLabTune(ctx context.Context, env *Env, fs *flag.FlagSet, opts lab.Options) error {
	target := fs.Lookup("target").Value.(flag.Getter).Get().(float64)
	to := tune.Options{TargetMs: target}
	if _, err := to.Target(); err != nil {
		return usageError("--target: %v", err)
	}
	opts.Duration = labTunePoint(fs)
	if opts.Duration < 4*time.Second {
		return usageError("--duration %v with --tune: give at least 4s (up to half of each point is its start burst, judged apart)", opts.Duration)
	}
	start := time.Now()
	opts.Progress = func(phase string) {
		fmt.Fprintf(env.Stderr, "[%6.1fs] %s\n", time.Since(start).Seconds(), phase)
	}
	rep, err := lab.Tune(ctx, opts, to, 1)
	if err != nil {
		return err
	}
	if p := flagString(fs, "plot"); p != "" {
		l := rep.Link
		title := fmt.Sprintf("sqm lab --tune | %s/%s %s+%d, %v, %d-packet FIFO", lab.FormatRate(l.DownBits), lab.FormatRate(l.UpBits), l.LinkLayer, l.Overhead, l.RTT, l.Buffer)
		if err := plot.SaveTradeoff(p+"-tune.svg", tune.Tradeoff(rep.Tune, title)); err != nil {
			return fmt.Errorf("lab: %w", err)
		}
		opts.Progress("wrote " + p + "-tune.svg")
	}
	out := env.Stdout
	if f := env.Getenv(labResultEnv); f != "" {
		fh, err := os.Create(f)
		if err != nil {
			return fmt.Errorf("lab: write result for the VM harness: %w", err)
		}
		defer fh.Close()
		out = fh
	}
	if flagBool(fs, "json") {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	if err := tune.WriteTable(out, rep.Tune); err != nil {
		return err
	}
	fmt.Fprintf(out, "\noracle (%g %% steps): download %d kbit/s, upload %d kbit/s; tune chose %d/%d each alone\n",
		rep.Oracle.StepPct, rep.Oracle.DownloadKbit, rep.Oracle.UploadKbit, rep.Tune.AloneDownKbit, rep.Tune.AloneUpKbit)
	fmt.Fprintf(out, "emulated line: max goodput %.2f/%.2f Mbit/s\n\nat the chosen rates:\n", rep.Link.MaxGoodputDownMbps, rep.Link.MaxGoodputUpMbps)
	return report.Text(out, rep.After)
}
