//go:build linux && !sqm_noweb && !sqm_notest

package cli

import (
	"bytes"
	"context"
	"flag"
	"io"
	"strings"
	"sync/atomic"

	"sqm/internal/tune"
	"sqm/internal/web"
)

// webTuneArgs is the sqm tune command line the page's request stands for:
// the daemon's config and state directory, so the tune shapes under the
// daemon's lock and records its state where the daemon reads it.
func webTuneArgs(cfgPath, stateDir string, req web.TuneRequest) []string {
	args := []string{"--config", cfgPath, "--state-dir", stateDir, "--section", req.Section, "--profile", req.Profile}
	if req.Detect {
		args = append(args, "--detect")
	}
	// "--": a server that starts with '-' is a server, not a flag.
	return append(args, "--", req.Server)
}

// webTune is the page's Tune hook: `sqm tune` as the command runs it, its
// flags parsed and checked by tuneFlags.job and run by tuneJob.run, with
// the progress going to the page (Line, Step) instead of stderr. held is
// set while the run holds the state lock; after it, reapply has the
// daemon reload the config, doing what it skipped meanwhile.
func webTune(env *Env, cfgPath, stateDir string, held *atomic.Bool, reapply func() error) func(context.Context, web.TuneRequest) (*tune.Result, error) {
	return func(ctx context.Context, req web.TuneRequest) (*tune.Result, error) {
		fs := flag.NewFlagSet("tune", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		var f tuneFlags
		f.register(fs)
		if err := fs.Parse(webTuneArgs(cfgPath, stateDir, req)); err != nil {
			return nil, err
		}
		penv := &Env{Stdout: io.Discard, Stderr: &lineWriter{line: req.Line}, Getenv: env.Getenv}
		job, err := f.job(penv, fs, fs.Args())
		if err != nil {
			return nil, err
		}
		job.o.Progress, job.o.OnStep = req.Line, req.Step
		held.Store(true)
		out, err := job.run(ctx, penv, fs)
		held.Store(false)
		if rerr := reapply(); rerr != nil && req.Line != nil {
			req.Line("daemon reload after the tune: " + rerr.Error())
		}
		return out.res, err
	}
}

// lineWriter hands what is written to it to line, one line at a time.
type lineWriter struct {
	line func(string)
	buf  []byte
}

func (w *lineWriter) Write(p []byte) (int, error) {
	w.buf = append(w.buf, p...)
	for {
		i := bytes.IndexByte(w.buf, '\n')
		if i < 0 {
			return len(p), nil
		}
		if s := strings.TrimSpace(string(w.buf[:i])); s != "" && w.line != nil {
			w.line(s)
		}
		w.buf = w.buf[i+1:]
	}
}
