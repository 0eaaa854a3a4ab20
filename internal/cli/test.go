//go:build !sqm_notest

package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"sqm/internal/bloat"
	"sqm/internal/plot"
	"sqm/internal/report"
	"sqm/internal/units"
)

func cmdTest() *command {
	var (
		mode      string
		duration  time.Duration
		idle      time.Duration
		interval  time.Duration
		streams   int
		v4, v6    bool
		secret    string
		secretF   string
		jsonOut   bool
		flentFile string
		plotFile  string
		quiet     bool
		noICMP    bool
		rpmT      rpmTestFlags
		irttAddr  string
		irttHMAC  string
		irttFile  string
	)
	var iperf3Addr string  // --iperf3: the load goes to this iperf3 server
	var netperfAddr string // --netperf: the load goes to this netserver
	return &command{
		name:    "test",
		summary: "measure bufferbloat against an 'sqm server', an iperf3 server or a netperf server: goodput, latency idle and under load, grade",
		usage:   "sqm test [--mode rrul|speedtest|idle] [--duration D] [--json] [--flent F.flent.gz] [--plot F.svg|F.png] HOST[:PORT] | --iperf3 HOST[:PORT] | --netperf HOST[:PORT]",
		help: fmt.Sprintf(`Loads the path to an 'sqm server' (default port %d) and measures latency
before, during and after the load, like flent's RRUL or betterspeedtest.

Modes:
  rrul       4 TCP downloads and 4 uploads at once, marked CS0, CS1, CS5, EF;
             UDP probes (EF, BE, CS1) and ICMP echo throughout; idle latency
             for --idle before and after the load (default)
  speedtest  --streams downloads for --duration, then as many uploads
  idle       latency only, for --duration (default 10s)

The summary gives goodput, latency (min, 10th percentile, median, mean, 90th
and 99th percentile, max, loss) idle and loaded, the induced latency, its
DSLReports grade (A+ < 5 ms ... F >= 400 ms) and the responsiveness in RPM.
ICMP needs root or net.ipv4.ping_group_range; without it the test goes on
with UDP probes.

--irtt HOST[:PORT] sends the latency probes (UDP and ICMP) to an irtt server,
such as flent's public ones, while the load still goes to the server named
last. irtt servers return their receive and send times: RTTs then exclude
the server's own delay, and one-way delays are given, with a note when the
two clocks are evidently not synchronised (the induced one-way delays, loaded
minus idle, do not depend on the clocks). An irtt server that wants an HMAC
needs its key: --irtt-hmac-file, $SQM_IRTT_HMAC, or --irtt-hmac.

--rpm URL measures responsiveness instead, the IETF draft's way, against
any server that publishes its /.well-known/nq configuration (Apple's, a
self-hosted one, 'sqm server --rpm'): HTTP/2 load both ways (--rpm-load)
with probes on new connections (TCP, TLS, HTTP times) and on the loaded
ones, until stable or --duration (default 20s). A self-signed server needs
--insecure or --ca FILE. An 'sqm server --rpm' with a secret serves only
under a path derived from it: give the secret as for the bufferbloat test
(--secret-file, SQM_SERVER_SECRET) and the path is added; the output shows
it as /(secret).

--iperf3 HOST[:PORT] puts the load through a stock iperf3 server (port 5201)
instead of an 'sqm server': each load phase is one iperf3 test (speedtest:
a reverse test, then a normal one; rrul: a bidirectional test with 4 streams
each way). Upload goodput is what the server reports it received. An iperf3
server answers no latency probes, so they go as ICMP echo to the same host
(or to --irtt). It runs one test at a time and refuses others as busy; it
marks all streams of a test alike, so RRUL's download markings apply only to
our ACKs.

--netperf HOST[:PORT] puts the load through a stock netperf server,
netserver (port 12865), as flent's RRUL and betterspeedtest do, e.g. the
community's public flent servers: each stream is one netperf test on its own
control connection, TCP_MAERTS for a download and TCP_STREAM for an upload,
and the server marks its side of each stream with the stream's DSCP, as
flent's netperf -Y does. Upload goodput is what the server reports it
received. The UDP probes are netperf UDP_RR tests, one per marking, and ICMP
echo goes to the same host; --irtt sends the UDP probes to an irtt server
instead (flent's public servers run both). A secret (--secret-file,
SQM_SERVER_SECRET) is sent as netserver's passphrase (-Z), in clear text.
netserver must let its data ports (TCP and UDP) through any firewall.

Example:

  $ sqm test --duration 30s --plot run.svg --flent run.flent.gz 192.0.2.7
  $ flent -i run.flent.gz -p all_scaled -o run.png`, bloat.DefaultPort),
		flags: func(fs *flag.FlagSet) {
			fs.StringVar(&mode, "mode", "rrul", "test `shape`: rrul, speedtest or idle")
			units.DurationVar(fs, &duration, "duration", 0, "length of each load phase (default 60s; idle mode: the whole run, default 10s)")
			units.DurationVar(fs, &idle, "idle", 5*time.Second, "idle latency measured before and after the load")
			units.DurationVar(fs, &interval, "interval", 200*time.Millisecond, "time between probes of each kind, and the throughput sampling step")
			fs.IntVar(&streams, "streams", 5, "TCP streams per direction in speedtest mode")
			fs.BoolVar(&v4, "4", false, "use IPv4 only")
			fs.BoolVar(&v6, "6", false, "use IPv6 only")
			clientSecretFlags(fs, &secret, &secretF)
			fs.BoolVar(&jsonOut, "json", false, "print the result as JSON instead of text")
			fs.StringVar(&flentFile, "flent", "", "also write the run as a flent data `file` (.flent.gz; rrul mode)")
			fs.StringVar(&plotFile, "plot", "", "also draw the run to `file` (.svg or .png)")
			fs.BoolVar(&quiet, "quiet", false, "no progress display")
			fs.BoolVar(&noICMP, "no-icmp", false, "do not send ICMP echo probes")
			fs.StringVar(&iperf3Addr, "iperf3", "", "put the load through this iperf3 server, `HOST[:PORT]` (port 5201), instead of an 'sqm server'")
			fs.StringVar(&netperfAddr, "netperf", "", "put the load through this netperf server (netserver), `HOST[:PORT]` (port 12865), instead of an 'sqm server'")
			rpmT.register(fs)
			fs.StringVar(&irttAddr, "irtt", "", "send the latency probes to this irtt server, `HOST[:PORT]` (port 2112), instead of the load server")
			fs.StringVar(&irttHMAC, "irtt-hmac", "", "HMAC `key` of the irtt server (0x for hex, as irtt takes it); visible in ps: prefer --irtt-hmac-file or $SQM_IRTT_HMAC")
			fs.StringVar(&irttFile, "irtt-hmac-file", "", "read the irtt server's HMAC key from `file` (first line)")
		},
		run: func(ctx context.Context, env *Env, fs *flag.FlagSet, args []string) error {
			if done, err := rpmT.run(ctx, env, fs, args, duration, v4, v6, jsonOut, quiet, secret, secretF); done {
				return err
			}
			addr := ""
			switch {
			case iperf3Addr != "" && netperfAddr != "":
				return usageError("--iperf3 and --netperf each name the load server; give one")
			case iperf3Addr != "" && len(args) > 0:
				return usageError("--iperf3 names the load server; give no HOST[:PORT] argument too (got %q)", args)
			case netperfAddr != "" && len(args) > 0:
				return usageError("--netperf names the load server; give no HOST[:PORT] argument too (got %q)", args)
			case iperf3Addr == "" && netperfAddr == "" && len(args) != 1:
				return usageError("test needs exactly one server, HOST[:PORT], --iperf3 HOST[:PORT] or --netperf HOST[:PORT]; got %d arguments", len(args))
			case iperf3Addr == "" && netperfAddr == "":
				addr = args[0]
			}
			secret, err := clientSecret(env, fs, "test", secret, secretF, iperf3Addr)
			if err != nil {
				return err
			}
			o := bloat.Options{Addr: addr, IPerf3: iperf3Addr, NetPerf: netperfAddr, Mode: bloat.Mode(mode), Duration: duration, Interval: interval,
				Streams: streams, Secret: secret, NoICMP: noICMP, Idle: idle}
			if idle == 0 {
				o.Idle = -1
			}
			if err := irttOptions(env, &o, irttAddr, irttHMAC, irttFile); err != nil {
				return err
			}
			switch {
			case v4 && v6:
				return usageError("-4 and -6 exclude each other")
			case v4:
				o.Network = "tcp4"
			case v6:
				o.Network = "tcp6"
			}
			switch o.Mode {
			case bloat.ModeRRUL, bloat.ModeSpeedtest, bloat.ModeIdle:
			default:
				return usageError("unknown --mode %q; use rrul, speedtest or idle", mode)
			}
			if iperf3Addr != "" && o.Mode == bloat.ModeIdle {
				return usageError("--iperf3 with --mode idle: idle mode puts no load on the link, so it needs no iperf3 server")
			}
			if netperfAddr != "" && o.Mode == bloat.ModeIdle {
				return usageError("--netperf with --mode idle: idle mode puts no load on the link, so it needs no netperf server")
			}
			if flentFile != "" && o.Mode != bloat.ModeRRUL {
				return usageError("--flent needs --mode rrul (flent's plots are for RRUL's series)")
			}
			if plotFile != "" {
				if !plot.Supported(plotFile) {
					return usageError("--plot %s: use a file name ending in %s", plotFile, plot.Formats)
				}
			}
			if streams < 1 || streams > 64 {
				return usageError("--streams %d outside 1..64", streams)
			}
			status := newStatus(env, quiet)
			if status.live {
				o.Progress = status.progress
			}
			o.Logf = status.logf
			res, err := bloat.Run(ctx, o)
			status.clear()
			if err != nil {
				if ctx.Err() != nil && errors.Is(err, context.Canceled) {
					return errors.New("interrupted; no result (the run must finish to be summarised)")
				}
				return err
			}
			if flentFile != "" {
				if err := report.WriteFlentFile(flentFile, res); err != nil {
					return err
				}
			}
			if plotFile != "" {
				if err := writePlot(plotFile, res); err != nil {
					return err
				}
			}
			if jsonOut {
				return report.JSON(env.Stdout, res)
			}
			if err := report.Text(env.Stdout, res); err != nil {
				return err
			}
			for _, f := range []string{flentFile, plotFile} {
				if f != "" {
					fmt.Fprintf(env.Stdout, "\n  Wrote %s", f)
				}
			}
			if flentFile != "" || plotFile != "" {
				fmt.Fprintln(env.Stdout)
			}
			return nil
		},
	}
}

func writePlot(path string, r *bloat.Result) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("plot: %w", err)
	}
	if err := plot.Write(f, path, r); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// status shows a run's progress on stderr as one line rewritten in place,
// with the run's notes printed above it, when stderr is a terminal that
// understands that (\r and ESC [K; TERM=dumb does not). Anything else, a
// file or a pipe, gets the notes as plain lines and never an escape code or
// carriage return: logs and CI output must stay readable. Progress goes to
// stderr, not stdout, so the result on stdout (text or --json) is the same
// whether or not a person watches. Progress and notes come from different
// goroutines, hence the lock.
type status struct {
	mu    sync.Mutex
	w     io.Writer
	quiet bool // --quiet: neither progress nor notes
	live  bool // w is a capable terminal: show progress
	shown bool // a progress line is on screen
}

func newStatus(env *Env, quiet bool) *status {
	live := !quiet && isTerminal(env.Stderr) && env.Getenv("TERM") != "dumb"
	return &status{w: env.Stderr, quiet: quiet, live: live}
}

func (s *status) progress(p bloat.Progress) {
	s.mu.Lock()
	defer s.mu.Unlock()
	fmt.Fprintf(s.w, "\r\033[K%-11s %5.1f/%.1fs  down %8.2f Mbit/s  up %8.2f Mbit/s  latency %7.2f ms",
		p.Phase, p.Elapsed.Seconds(), p.Total.Seconds(), p.DownloadMbps, p.UploadMbps, p.LatencyMs)
	s.shown = true
}

func (s *status) logf(format string, a ...any) {
	if s.quiet {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.clearLocked()
	fmt.Fprintf(s.w, "sqm test: "+format+"\n", a...)
}

// clear removes the progress line, if one is shown.
func (s *status) clear() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.clearLocked()
}

func (s *status) clearLocked() {
	if s.shown {
		fmt.Fprint(s.w, "\r\033[K")
		s.shown = false
	}
}
