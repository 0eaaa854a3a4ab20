// Command autoratebench runs issue 26's side-by-side comparison: on each
// capacity trace, in the VM lab (`sqm lab --vm --trace-down ... --json`),
// a sweep of fixed shaping rates, sqm's autorate and lynxthecat's
// cake-autorate from a checkout it is given, and prints one table per
// trace: induced one-way delay p50/p95/p99 per direction (the lab's
// ground-truth probes, which no controller sees), utilisation (goodput /
// trace capacity), rate changes per minute, and the controller's CPU
// seconds and peak RSS as the kernel accounted them (wait4 of the
// controller's process: `sqm daemon`, whole; cake-autorate's bash and
// everything it waited for).
//
// It is a bench (make bench-autorate CAKE_AUTORATE=DIR [MAHIMAHI=DIR]),
// not a test: each run boots the VM and loads the link for the trace's
// length. The JSON of every run and its plot (NAME-CONTROLLER-trace.svg:
// rate, capacity and delay over time) stay in -out.
//
//	go run ./tools/autoratebench -sqm bin/sqm -cake-autorate DIR [-mahimahi DIR] [-out DIR] [-traces REGEX] [-sqm-targets MS,...] [-icmp-ahead] [-no-load] [-judge]
//
// The download follows the trace; the upload is the line's fixed 2 Mbit/s
// with both controllers' upload range pinned to its base, so the numbers
// are the download controller's. The rates are what the emulated VM
// carries (about 8 Mbit/s of rrul): mahimahi's cellular traces are used
// where their mean fits (AT&T LTE 2016, Verizon LTE short, their first
// minute), the synthetic ones are scaled to 8 Mbit/s.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"sqm/internal/lab"
)

type traceCase struct {
	name, file string
	mahimahi   bool   // file is relative to -mahimahi
	duration   string // "" = the trace's length
}

var traces = []traceCase{
	{name: "step-8-2-8", file: "internal/lab/testdata/autorate-step-8-2-8.steps"},
	{name: "stall-2s", file: "tools/autoratebench/traces/stall-2s-8.steps"},
	{name: "stall-15s", file: "tools/autoratebench/traces/stall-15s-8.steps"},
	{name: "att-lte-2016", file: "ATT-LTE-driving-2016.down", mahimahi: true, duration: "60s"},
	{name: "verizon-lte-short", file: "Verizon-LTE-short.down", mahimahi: true, duration: "60s"},
}

// fixedFractions are the fixed download shaping rates of the sweep, as
// fractions of the line's nominal 8 Mbit/s (what sqm lab's --down says;
// the base rate of both controllers is 90 % of it). The lowest is under
// the step trace's 2 Mbit/s low (shaping at the capacity itself queues in
// the modem: framing the emulated line counts and cake's overhead not).
var fixedFractions = []float64{0.2, 0.5, 0.9}

const lineDown, lineUp = 8000, 2000 // kbit/s

// The UCI section both controllers run from: the lab replaces the
// interface; the ranges are the plan's (download 1 Mbit/s to 2 x base, the
// upload pinned to its base).
const configText = `config queue 'wan'
	option enabled '1'
	option interface 'wan0'
	option download '7200'
	option upload '1800'
	option qdisc 'cake'
	option script 'piece_of_cake'
	option linklayer 'ethernet'
	option overhead '14'
	option autorate '1'
	option autorate_download_min '1000'
	option autorate_download_max '14400'
	option autorate_upload_min '1800'
	option autorate_upload_max '1800'
`

type run struct {
	controller string // fixed-RATE, sqm-autorate, cake-autorate
	rep        lab.TraceReport
}

func main() {
	var (
		sqm      = flag.String("sqm", "bin/sqm", "the sqm binary")
		cake     = flag.String("cake-autorate", "", "a lynxthecat/cake-autorate checkout")
		mahi     = flag.String("mahimahi", "", "mahimahi's traces/ directory (its cellular traces are skipped without it)")
		out      = flag.String("out", "bench-out/autorate", "where the JSON and plots go")
		only     = flag.String("traces", "", "only the traces whose name matches this regexp")
		judge    = flag.Bool("judge", false, "only print the tables from the JSON already in -out")
		verbose  = flag.Bool("v", false, "show the lab's progress")
		noFixed  = flag.Bool("no-fixed", false, "skip the fixed-rate sweep")
		fixedArg = flag.String("fixed", "", "the sweep's fixed rates as comma-separated fractions of 8 Mbit/s (default 0.2,0.5,0.9)")
		controls = flag.String("controllers", "sqm,cake", "which controllers to run, comma-separated: sqm, cake (none: only the fixed sweep)")
		noLoad   = flag.Bool("no-load", false, "run the controllers without load (sqm lab --no-load): their cost on an idle link; no fixed sweep")
		dur      = flag.Duration("duration", 0, "run every trace this long (the trace loops), e.g. 100s for -no-load past the controllers' 60 s idle thresholds; default each trace's own")
		icmp     = flag.Bool("icmp-ahead", false, "every run with ICMP queued ahead of the modem's FIFO (sqm lab --icmp-ahead): pings do not see the bloat")
		targets  = flag.String("sqm-targets", "", "besides sqm's default, one sqm run per delay target (autorate_target, ms), comma-separated, e.g. 30 for cake-autorate's own 30 ms threshold")
	)
	flag.Parse()
	want := map[string]bool{}
	for _, c := range strings.Split(*controls, ",") {
		switch c = strings.TrimSpace(c); c {
		case "sqm", "cake":
			want[c] = true
		case "", "none":
		default:
			fatalf("-controllers: unknown %q (want sqm, cake or none)", c)
		}
	}
	if !*judge && *cake == "" && want["cake"] {
		fatalf("give -cake-autorate DIR (a lynxthecat/cake-autorate checkout), or -controllers sqm")
	}
	if err := os.MkdirAll(*out, 0o755); err != nil {
		fatalf("%v", err)
	}
	cfg := filepath.Join(*out, "autorate.uci")
	if !*judge {
		if err := os.WriteFile(cfg, []byte(configText), 0o644); err != nil {
			fatalf("%v", err)
		}
	}
	if *fixedArg != "" {
		fixedFractions = nil
		for _, f := range strings.Split(*fixedArg, ",") {
			v, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
			if err != nil || v <= 0 || v > 2 {
				fatalf("-fixed %q: want fractions of the 8 Mbit/s line in (0, 2]", f)
			}
			fixedFractions = append(fixedFractions, v)
		}
	}
	// sqmTargets are the extra runs' targets; targetConfig their UCI files.
	var sqmTargets []string
	targetConfig := func(t string) string { return filepath.Join(*out, "autorate-"+t+"ms.uci") }
	if *targets != "" {
		for _, t := range strings.Split(*targets, ",") {
			t = strings.TrimSpace(t)
			if v, err := strconv.Atoi(t); err != nil || v < 1 || v > 1000 {
				fatalf("-sqm-targets %q: want whole milliseconds, 1 to 1000", t)
			}
			sqmTargets = append(sqmTargets, t)
			if !*judge {
				if err := os.WriteFile(targetConfig(t), []byte(configText+"\toption autorate_target '"+t+"'\n"), 0o644); err != nil {
					fatalf("%v", err)
				}
			}
		}
	}
	var re *regexp.Regexp
	if *only != "" {
		re = regexp.MustCompile(*only)
	}
	for _, tc := range traces {
		if re != nil && !re.MatchString(tc.name) {
			continue
		}
		file := tc.file
		if tc.mahimahi {
			if *mahi == "" {
				fmt.Printf("%s: skipped (no -mahimahi DIR)\n\n", tc.name)
				continue
			}
			file = filepath.Join(*mahi, tc.file)
		}
		type job struct {
			name string
			args []string
		}
		var jobs []job
		if !*noFixed && !*noLoad {
			for _, f := range fixedFractions {
				k := int(f * lineDown)
				jobs = append(jobs, job{fmt.Sprintf("fixed-%d", k), []string{"--shape-down", fmt.Sprintf("%dkbit", k), "--shape-up", fmt.Sprintf("%dkbit", lineUp*9/10)}})
			}
		}
		if want["sqm"] {
			jobs = append(jobs, job{"sqm-autorate", []string{"--config", cfg, "--autorate"}})
			for _, t := range sqmTargets {
				jobs = append(jobs, job{"sqm-autorate-" + t + "ms", []string{"--config", targetConfig(t), "--autorate"}})
			}
		}
		if want["cake"] {
			jobs = append(jobs, job{"cake-autorate", []string{"--config", cfg, "--cake-autorate", *cake}})
		}
		var runs []run
		for _, j := range jobs {
			js := filepath.Join(*out, tc.name+"-"+j.name+".json")
			if !*judge {
				args := []string{"lab", "--vm", "--json", "--down", fmt.Sprintf("%dkbit", lineDown), "--up", fmt.Sprintf("%dkbit", lineUp),
					"--trace-down", file, "--plot", filepath.Join(*out, tc.name+"-"+j.name)}
				switch {
				case *dur > 0:
					args = append(args, "--duration", dur.String())
				case tc.duration != "":
					args = append(args, "--duration", tc.duration)
				}
				if *icmp {
					args = append(args, "--icmp-ahead")
				}
				if *noLoad {
					args = append(args, "--no-load")
				}
				args = append(args, j.args...)
				fmt.Fprintf(os.Stderr, "== %s %s: %s %s\n", tc.name, j.name, *sqm, strings.Join(args, " "))
				cmd := exec.Command(*sqm, args...)
				var stdout strings.Builder
				cmd.Stdout = &stdout
				cmd.Stderr = io.Discard
				if *verbose {
					cmd.Stderr = os.Stderr
				}
				if err := cmd.Run(); err != nil {
					fmt.Fprintf(os.Stderr, "%s %s: %v\n", tc.name, j.name, err)
					continue
				}
				if err := os.WriteFile(js, []byte(stdout.String()), 0o644); err != nil {
					fatalf("%v", err)
				}
			}
			b, err := os.ReadFile(js)
			if err != nil {
				continue
			}
			var r run
			r.controller = j.name
			if err := json.Unmarshal(b, &r.rep); err != nil {
				fatalf("%s: %v", js, err)
			}
			runs = append(runs, r)
		}
		printTable(os.Stdout, tc.name, runs)
	}
}

// printTable prints one trace's runs; "best fixed" is the fixed rate with
// the highest download utilisation whose download p95 stays within twice
// the default target (30 ms), else the one with the lowest p95.
func printTable(w io.Writer, name string, runs []run) {
	if len(runs) == 0 {
		fmt.Fprintf(w, "%s: no runs\n\n", name)
		return
	}
	tr := runs[0].rep.Trace.Down
	fmt.Fprintf(w, "%s (%s, %.0f s, mean %.2f Mbit/s; run %.0f s)\n", name, tr.File, tr.Seconds, tr.MeanMbps, runs[0].rep.DurationS)
	fmt.Fprintf(w, "%-14s %27s %27s %8s %8s %8s %8s %7s\n", "controller", "induced down p50/p95/p99 ms", "induced up p50/p95/p99 ms", "util dn", "util up", "chg/min", "cpu s", "rss MB")
	best := -1
	for i, r := range runs {
		if !strings.HasPrefix(r.controller, "fixed-") {
			continue
		}
		c := r.rep.Controller
		if best < 0 {
			best = i
			continue
		}
		b := runs[best].rep.Controller
		okC, okB := c.InducedOWDMs.Down.P95 <= 30, b.InducedOWDMs.Down.P95 <= 30
		switch {
		case okC && !okB, okC && okB && c.Utilisation.Down > b.Utilisation.Down, !okC && !okB && c.InducedOWDMs.Down.P95 < b.InducedOWDMs.Down.P95:
			best = i
		}
	}
	for i, r := range runs {
		c := r.rep.Controller
		mark := ""
		if i == best {
			mark = " (best fixed)"
		}
		perMin := 0.0
		if d := r.rep.DurationS; d > 0 {
			perMin = float64(c.RateChanges) / d * 60
		}
		rss := "-"
		if c.MaxRSSKB > 0 {
			rss = fmt.Sprintf("%.1f", float64(c.MaxRSSKB)/1024)
		}
		fmt.Fprintf(w, "%-14s %27s %27s %8.3f %8.3f %8.1f %8.2f %7s%s\n", r.controller,
			fmt.Sprintf("%.1f / %.1f / %.1f", c.InducedOWDMs.Down.P50, c.InducedOWDMs.Down.P95, c.InducedOWDMs.Down.P99),
			fmt.Sprintf("%.1f / %.1f / %.1f", c.InducedOWDMs.Up.P50, c.InducedOWDMs.Up.P95, c.InducedOWDMs.Up.P99),
			c.Utilisation.Down, c.Utilisation.Up, perMin, c.CPUSeconds, rss, mark)
	}
	fmt.Fprintln(w)
}

func fatalf(f string, a ...any) {
	fmt.Fprintf(os.Stderr, "autoratebench: "+f+"\n", a...)
	os.Exit(1)
}
