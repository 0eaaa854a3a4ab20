package main

import (
	"os"
	"strings"
	"testing"
)

// recorded is a passing smoke's console from the mipsel VM (go run
// ./tools/routervm -arch mipsle -keep, then WORK/mipsle.console.log).
func recorded(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("testdata/mipsle.console.log")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func mipsle() target { return targets[0] }

func TestRecordedConsolePasses(t *testing.T) {
	r := parseConsole(recorded(t))
	if p := r.check(mipsle()); len(p) > 0 {
		t.Fatalf("the recorded passing run fails the checks:\n%s", strings.Join(p, "\n"))
	}
	if len(r.Pass) != len(steps) || r.HWM != 6536<<10 || r.RSS != 6536<<10 || !r.Done {
		t.Errorf("parsed %d passes, VmHWM %d, VmRSS %d, done %v", len(r.Pass), r.HWM, r.RSS, r.Done)
	}
}

// TestCheckFails breaks the recorded console in each way a broken sqm, a
// broken guest or a bad budget would, and wants the check to fail with a
// problem that says so.
func TestCheckFails(t *testing.T) {
	base := recorded(t)
	console := func(old, new string) func(*testing.T) string {
		return func(t *testing.T) string {
			if !strings.Contains(base, old) {
				t.Fatalf("the recording has no %q", old)
			}
			return strings.Replace(base, old, new, 1)
		}
	}
	tests := []struct {
		name    string
		console func(*testing.T) string
		data    string // data block to edit, if any
		old     string
		new     string
		all     bool // replace every occurrence in the data block
		budget  int64
		want    string
	}{
		{name: "a step fails", console: console("SMOKE PASS simple.start\n", "SMOKE FAIL simple.start tree: wan0: qdisc noqueue\n"), want: "FAIL simple.start"},
		{name: "a step is missing", console: console("SMOKE PASS daemon.hotplug shaped after 0 s\n", ""), want: "step daemon.hotplug did not pass"},
		{name: "the guest stopped early", console: func(t *testing.T) string { return base[:strings.Index(base, "SMOKE RSS")] }, want: "VmHWM did not come back"},
		{name: "no DONE line", console: console("SMOKE DONE", ""), want: "did not finish"},
		{name: "RSS over budget", console: console("VmHWM: 6536 kB", "VmHWM: 8193 kB"), want: "over the 8.0 MB budget"},
		{name: "RSS under a smaller budget", budget: 6 << 20, want: "over the 6.0 MB budget"},
		{name: "data cut off", console: console("SMOKE END simple.json\n", ""), want: "no SMOKE END line"},
		{name: "data missing", console: console("SMOKE DATA cake_atm.prom\n", "SMOKE DATAX\n"), want: "unknown smoke line"},
		{name: "JSON broken", data: "simple.json", old: `"schema": 1,`, new: `"schema": 1`, want: "simple.json: not JSON"},
		{name: "schema changed", data: "simple.json", old: `"schema": 1,`, new: `"schema": 2,`, want: "schema is not 1"},
		{name: "tree drifted", data: "simple.json", old: `"tree_matches": true`, new: `"tree_matches": false`, want: "does not match the applied one"},
		{name: "no ATM framing", data: "cake_atm.json", old: `"max_adjlen": 318`, new: `"max_adjlen": 286`, want: "not a whole number of 53-byte ATM cells"},
		{name: "linklayer not atm", data: "cake_atm.json", old: `"linklayer": "atm"`, new: `"linklayer": "ethernet"`, want: "want atm and 44"},
		{name: "no fq_codel leaf", data: "simple.json", old: `"kind": "fq_codel"`, new: `"kind": "pfifo"`, all: true, want: "no fq_codel leaf"},
		{name: "codel_police counted nothing", data: "codel_police.json", old: `"passed_packets": 11`, new: `"passed_packets": 0`, want: "codel_police counted passed_packets 0"},
		{name: "codel_police not loaded", data: "codel_police.json", old: `"codel_police": {`, new: `"codel_polic": {`, all: true, want: "no codel_police counters"},
		{name: "prom sample malformed", data: "cake_atm.prom", old: "sqm_scrape_error 0\n", new: "sqm_scrape_error\n", want: "is not a sample"},
		{name: "prom sample untyped", data: "cake_atm.prom", old: "# TYPE sqm_scrape_error gauge\n", new: "", want: "no TYPE line"},
		{name: "prom says unshaped", data: "cake_atm.prom", old: `sqm_queue_shaping{interface="wan0",direction="ingress"} 1`, new: `sqm_queue_shaping{interface="wan0",direction="ingress"} 0`, want: "shaped both ways"},
		{name: "prom value", data: "cake_atm.prom", old: "sqm_scrape_error 0\n", new: "sqm_scrape_error zero\n", want: "value \"zero\""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := base
			if tt.console != nil {
				c = tt.console(t)
			}
			r := parseConsole(c)
			if tt.data != "" {
				d := string(r.Data[tt.data])
				if !strings.Contains(d, tt.old) {
					t.Fatalf("%s has no %q", tt.data, tt.old)
				}
				n := 1
				if tt.all {
					n = -1
				}
				r.Data[tt.data] = []byte(strings.Replace(d, tt.old, tt.new, n))
			}
			tg := mipsle()
			if tt.budget != 0 {
				tg.RSSBudget = tt.budget
			}
			p := strings.Join(r.check(tg), "\n")
			if !strings.Contains(p, tt.want) {
				t.Errorf("problems %q, want one with %q", p, tt.want)
			}
		})
	}
}

func TestNoBudgetOnArm(t *testing.T) {
	r := parseConsole(strings.Replace(recorded(t), "VmHWM: 6536 kB", "VmHWM: 99999 kB", 1))
	if p := r.check(targets[1]); len(p) > 0 {
		t.Errorf("arm has no RSS budget, yet: %v", p)
	}
}

func TestProcKB(t *testing.T) {
	for _, tt := range []struct {
		in, key string
		want    int64
	}{
		{"VmHWM: 6536 kB VmRSS: 6000 kB", "VmHWM:", 6536 << 10},
		{"VmHWM: 6536 kB VmRSS: 6000 kB", "VmRSS:", 6000 << 10},
		{"VmHWM: kB", "VmHWM:", -1},
		{"", "VmHWM:", -1},
		{"VmHWM: 12 MB", "VmHWM:", -1},
	} {
		if got := procKB(tt.in, tt.key); got != tt.want {
			t.Errorf("procKB(%q, %q) = %d, want %d", tt.in, tt.key, got, tt.want)
		}
	}
}
