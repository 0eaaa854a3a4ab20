// Command policersweep answers issue 13's burst question in the VM lab:
// how the police recipe's bucket and codel_police's hard limit trade
// latency for goodput, at a few rates and base RTTs. Each setting is one
// `sqm lab --vm --mode rrul` run (both directions loaded, latency probes
// throughout) on an emulated line a little faster than the shaped rate,
// as a router's WAN is; cake on an IFB at the same rate is the reference.
//
// Settings are in milliseconds of the shaped rate, so one sweep reads the
// same at every rate: a police bucket of B ms is `iqdisc_opts 'burst
// rate*B/8'`, a codel_police limit of L ms is `ilimit` full frames
// (rate*L/8/1514). Seed 001's `burst 1000k` at 50 Mbit/s is 164 ms.
//
// It is a bench (make bench-policer), not a test: a run takes one to three
// minutes of VM time (one on an idle host). Each run's JSON and log are
// kept in -out, and a run whose JSON is there already is not repeated
// (-plot-only only reads them). It prints one markdown table per case
// and draws -out/CASE.svg.
//
//	go run ./tools/policersweep [-sqm bin/sqm] [-out DIR] [-cases REGEX] [-duration 20s] [-plot-only]
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"sqm/internal/lab"
	"sqm/internal/plot"
)

// lineCase is one emulated line and the rates sqm shapes it to.
type lineCase struct {
	name               string
	down, up, rtt      string // sqm lab's line flags
	shapeDown, shapeUp uint64 // kbit/s
	buffer             int    // modem FIFO, packets
}

// cases: issue 13's lab line (55/10 Mbit/s, shaped to 50/9, 20 ms), the
// same far from its server, and a slower line where a bucket holds few
// packets.
var cases = []lineCase{
	{"50of55-20ms", "55mbit", "10mbit", "20ms", 50000, 9000, 1000},
	{"50of55-80ms", "55mbit", "10mbit", "80ms", 50000, 9000, 1000},
	{"20of22-20ms", "22mbit", "5mbit", "20ms", 20000, 4500, 1000},
}

// The swept settings, ms of the shaped rate. sqm's defaults: police 20,
// codel_police 20 (four 5 ms targets).
var (
	bursts = []float64{5, 10, 20, 40, 80, 164}
	limits = []float64{10, 20, 40, 80}
)

const frame = 1514 // full Ethernet frame, what ilimit counts

// setting is one run of a case.
type setting struct {
	recipe string  // piece_of_cake, police, codel_police
	ms     float64 // bucket or limit; 0 for the reference
}

func (s setting) name() string {
	if s.ms == 0 {
		return s.recipe
	}
	return fmt.Sprintf("%s-%gms", s.recipe, s.ms)
}

// config is the lab's --config for s on c (the lab replaces the
// interface).
func (s setting) config(c lineCase) string {
	var b strings.Builder
	fmt.Fprintf(&b, "config queue 'wan'\n\toption enabled '1'\n\toption interface 'wan'\n")
	fmt.Fprintf(&b, "\toption download '%d'\n\toption upload '%d'\n\toption qdisc 'cake'\n\toption script '%s'\n", c.shapeDown, c.shapeUp, s.recipe)
	bytes := float64(c.shapeDown) * 1000 / 8 * s.ms / 1000
	switch s.recipe {
	case "police":
		fmt.Fprintf(&b, "\toption iqdisc_opts 'burst %.0f'\n", bytes)
	case "codel_police":
		fmt.Fprintf(&b, "\toption ilimit '%.0f'\n", max(1, bytes/frame))
	}
	return b.String()
}

func settings() []setting {
	s := []setting{{"piece_of_cake", 0}}
	for _, b := range bursts {
		s = append(s, setting{"police", b})
	}
	for _, l := range limits {
		s = append(s, setting{"codel_police", l})
	}
	return s
}

func main() {
	var (
		sqm      = flag.String("sqm", "bin/sqm", "the sqm binary")
		out      = flag.String("out", "policersweep-out", "directory for each run's JSON, log and config")
		sel      = flag.String("cases", ".", "run only the cases whose name matches this `regex`")
		duration = flag.Duration("duration", 20*time.Second, "RRUL load time of each run")
		plotOnly = flag.Bool("plot-only", false, "only read the JSON already in -out")
	)
	flag.Parse()
	re, err := regexp.Compile(*sel)
	if err != nil {
		fmt.Fprintln(os.Stderr, "policersweep: -cases:", err)
		os.Exit(2)
	}
	if err := os.MkdirAll(*out, 0o755); err != nil {
		fmt.Fprintln(os.Stderr, "policersweep:", err)
		os.Exit(1)
	}
	failed := false
	for _, c := range cases {
		if !re.MatchString(c.name) {
			continue
		}
		var rows []row
		for _, s := range settings() {
			base := filepath.Join(*out, c.name+"-"+s.name())
			if _, err := os.Stat(base + ".json"); err != nil && !*plotOnly {
				if err := run(*sqm, c, s, *duration, base); err != nil {
					fmt.Fprintf(os.Stderr, "policersweep: %s %s: %v\n", c.name, s.name(), err)
					failed = true
					continue
				}
			}
			r, err := read(s, base+".json")
			if err != nil {
				fmt.Fprintf(os.Stderr, "policersweep: %s %s: %v\n", c.name, s.name(), err)
				failed = true
				continue
			}
			rows = append(rows, r)
			if !*plotOnly {
				fmt.Fprintf(os.Stderr, "policersweep: %s %s: induced p90 %.1f ms, down %.2f Mbit/s, loss %.2f %%\n", c.name, s.name(), r.p90, r.down, r.loss)
			}
		}
		writeTable(os.Stdout, c, rows)
		if err := draw(filepath.Join(*out, c.name+".svg"), c, rows); err != nil {
			fmt.Fprintln(os.Stderr, "policersweep:", err)
			failed = true
		}
	}
	if failed {
		os.Exit(1)
	}
}

// run does one lab run under the VM lock (so other users of the VM get
// their turn between runs), keeping its JSON only if it completed.
func run(sqm string, c lineCase, s setting, d time.Duration, base string) error {
	if err := os.WriteFile(base+".conf", []byte(s.config(c)), 0o644); err != nil {
		return err
	}
	args := []string{"/tmp/sqm-vm.lock", sqm, "lab", "--vm", "--json", "--mode", "rrul", "--duration", d.String(),
		"--down", c.down, "--up", c.up, "--rtt", c.rtt, "--buffer", fmt.Sprint(c.buffer), "--config", base + ".conf"}
	fmt.Fprintf(os.Stderr, "policersweep: %s %s: flock %s\n", c.name, s.name(), strings.Join(args, " "))
	lf, err := os.Create(base + ".log")
	if err != nil {
		return err
	}
	defer lf.Close()
	var js strings.Builder
	cmd := exec.Command("flock", args...)
	cmd.Stdout, cmd.Stderr = &js, lf
	start := time.Now()
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%v after %v (log: %s.log)", err, time.Since(start).Round(time.Second), base)
	}
	fmt.Fprintf(lf, "policersweep: %v, load average after: %s", time.Since(start).Round(time.Second), loadavg())
	return os.WriteFile(base+".json", []byte(js.String()), 0o644)
}

func loadavg() string {
	b, _ := os.ReadFile("/proc/loadavg")
	return string(b)
}

// row is one run's outcome: induced latency is the loaded percentile
// minus the idle median, as the lab's table has it.
type row struct {
	s                setting
	p50, p90         float64 // ms
	down, up         float64 // Mbit/s
	loss             float64 // % of latency probes
	unshapedP90      float64 // the same line without sqm, ms
	drops, signalled uint64  // ingress drops; codel_police's CoDel signals (marks + signal drops)
}

func read(s setting, path string) (row, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return row{}, err
	}
	var rep lab.Report
	if err := json.Unmarshal(b, &rep); err != nil {
		return row{}, fmt.Errorf("%s: %v", path, err)
	}
	a, bf := rep.After, rep.Before
	if a == nil || bf == nil {
		return row{}, errors.New(path + ": no before or after run")
	}
	r := row{s: s, p50: a.Loaded.MedianMs - a.Idle.MedianMs, p90: a.Loaded.P90Ms - a.Idle.MedianMs,
		down: a.DownloadMbps, up: a.UploadMbps, loss: a.Loaded.LossPct, unshapedP90: bf.Loaded.P90Ms - bf.Idle.MedianMs}
	for _, d := range rep.Shaping.Status {
		if cp := d.CodelPolice; cp != nil {
			r.drops += cp.DroppedSignal + cp.DroppedLimit
			r.signalled += cp.Marked + cp.DroppedSignal
			continue
		}
		for _, q := range d.Qdiscs {
			// The download's drops: police's on the ingress hook, cake's
			// on the IFB.
			if q.Kind == "ingress" || (q.Kind == "cake" && strings.HasPrefix(d.Device, "ifb")) {
				r.drops += uint64(q.Drops)
			}
		}
	}
	return r, nil
}

func writeTable(w io.Writer, c lineCase, rows []row) {
	fmt.Fprintf(w, "\n%s: line %s/%s, base RTT %s, %d-packet modem FIFO, shaped %d/%d kbit/s, RRUL\n\n", c.name, c.down, c.up, c.rtt, c.buffer, c.shapeDown, c.shapeUp)
	fmt.Fprintln(w, "| ingress | bucket / limit | induced p50 / p90 ms | download / upload Mbit/s | probes lost | ingress drops (CoDel signals) | unshaped p90 ms |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|")
	for _, r := range rows {
		set := "-"
		if r.s.ms > 0 {
			set = fmt.Sprintf("%g ms", r.s.ms)
		}
		sig := ""
		if r.s.recipe == "codel_police" {
			sig = fmt.Sprintf(" (%d)", r.signalled)
		}
		fmt.Fprintf(w, "| %s | %s | %.1f / %.1f | %.2f / %.2f | %.2f %% | %d%s | %.0f |\n",
			r.s.recipe, set, r.p50, r.p90, r.down, r.up, r.loss, r.drops, sig, r.unshapedP90)
	}
}

func draw(path string, c lineCase, rows []row) error {
	sw := &plot.Sweep{
		Title:    fmt.Sprintf("Ingress policers, %s/%s line shaped to %d kbit/s, base RTT %s", c.down, c.up, c.shapeDown, c.rtt),
		Subtitle: "sqm lab --vm --mode rrul: induced latency (p90 loaded - idle median) and download goodput, one run per setting",
		XLabel:   "police bucket / codel_police limit (ms at the shaped rate, log scale)",
	}
	sw.Series = []plot.SweepSeries{{Name: "police (bucket)"}, {Name: "codel_police (hard limit)"}}
	for _, r := range rows {
		p := plot.SweepPoint{X: r.s.ms, InducedMs: r.p90, GoodputMbit: r.down}
		switch r.s.recipe {
		case "police":
			sw.Series[0].Points = append(sw.Series[0].Points, p)
		case "codel_police":
			sw.Series[1].Points = append(sw.Series[1].Points, p)
		default:
			sw.Refs = append(sw.Refs, plot.SweepRef{Name: "cake on an IFB", InducedMs: r.p90, GoodputMbit: r.down})
		}
	}
	return plot.SaveSweep(path, sw)
}
