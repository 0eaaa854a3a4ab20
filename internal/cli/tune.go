//go:build linux && !sqm_notest

package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"sqm/internal/bloat"
	"sqm/internal/config"
	"sqm/internal/json"
	"sqm/internal/linklayer"
	"sqm/internal/plot"
	"sqm/internal/service"
	"sqm/internal/stats"
	"sqm/internal/tune"
	"sqm/internal/units"
)

// tuneFlags are sqm tune's flags. The web page's tune fills them too
// (webTuneArgs): both build their run with job and run it with
// tuneJob.run, so a tune from the page is the command's, flag for flag.
type tuneFlags struct {
	section, profile, plotFile    string
	target                        float64
	point, idle, warmup, budget   time.Duration
	jsonOut, write, quiet, v4, v6 bool
	secret, secretF, iperf3Addr   string
	irttAddr, irttHMAC, irttFile  string
	noICMP                        bool
	streams                       int
	detectLL, detect              bool
	llo                           linkLayerOpts
}

func (f *tuneFlags) register(fs *flag.FlagSet) {
	configFlag(fs)
	stateDirFlag(fs)
	fs.StringVar(&f.section, "section", "", "the config `section` to tune (default: the only enabled one)")
	fs.StringVar(&f.profile, "profile", "", "latency target by use: gaming (10 ms), balanced (30 ms) or throughput (60 ms)")
	fs.Float64Var(&f.target, "target", 0, "induced-latency target in `ms` (instead of --profile)")
	units.DurationVar(fs, &f.point, "duration", 10*time.Second, "load time of each measured rate")
	units.DurationVar(fs, &f.idle, "idle", 10*time.Second, "idle baseline length")
	units.DurationVar(fs, &f.budget, "budget", tune.DefaultBudget, "stop refining when a point would end past this much of the run (0: no limit)")
	units.DurationVar(fs, &f.warmup, "warmup", 0, "at most this much of each point's start is its start burst, shown apart, not judged (default: half the point)")
	fs.BoolVar(&f.jsonOut, "json", false, `print the "tune" JSON object instead of the table`)
	fs.StringVar(&f.plotFile, "plot", "", "also draw the trade-off curve to `file` (.svg or .png)")
	fs.BoolVar(&f.write, "write", false, "write the chosen rates into the config file and apply them")
	fs.BoolVar(&f.quiet, "quiet", false, "no progress lines on stderr")
	fs.BoolVar(&f.v4, "4", false, "use IPv4 only")
	fs.BoolVar(&f.v6, "6", false, "use IPv6 only")
	clientSecretFlags(fs, &f.secret, &f.secretF)
	fs.StringVar(&f.iperf3Addr, "iperf3", "", "put the load through this iperf3 server, `HOST[:PORT]`, instead of an 'sqm server'")
	fs.StringVar(&f.irttAddr, "irtt", "", "send the latency probes to this irtt server, `HOST[:PORT]`")
	fs.StringVar(&f.irttHMAC, "irtt-hmac", "", "HMAC `key` of the irtt server; prefer --irtt-hmac-file or $SQM_IRTT_HMAC")
	fs.StringVar(&f.irttFile, "irtt-hmac-file", "", "read the irtt server's HMAC key from `file`")
	fs.BoolVar(&f.noICMP, "no-icmp", false, "do not send ICMP echo probes")
	fs.IntVar(&f.streams, "streams", 5, "TCP streams per direction")
	fs.BoolVar(&f.detectLL, "linklayer", false, "detect the link layer (ATM or not) and the ATM overhead instead of tuning rates")
	fs.BoolVar(&f.detect, "detect", false, "detect the link layer first and tune with it (the probe flags below apply)")
	fs.StringVar(&f.llo.sizes, "sizes", "60-252", "--linklayer: IP packet sizes `LO-HI[/STEP]` in bytes")
	fs.IntVar(&f.llo.repeat, "repeat", 10, "--linklayer: echoes per size")
	units.DurationVar(fs, &f.llo.interval, "interval", 10*time.Millisecond, "--linklayer: time between echoes")
}

func cmdTune() *command {
	var f tuneFlags
	return &command{
		name:    "tune",
		summary: "find the shaper rates that keep latency low at the most throughput, and draw the trade-off",
		usage:   "sqm tune [--config FILE] [--section NAME] [--profile gaming|balanced|throughput | --target MS] [--duration D] [--detect] [--json] [--plot F.svg|F.png] [--write] HOST[:PORT] | --iperf3 HOST[:PORT]\n       sqm tune --linklayer [--sizes LO-HI[/STEP]] [--repeat N] [--interval D] [--json] HOST",
		help: `Run on the machine that shapes. Measures against a server as 'sqm test'
does, changing the shaping of the section's interface as it goes:

  1. idle latency (--idle);
  2. each direction with shaping lifted: the line's goodput and its bloat;
  3. a coarse sweep of shaper rates per direction, then bisection around
     the rate where latency breaks; the highest rate still under the target
     near the knee is measured again, to notice a line that changed (the
     direction is then measured once more) and to size a noise margin;
  4. the chosen pair with both directions loaded at once; if the two
     shapers' queues (and the download's ACKs on a slow upload) add up over
     the target, the direction whose cut helps most is lowered, or both
     (down to 40 %), to the highest pair that meets it.

Induced latency is the 90th percentile under load minus the idle median,
over each point's load after its start burst: TCP's slow start
overshoots a download shaper (it sits behind the modem) into the modem's
buffer, which takes a second or more to drain. In a minute-long test it
hardly counts, in a few-second point it would decide. The burst ends when
latency is back under the target (at least 1s in, at most --warmup,
default half the point); the table shows it apart, as "start".
Targets: --profile gaming (10 ms), balanced (30 ms, the default),
throughput (60 ms), or --target MS. Each point loads for --duration
(default 10s); a run takes about 25 to 35 points. Within --budget
(default 5m) it stops refining: bisection, and the search for a lower
pair with both directions loaded, end where the next point would pass
it, keeping the rates that passed, and a note says so; the points the
answer needs are always measured.

The shaping the interface had before is put back at the end, on an error,
and on Ctrl-C. --write puts the chosen download and upload into the
section of the config file, changing nothing else in it (comments, order
and options sqm does not know are kept byte for byte), and applies it;
otherwise the 'uci set' commands are printed.

The link layer and overhead stay as configured, unless --detect: then
the idle line is first probed as --linklayer does (below), and an ATM
line is shaped with the cells and the overhead measured (a non-ATM line
keeps the configured overhead, which idle delays cannot show); --write
then stores them with the rates.

--linklayer instead sends ICMP echoes of many sizes (--sizes, each
--repeat times, one every --interval, in random order) over the idle line
to HOST and tells ATM from Ethernet/PTM framing: on ATM the round trip
climbs in steps every 48 bytes, and where they fall gives the per-packet
overhead (known only modulo 48; the value between 6 and 53 is reported).
It prints the verdict, how sure it is, and cake options for the section's
interface (PPPoE, VLAN). It changes no shaping.

Example (seed 004's ADSL line):

  $ sqm tune --section wan --plot tune.svg 192.0.2.7
  ...
  chosen: download 7000 kbit/s, upload 830 kbit/s`,
		flags: f.register,
		run: func(ctx context.Context, env *Env, fs *flag.FlagSet, args []string) error {
			if f.detectLL {
				if f.detect {
					return usageError("--linklayer only probes; --detect probes, then tunes: give one of them")
				}
				if f.iperf3Addr != "" || f.write || f.plotFile != "" || len(args) != 1 {
					return usageError("--linklayer probes one HOST with ICMP echo: give exactly one HOST and no --iperf3, --write or --plot (got %d arguments)", len(args))
				}
				if f.v4 && f.v6 {
					return usageError("-4 and -6 exclude each other")
				}
				return runLinkLayer(ctx, env, fs, f.llo, f.section, args[0], f.jsonOut, f.quiet, f.v4, f.v6)
			}
			job, err := f.job(env, fs, args)
			if err != nil {
				return err
			}
			out, err := job.run(ctx, env, fs)
			if err != nil {
				if ctx.Err() != nil {
					return fmt.Errorf("interrupted: %w", err)
				}
				return err
			}
			res, q, cfgPath, werr := out.res, out.q, job.cfgPath, out.werr
			if f.plotFile != "" {
				if err := writeTradeoff(f.plotFile, res, q); err != nil {
					return err
				}
			}
			if f.jsonOut {
				enc := json.NewEncoder(env.Stdout)
				enc.SetIndent("", "  ")
				if err := enc.Encode(res); err != nil {
					return err
				}
				if werr != nil {
					return fmt.Errorf("--write: %w", werr)
				}
				return nil
			}
			if err := tune.WriteTable(env.Stdout, res); err != nil {
				return err
			}
			switch {
			case werr != nil:
				fmt.Fprintf(env.Stdout, "\nnot written, the shaping from before is back:\n%s", res.UCICommands(strings.TrimSuffix(filepath.Base(cfgPath), filepath.Ext(cfgPath)), q.Name))
				return fmt.Errorf("--write: %w", werr)
			case f.write && out.applied:
				fmt.Fprintf(env.Stdout, "\nwrote %s (section %s) and applied it\n", cfgPath, q.Name)
			case f.write:
				fmt.Fprintf(env.Stdout, "\nwrote %s (section %s; not enabled, so not applied)\n", cfgPath, q.Name)
			default:
				fmt.Fprintf(env.Stdout, "\nto keep these rates: sqm tune --write, or on OpenWrt\n%s", res.UCICommands(strings.TrimSuffix(filepath.Base(cfgPath), filepath.Ext(cfgPath)), q.Name))
			}
			if f.plotFile != "" {
				fmt.Fprintf(env.Stdout, "wrote %s\n", f.plotFile)
			}
			return nil
		},
	}
}

// tuneJob is one tune of a config section as the flags asked for it.
type tuneJob struct {
	cfgPath   string
	section   string          // "" = the only enabled one
	o         tune.Options    // the section's framing is filled in by run
	lo        tuneLinkOptions // q too; probe.Target once resolved
	probeHost string          // --detect: the host the echoes go to
	v4, v6    bool
	write     bool
}

// job checks the flags and arguments and builds the run they ask for.
// Everything it refuses is refused before any shaping changes.
func (f *tuneFlags) job(env *Env, fs *flag.FlagSet, args []string) (*tuneJob, error) {
	addr := ""
	switch {
	case f.iperf3Addr != "" && len(args) > 0:
		return nil, usageError("--iperf3 names the load server; give no HOST[:PORT] argument too (got %q)", args)
	case f.iperf3Addr == "" && len(args) != 1:
		return nil, usageError("tune needs exactly one server, HOST[:PORT] or --iperf3 HOST[:PORT]; got %d arguments", len(args))
	case f.iperf3Addr == "":
		addr = args[0]
	}
	if f.profile != "" && f.target != 0 {
		return nil, usageError("--profile and --target exclude each other")
	}
	o := tune.Options{Profile: f.profile, TargetMs: f.target, MaxWarmup: f.warmup, Budget: f.budget, Detect: f.detect}
	if f.budget == 0 {
		o.Budget = -1
	}
	if _, err := o.Target(); err != nil {
		return nil, usageError("%v", strings.TrimPrefix(err.Error(), "tune: "))
	}
	if f.point < time.Second || f.idle < time.Second {
		return nil, usageError("--duration %v / --idle %v: give at least 1s each", f.point, f.idle)
	}
	if f.budget < 0 {
		return nil, usageError("--budget %v: give a duration, or 0 for no limit", f.budget)
	}
	if f.warmup < 0 || f.warmup > 0 && f.point < f.warmup+2*time.Second {
		return nil, usageError("--warmup %v with --duration %v: the point must be at least 2s longer than its warm-up", f.warmup, f.point)
	}
	if f.streams < 1 || f.streams > 64 {
		return nil, usageError("--streams %d outside 1..64", f.streams)
	}
	if f.v4 && f.v6 {
		return nil, usageError("-4 and -6 exclude each other")
	}
	j := &tuneJob{cfgPath: flagString(fs, "config"), section: f.section, o: o, v4: f.v4, v6: f.v6, write: f.write,
		lo: tuneLinkOptions{point: f.point, idle: f.idle, quiet: f.quiet}}
	if f.detect {
		var err error
		if j.lo.probe, err = f.llo.probe(); err != nil {
			return nil, err
		}
		j.probeHost = addr
		if f.iperf3Addr != "" {
			j.probeHost = f.iperf3Addr
		}
	}
	if f.plotFile != "" && !plot.Supported(f.plotFile) {
		return nil, usageError("--plot %s: use a file name ending in %s", f.plotFile, plot.Formats)
	}
	secret, err := clientSecret(env, fs, "tune", f.secret, f.secretF, f.iperf3Addr)
	if err != nil {
		return nil, err
	}
	j.lo.bo = bloat.Options{Addr: addr, IPerf3: f.iperf3Addr, Secret: secret, NoICMP: f.noICMP, Streams: f.streams}
	if err := irttOptions(env, &j.lo.bo, f.irttAddr, f.irttHMAC, f.irttFile); err != nil {
		return nil, err
	}
	if f.v4 {
		j.lo.bo.Network = "tcp4"
	} else if f.v6 {
		j.lo.bo.Network = "tcp6"
	}
	if !f.quiet {
		j.o.Progress = func(s string) { fmt.Fprintf(env.Stderr, "sqm tune: %s\n", s) }
	}
	return j, nil
}

// tuneOutcome is what a tuneJob did.
type tuneOutcome struct {
	res     *tune.Result
	q       config.Queue // the section tuned
	applied bool         // written and applied (--write)
	werr    error        // --write failed; the shaping from before is back
}

// run tunes the section: loads the config, opens the link (which takes
// the state lock for the whole run), runs tune, and then either writes and
// applies the result (write) or puts back the shaping from before, also
// on an error and on cancel. A failed write is werr, with the result: the
// measurements still stand.
func (j *tuneJob) run(ctx context.Context, env *Env, fs *flag.FlagSet) (tuneOutcome, error) {
	// Tune rewrites the file: it wants all of it valid.
	f, err := loadConfig(env, j.cfgPath)
	if err != nil {
		return tuneOutcome{}, err
	}
	q, err := tuneSection(f.Queues, j.section)
	if err != nil {
		return tuneOutcome{}, err
	}
	if j.o.Detect {
		if j.lo.probe.Target, err = probeTarget(ctx, j.probeHost, j.v4, j.v6); err != nil {
			return tuneOutcome{q: q}, err
		}
	}
	o := j.o
	o.Linklayer, o.Overhead = q.LinkLayer, q.Overhead
	lo := j.lo
	lo.q = q
	link, err := openTuneLink(env, fs, lo)
	if err != nil {
		return tuneOutcome{q: q}, err
	}
	defer link.close()
	o.Now = link.now
	res, err := tune.Run(ctx, link, o)
	// Put back what was there, whatever happened, with the shaping's own
	// bookkeeping (not the run's cancelled context).
	out := tuneOutcome{res: res, q: q}
	if err == nil && j.write {
		if out.werr = writeTuned(j.cfgPath, q.Name, res); out.werr == nil {
			nq := q
			nq.Download, nq.Upload = uint64(res.DownloadKbit), uint64(res.UploadKbit)
			nq.LinkLayer, nq.Overhead = res.Linklayer, res.Overhead
			if q.Enabled {
				if aerr := link.apply(nq); aerr != nil {
					fmt.Fprintf(env.Stderr, "sqm tune: wrote %s but applying it failed: %v\n", j.cfgPath, aerr)
				} else {
					out.applied = true
				}
			}
		}
	}
	if !out.applied {
		if rerr := link.restore(); rerr != nil {
			err = errors.Join(err, fmt.Errorf("restoring the shaping of %s: %w", q.Interface, rerr))
		} else if !j.lo.quiet {
			fmt.Fprintf(env.Stderr, "sqm tune: shaping of %s restored\n", q.Interface)
		}
	}
	return out, err
}

// tuneSection is the section named, or the only enabled one.
func tuneSection(qs []config.Queue, name string) (config.Queue, error) {
	var names []string
	for _, q := range qs {
		if name != "" && q.Name == name {
			if q.Interface == "" {
				return q, fmt.Errorf("section %s (%s) names no interface", q.Name, q.Pos)
			}
			return q, nil
		}
		names = append(names, q.Name)
	}
	if name != "" {
		return config.Queue{}, usageError("no queue section %q in the config (it has: %s)", name, strings.Join(names, ", "))
	}
	eff, _ := config.Effective(qs)
	if len(eff) != 1 {
		return config.Queue{}, usageError("%d enabled queue sections; name one with --section (sections: %s)", len(eff), strings.Join(names, ", "))
	}
	return eff[0], nil
}

// writeTuned puts the rates into the config file, replacing it atomically
// with the same permissions.
func writeTuned(path, section string, res *tune.Result) error {
	src, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	out, err := res.WriteConfig(path, src, section)
	if err != nil {
		return err
	}
	mode := os.FileMode(0o644)
	if fi, err := os.Stat(path); err == nil {
		mode = fi.Mode().Perm()
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tune-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(out); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(mode); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

func writeTradeoff(path string, res *tune.Result, q config.Queue) error {
	title := fmt.Sprintf("sqm tune | %s (section %s) | %s %+d", q.Interface, q.Name, q.LinkLayer, q.Overhead)
	return plot.SaveTradeoff(path, tune.Tradeoff(res, title))
}

// tuneLink is the shaped interface and the tester: tune.Measurer plus
// what the command needs around a run.
type tuneLink interface {
	tune.Measurer
	now() time.Time
	apply(q config.Queue) error // shape as q says, recorded like a start
	restore() error             // the shaping from before the run
	close()
}

// tuneLinkOptions is what a tune link needs from the command line.
type tuneLinkOptions struct {
	q           config.Queue
	bo          bloat.Options
	point, idle time.Duration
	probe       linklayer.ProbeOptions // --detect's echoes (no Target: not asked for)
	quiet       bool
}

// openTuneLink opens the real link; tests replace it.
var openTuneLink = func(env *Env, fs *flag.FlagSet, o tuneLinkOptions) (tuneLink, error) {
	s, err := openSession(env, fs)
	if err != nil {
		return nil, err
	}
	prev, err := s.svc.Store.Load(o.q.Interface)
	if err != nil {
		s.close()
		return nil, err
	}
	return &realTuneLink{tuneLinkOptions: o, s: s, env: env, prev: prev, settle: 2 * time.Second}, nil
}

// realTuneLink shapes through the service (so state and `sqm status` stay
// true during the run) and measures with internal/bloat. It holds the
// state lock for the whole run: nothing else should change the shaping
// under a sweep.
type realTuneLink struct {
	tuneLinkOptions // q gets the framing tune chose, once it has
	s               *session
	env             *Env
	prev            *service.State // nil: the interface was not shaped
	settle          time.Duration
}

func (l *realTuneLink) DetectLinkLayer(ctx context.Context) (linklayer.Result, error) {
	if !l.probe.Target.IsValid() {
		return linklayer.Result{}, errors.New("no probe target")
	}
	_, res, err := probeLinkLayer(ctx, l.env, l.probe, l.quiet)
	return res, err
}

func (l *realTuneLink) SetFraming(ll string, overhead int) {
	l.q.LinkLayer, l.q.Overhead = ll, overhead
}

func (l *realTuneLink) now() time.Time { return time.Now() }
func (l *realTuneLink) close()         { l.s.close() }

func (l *realTuneLink) source() string {
	if l.prev != nil {
		return l.prev.Source
	}
	return l.s.source
}

func (l *realTuneLink) apply(q config.Queue) error {
	q.Enabled = true
	_, err := l.s.svc.Start([]config.Queue{q}, l.source(), service.PrepareOptions{Ifaces: []string{q.Interface}}, true)
	return err
}

func (l *realTuneLink) Shape(ctx context.Context, sh tune.Shaping) error {
	var err error
	if sh.DownKbit == 0 && sh.UpKbit == 0 {
		_, err = l.s.svc.Stop(service.StopOptions{Ifaces: []string{l.q.Interface}})
	} else {
		q := l.q
		q.Download, q.Upload = uint64(sh.DownKbit), uint64(sh.UpKbit)
		err = l.apply(q)
	}
	if err != nil {
		return err
	}
	// Let the queue the last point left drain before measuring.
	select {
	case <-time.After(l.settle):
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (l *realTuneLink) restore() error {
	if l.prev == nil {
		_, err := l.s.svc.Stop(service.StopOptions{Ifaces: []string{l.q.Interface}})
		return err
	}
	_, err := l.s.svc.Start([]config.Queue{l.prev.Queue}, l.prev.Source, service.PrepareOptions{Ifaces: []string{l.q.Interface}}, true)
	return err
}

func (l *realTuneLink) Idle(ctx context.Context) (stats.Summary, error) {
	o := l.bo
	o.Mode, o.Duration = bloat.ModeIdle, l.idle
	r, err := bloat.Run(ctx, o)
	if err != nil {
		return stats.Summary{}, err
	}
	return r.Idle, nil
}

func (l *realTuneLink) Load(ctx context.Context, d tune.Dir) (tune.Measurement, error) {
	o := l.bo
	o.Duration, o.Idle = l.point, -1
	switch d {
	case tune.Both:
		o.Mode = bloat.ModeRRUL
	case tune.Down:
		o.Mode, o.Only = bloat.ModeSpeedtest, bloat.DirDown
	case tune.Up:
		o.Mode, o.Only = bloat.ModeSpeedtest, bloat.DirUp
	}
	r, err := bloat.Run(ctx, o)
	if err != nil {
		return tune.Measurement{}, err
	}
	return tune.Measurement{DownKbit: r.DownloadMbps * 1000, UpKbit: r.UploadMbps * 1000, Samples: r.LoadedSamples()}, nil
}
