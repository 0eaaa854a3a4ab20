//go:build linux && !sqm_nolab

package cli

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"sqm/internal/config"
	"sqm/internal/json"
	"sqm/internal/lab"
	"sqm/internal/units"
	"sqm/internal/vm"
)

// labResultEnv names the file the lab writes its final output to when run
// inside the VM by `sqm lab --vm`: the VM's console mixes stdout and stderr,
// so the table or JSON comes back through the writable share instead.
const labResultEnv = "SQM_LAB_RESULT"

func cmdLab() *command {
	return &command{
		name:    "lab",
		summary: "emulated bloated link in namespaces; measures it without and with sqm",
		usage: "sqm lab [--down RATE] [--up RATE] [--rtt TIME] [--buffer PACKETS] [--linklayer ethernet|atm|ptm]\n" +
			"               [--overhead N] [--mode rrul|speedtest] [--duration D] [--config FILE | shaping flags]\n" +
			"               [--ecn] [--plot PREFIX] [--json] [--vm] [--tune [--target MS]]\n" +
			"       sqm lab [link flags] [shaping flags] --trace-down FILE --trace-up FILE [--autorate | --cake-autorate DIR] [--duration D]\n" +
			"               [--no-load] [--icmp-ahead] [--json] [--vm]",
		help: `Builds client -- router -- isp -- server network namespaces joined by veth
pairs. The isp namespace plays a bloated modem: netem with the line rate, half
the base RTT as delay each way and a deep FIFO (--buffer packets). With
--linklayer atm or ptm the emulated line charges ATM cells (53 bytes per 48)
or PTM 64b/65b framing plus --overhead bytes per packet, so link-layer
compensation can be seen to matter.

It then runs 'sqm test' from client to server without shaping, shapes the
router's WAN veth with sqm (default: piece_of_cake, cake at 90% of the
emulated rates with the link's framing, or --config FILE's first enabled
queue, or the shaping flags), measures again, and prints both side by side
with the grade, RPM and the throughput given up. Everything it creates is
named after its process id and removed on exit, Ctrl-C or error. Needs root.

The client and server keep Linux's default for ECN (accept it, never ask
for it), so the load is not ECN-capable and AQMs signal by dropping; with
--ecn both ask for it, and marks replace those drops.

With --trace-down and/or --trace-up FILE the modem's rate follows a capacity
trace instead (mahimahi's format: one millisecond time per line, each a
1500-byte delivery opportunity; or steps: 'SECONDS RATE' lines ending in
'SECONDS end'; both loop), changed every 100 ms with the deep FIFO kept; a
direction without a trace keeps its --down/--up rate. The run loads both
directions at once (rrul) for --duration (default: the longer trace), with
ground-truth UDP probes each way that no controller sees, and reports the
induced one-way delay (p50/p95/p99), utilisation (goodput / capacity) and,
second by second in --json, capacity, shaping rate, goodput and delay.
Shaping is fixed (the shaping flags) unless --autorate is given (sqm's own
daemon, run in the router namespace as a router runs it), or
--cake-autorate DIR, which runs lynxthecat/cake-autorate from a checkout in
the router namespace with the same rate ranges and reflector, so that the
two controllers compare on one trace (cpu_seconds and max_rss_kb: the
controller's process, as the kernel accounted it). --no-load leaves the link idle (the
controller's cost when nothing is sent: cpu_seconds); --icmp-ahead gives
ICMP its own queue ahead of the modem's FIFO, both ways, as some ISPs
treat ICMP apart, so that pings no longer see the bloat.

This machine's kernel may lack netem or cake; then the lab says which module
is missing, and --vm runs the whole lab inside the project's qemu VM
(Debian's kernel) instead: that is what 'make demo' does.

Example:

  $ sudo sqm lab --vm
  $ sudo sqm lab --down 1mbit --up 1mbit --linklayer atm --overhead 44 --vm
  $ sudo sqm lab --trace-down steps.txt --shape-down 9mbit --json --vm`,
		flags: func(fs *flag.FlagSet) {
			fs.String("down", "20mbit", "emulated `rate` towards the client, "+rateHelp)
			fs.String("up", "5mbit", "emulated `rate` towards the server, "+rateHelp)
			units.DurationFlag(fs, "rtt", 20*time.Millisecond, "base round-trip `time` of the emulated line (half each way)")
			fs.Uint("buffer", 1000, "modem FIFO length in `packets` (the bloat)")
			fs.String("linklayer", "ethernet", "framing the emulated line charges: ethernet, atm or ptm")
			fs.Int("overhead", -1, "per-packet overhead in `bytes` the line charges (-1: 14 ethernet, 44 atm, 30 ptm)")
			def := lab.DefaultOptions()
			fs.String("mode", def.Mode, "test mode: speedtest (download, then upload) or rrul (both at once)")
			units.DurationFlag(fs, "duration", def.Duration, "load `time` of each direction (speedtest) or of the rrul load")
			fs.String("config", "", "shape with the first enabled queue of this UCI `file` (its interface is replaced)")
			fs.String("script", "piece_of_cake", "shaping: recipe ("+strings.Join(config.Scripts(), ", ")+")")
			fs.String("qdisc", "cake", "shaping: leaf qdisc (cake, fq_codel, ...)")
			fs.String("shape-down", "", "shaping: ingress `rate`, "+rateHelp+" (default 90% of --down)")
			fs.String("shape-up", "", "shaping: egress `rate`, "+rateHelp+" (default 90% of --up)")
			fs.String("shape-linklayer", "", "shaping: sqm linklayer none, ethernet or atm (default: the emulated link's)")
			fs.Int("shape-overhead", -1, "shaping: overhead `bytes` (default: the emulated link's)")
			fs.String("iqdisc-opts", "", "shaping: extra ingress qdisc options (tc syntax)")
			fs.String("eqdisc-opts", "", "shaping: extra egress qdisc options (tc syntax)")
			fs.String("plot", "", "write `PREFIX`-before.svg and PREFIX-after.svg (with --tune: PREFIX-tune.svg, the trade-off curve; with a trace: PREFIX-trace.svg, rate, capacity and delay over time)")
			fs.Bool("ecn", false, "client and server ask for ECN on their TCP connections (net.ipv4.tcp_ecn=1; default: Linux's 2, accept only)")
			fs.Bool("json", false, `print {"before": RESULT, "after": RESULT, "link": ..., "shaping": ...}`)
			fs.Bool("vm", false, "run the whole lab inside the project's qemu VM (for kernels without netem/cake)")
			fs.Bool("tune", false, "run 'sqm tune' on the emulated link instead (each rate loaded for --duration, default 6s here), then the oracle's 1 % sweep and a test at the chosen rates")
			fs.Float64("target", 0, "with --tune: induced-latency target in `ms` (default: the balanced profile's)")
			fs.String("trace-down", "", "the modem's download capacity follows this trace `file` (mahimahi or steps format)")
			fs.String("trace-up", "", "the modem's upload capacity follows this trace `file`")
			fs.Bool("autorate", false, "with a trace: sqm's autorate moves the shaping rates (default: fixed shaping)")
			fs.String("cake-autorate", "", "with a trace: lynxthecat/cake-autorate from this checkout `dir` moves the shaping rates instead (bash 5, fping; for comparing controllers)")
			fs.Bool("no-load", false, "with a trace: no rrul load, only the lab's own probes: what the controller does and costs (cpu_seconds) on an idle link")
			fs.Bool("icmp-ahead", false, "with a trace: the modem queues ICMP apart, ahead of its FIFO, both ways (as ISPs that treat ICMP apart do): pings stop seeing the bloat")
		},
		run: runLab,
	}
}

func runLab(ctx context.Context, env *Env, fs *flag.FlagSet, args []string) error {
	if len(args) > 0 {
		return usageError("lab takes no arguments, got %q", strings.Join(args, " "))
	}
	get := func(name string) flag.Getter { return fs.Lookup(name).Value.(flag.Getter) }
	str := func(name string) string { return get(name).Get().(string) }
	if get("vm").Get().(bool) {
		return runLabInVM(ctx, env, fs)
	}
	opts, err := labOptions(fs, str)
	if err != nil {
		return err
	}
	if str("trace-down") != "" || str("trace-up") != "" {
		return runLabTrace(ctx, env, fs, opts)
	}
	for _, c := range []string{"autorate", "cake-autorate", "icmp-ahead", "no-load"} {
		if v := get(c).Get(); v != false && v != "" {
			return usageError("--%s needs --trace-down or --trace-up: it works on a trace run", c)
		}
	}
	if get("tune").Get().(bool) {
		return runLabTune(ctx, env, fs, opts)
	}
	start := time.Now()
	opts.Progress = func(phase string) {
		fmt.Fprintf(env.Stderr, "[%6.1fs] %s\n", time.Since(start).Seconds(), phase)
	}
	rep, err := lab.Run(ctx, opts)
	if err != nil {
		return err
	}
	if p := str("plot"); p != "" {
		if err := rep.WritePlots(p); err != nil {
			return err
		}
		opts.Progress("wrote " + p + "-before.svg and " + p + "-after.svg")
	}
	return labOutput(env, get("json").Get().(bool), rep)
}

// labOutput prints rep as JSON or text, to the VM harness's result file
// when run inside the VM.
func labOutput(env *Env, asJSON bool, rep interface{ WriteText(io.Writer) error }) error {
	out := env.Stdout
	if f := env.Getenv(labResultEnv); f != "" {
		fh, err := os.Create(f)
		if err != nil {
			return fmt.Errorf("lab: write result for the VM harness: %w", err)
		}
		defer fh.Close()
		out = fh
	}
	if asJSON {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	return rep.WriteText(out)
}

// labOptions turns the flags into lab.Options, checking each value.
func labOptions(fs *flag.FlagSet, str func(string) string) (lab.Options, error) {
	get := func(name string) any { return fs.Lookup(name).Value.(flag.Getter).Get() }
	var o lab.Options
	link := lab.DefaultLink()
	var err error
	if link.DownBits, err = rateFlag("down", str("down")); err != nil {
		return o, err
	}
	if link.UpBits, err = rateFlag("up", str("up")); err != nil {
		return o, err
	}
	link.RTT = get("rtt").(time.Duration)
	link.Buffer = uint32(get("buffer").(uint))
	link.LinkLayer = str("linklayer")
	link.ICMPAhead = get("icmp-ahead").(bool)
	link.Overhead = get("overhead").(int)
	if link, err = link.Resolve(); err != nil {
		return o, usageError("%v", err)
	}
	o.Link = link
	o.Mode = str("mode")
	if o.Mode != "rrul" && o.Mode != "speedtest" {
		return o, usageError("--mode %q: use rrul or speedtest", o.Mode)
	}
	o.Duration = get("duration").(time.Duration)
	if o.Duration < 2*time.Second || o.Duration > 10*time.Minute {
		return o, usageError("--duration %v: give 2s to 10m", o.Duration)
	}
	s := lab.Shaping{
		ConfigFile: str("config"),
		Script:     str("script"),
		Qdisc:      str("qdisc"),
		LinkLayer:  str("shape-linklayer"),
		IQdiscOpts: str("iqdisc-opts"),
		EQdiscOpts: str("eqdisc-opts"),
	}
	if v := get("shape-overhead").(int); v >= 0 {
		s.Overhead = &v
	}
	if v := str("shape-down"); v != "" {
		if s.DownBits, err = rateFlag("shape-down", v); err != nil {
			return o, err
		}
	}
	if v := str("shape-up"); v != "" {
		if s.UpBits, err = rateFlag("shape-up", v); err != nil {
			return o, err
		}
	}
	if s.ConfigFile != "" {
		conflict := ""
		fs.Visit(func(f *flag.Flag) {
			switch f.Name {
			case "script", "qdisc", "shape-down", "shape-up", "shape-linklayer", "shape-overhead", "iqdisc-opts", "eqdisc-opts":
				conflict = f.Name
			}
		})
		if conflict != "" {
			return o, usageError("--config and --%s both say how to shape: give one", conflict)
		}
	}
	o.Shaping = s
	o.ECN = get("ecn").(bool)
	return o, nil
}

// runLabInVM re-runs this binary inside the project's VM with the same flags
// minus --vm. The binary and any --config file are copied into the VM's
// writable share (host /tmp, where `go run` builds, is not visible inside),
// and plots and the result come back through it.
func runLabInVM(ctx context.Context, env *Env, fs *flag.FlagSet) error {
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("lab --vm: find this binary to run it in the VM: %w", err)
	}
	share, err := os.MkdirTemp("", "sqm-lab-vm-")
	if err != nil {
		return fmt.Errorf("lab --vm: %w", err)
	}
	defer os.RemoveAll(share)
	if err := copyFile(exe, filepath.Join(share, "sqm"), 0o755); err != nil {
		return fmt.Errorf("lab --vm: copy the binary into the VM share: %w", err)
	}
	inner := []string{vm.GuestOutDir + "/sqm", "lab"}
	var plot string
	var shares []string
	fs.Visit(func(f *flag.Flag) {
		switch f.Name {
		case "vm":
		case "plot":
			plot = f.Value.String()
			inner = append(inner, "--plot="+vm.GuestOutDir+"/plot")
		case "config":
			inner = append(inner, "--config="+vm.GuestOutDir+"/config")
		case "cake-autorate":
			// read in place through a share of its own (the host's /tmp,
			// where checkouts often are, is not visible inside)
			dir := f.Value.String()
			if abs, err := filepath.Abs(dir); err == nil {
				dir = abs
			}
			shares = append(shares, dir)
			inner = append(inner, "--cake-autorate="+dir)
		case "trace-down", "trace-up":
			// in a directory of its own, under its own name, which the
			// report gives as the trace's file
			inner = append(inner, "--"+f.Name+"="+vm.GuestOutDir+"/"+f.Name+"/"+filepath.Base(f.Value.String()))
		default:
			inner = append(inner, "--"+f.Name+"="+f.Value.String())
		}
	})
	for _, name := range []string{"config", "trace-down", "trace-up"} {
		f := fs.Lookup(name).Value.String()
		if f == "" {
			continue
		}
		to := filepath.Join(share, name)
		if name != "config" {
			if err := os.Mkdir(to, 0o755); err != nil {
				return fmt.Errorf("lab --vm: %w", err)
			}
			to = filepath.Join(to, filepath.Base(f))
		}
		if err := copyFile(f, to, 0o644); err != nil {
			return fmt.Errorf("lab --vm: copy --%s into the VM share: %w", name, err)
		}
	}
	d := fs.Lookup("duration").Value.(flag.Getter).Get().(time.Duration)
	timeout := 4*d + 3*time.Minute
	if fs.Lookup("trace-down").Value.String()+fs.Lookup("trace-up").Value.String() != "" {
		// One load of the traces' length (or --duration), checked here
		// so a bad trace fails before the VM boots.
		var o lab.Options
		o.Duration = d
		if _, err := labTraces(fs, &o); err != nil {
			return err
		}
		timeout = 2*o.Duration + 3*time.Minute
	}
	if fs.Lookup("tune").Value.String() == "true" {
		// tune and the oracle: about 60 loaded points, each with a
		// second to settle and the tester's setup.
		timeout = 80*labTunePoint(fs) + 4*lab.TuneAfter + 5*time.Minute
	}
	code, err := vm.Run(ctx, vm.Config{
		Command: inner,
		Env:     []string{labResultEnv + "=" + vm.GuestOutDir + "/result"},
		OutDir:  share,
		Shares:  shares,
		Stdout:  env.Stderr,
		// Kernel warnings and stacks among the lab's progress lines: if
		// the guest locks up, the run ends with the evidence (see
		// internal/vm's kernelCmdline).
		KernelArgs: vm.VerboseKernelArgs,
		// Two tests of 2×d each (speedtest runs the directions one after
		// the other) plus idle phases, setup and boot: about 4×d + 1 min on
		// a quiet host. A guest soft lockup panics the VM within about
		// 20 s (see internal/vm); this bound is for a hang the lockup
		// detector does not see (a wedged command).
		Timeout: timeout,
	})
	if err != nil {
		return fmt.Errorf("lab --vm: %w", err)
	}
	if code != 0 {
		return fmt.Errorf("lab --vm: the lab inside the VM failed (exit status %d); its output is above", code)
	}
	res, err := os.ReadFile(filepath.Join(share, "result"))
	if err != nil {
		return fmt.Errorf("lab --vm: the lab inside the VM left no result: %w", err)
	}
	if plot != "" {
		plots := []string{"-before.svg", "-after.svg"}
		if fs.Lookup("trace-down").Value.String()+fs.Lookup("trace-up").Value.String() != "" {
			plots = []string{"-trace.svg"}
		}
		if fs.Lookup("tune").Value.String() == "true" {
			plots = []string{"-tune.svg"}
		}
		for _, s := range plots {
			if err := copyFile(filepath.Join(share, "plot"+s), plot+s, 0o644); err != nil {
				return fmt.Errorf("lab --vm: fetch plot: %w", err)
			}
		}
	}
	_, err = env.Stdout.Write(res)
	return err
}

func copyFile(from, to string, perm os.FileMode) error {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, perm)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
