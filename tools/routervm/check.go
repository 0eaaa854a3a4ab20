package main

import (
	"bufio"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// steps are the PASS lines a complete smoke prints, in order.
var steps = []string{
	"setup",
	"cake_atm.start", "cake_atm.status", "cake_atm.stop",
	"simple.start", "simple.stop",
	"codel_police.start", "codel_police.stop",
	"daemon.start", "daemon.hotplug", "daemon.stop",
}

// dataChecks are the outputs the smoke sends back and what checks each.
var dataChecks = []struct {
	name  string
	check func([]byte) error
}{
	{"cake_atm.json", checkCakeATM},
	{"cake_atm.prom", checkProm},
	{"simple.json", checkSimple},
	{"codel_police.json", checkCodelPolice},
}

// report is what one smoke printed.
type report struct {
	Pass     map[string]string
	Fail     []string
	Data     map[string][]byte
	HWM, RSS int64 // the daemon's VmHWM and VmRSS in bytes, -1 if not reported
	Done     bool
	Errors   []string // lines that claim to be smoke lines but do not parse
}

// parseConsole reads the smoke's lines out of the console. Kernel messages
// may come between them; a data block's base64 lines are the ones between
// its DATA and END lines that decode.
func parseConsole(out string) report {
	r := report{Pass: map[string]string{}, Data: map[string][]byte{}, HWM: -1, RSS: -1}
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(make([]byte, 1<<16), 1<<22)
	var (
		block string
		b64   strings.Builder
	)
	for sc.Scan() {
		line := strings.TrimRight(sc.Text(), "\r")
		if block != "" {
			if line == "SMOKE END "+block {
				data, err := base64.StdEncoding.DecodeString(b64.String())
				if err != nil {
					r.Errors = append(r.Errors, fmt.Sprintf("data %s: base64: %v", block, err))
				} else {
					r.Data[block] = data
				}
				block = ""
				b64.Reset()
			} else if isBase64Line(line) {
				b64.WriteString(line)
			}
			continue
		}
		rest, ok := strings.CutPrefix(line, "SMOKE ")
		if !ok {
			continue
		}
		word, arg, _ := strings.Cut(rest, " ")
		switch word {
		case "PASS":
			step, detail, _ := strings.Cut(arg, " ")
			r.Pass[step] = detail
		case "FAIL":
			r.Fail = append(r.Fail, arg)
		case "DATA":
			block = arg
		case "RSS":
			r.HWM, r.RSS = procKB(arg, "VmHWM:"), procKB(arg, "VmRSS:")
		case "DONE":
			r.Done = true
		default:
			r.Errors = append(r.Errors, "unknown smoke line: "+line)
		}
	}
	if block != "" {
		r.Errors = append(r.Errors, "data "+block+": no SMOKE END line (the guest stopped while sending it)")
	}
	return r
}

var base64Line = regexp.MustCompile(`^[A-Za-z0-9+/]+=*$`)

func isBase64Line(s string) bool { return base64Line.MatchString(s) }

// procKB finds "key N kB" in a /proc/PID/status excerpt and returns bytes.
func procKB(s, key string) int64 {
	f := strings.Fields(s)
	for i := 0; i+2 < len(f); i++ {
		if f[i] == key && f[i+2] == "kB" {
			if n, err := strconv.ParseInt(f[i+1], 10, 64); err == nil {
				return n << 10
			}
		}
	}
	return -1
}

// check lists everything wrong with r for t; none means the smoke passed.
func (r report) check(t target) []string {
	var p []string
	for _, f := range r.Fail {
		p = append(p, "FAIL "+f)
	}
	p = append(p, r.Errors...)
	for _, s := range steps {
		if _, ok := r.Pass[s]; !ok {
			p = append(p, "step "+s+" did not pass (no PASS line)")
		}
	}
	for _, d := range dataChecks {
		data, ok := r.Data[d.name]
		if !ok {
			p = append(p, "no "+d.name+" came back")
			continue
		}
		if err := d.check(data); err != nil {
			p = append(p, fmt.Sprintf("%s: %v", d.name, err))
		}
	}
	switch {
	case r.HWM < 0:
		p = append(p, "the daemon's VmHWM did not come back")
	case t.RSSBudget > 0 && r.HWM > t.RSSBudget:
		p = append(p, fmt.Sprintf("the daemon's peak RSS (VmHWM) is %s, over the %s budget (DaemonRSSBudget%s)", kb(r.HWM), kb(t.RSSBudget), strings.ToUpper(t.Arch.Name)))
	}
	if !r.Done {
		p = append(p, "the smoke did not finish (no SMOKE DONE line)")
	}
	return p
}

// status is the part of sqm status --json (docs/status-json.md) the
// checks read.
type status struct {
	Schema  *int     `json:"schema"`
	Devices []device `json:"devices"`
}

type device struct {
	Device  string `json:"device"`
	IFBOf   string `json:"ifb_of"`
	Shaping *struct {
		Options map[string]any `json:"options"`
	} `json:"shaping"`
	TreeMatches *bool  `json:"tree_matches"`
	Drift       string `json:"drift"`
	Kernel      *struct {
		Qdiscs []struct {
			Kind    string `json:"kind"`
			Parent  string `json:"parent"`
			Packets uint64 `json:"packets"`
			Cake    *struct {
				MaxAdjlen uint64 `json:"max_adjlen"`
			} `json:"cake"`
		} `json:"qdiscs"`
		CodelPolice map[string]uint64 `json:"codel_police"`
	} `json:"kernel"`
}

// parseStatus decodes the JSON and returns the shaped device and its
// IFB's entry (nil if there is none), checking what every run has: the
// schema, the device shaped as applied.
func parseStatus(data []byte, dev string) (shaped, ifb *device, err error) {
	var s status
	if err := json.Unmarshal(data, &s); err != nil {
		return nil, nil, fmt.Errorf("not JSON: %v: %.200q", err, data)
	}
	if s.Schema == nil || *s.Schema != 1 {
		return nil, nil, fmt.Errorf("schema is not 1: %.200q", data)
	}
	for i := range s.Devices {
		d := &s.Devices[i]
		switch {
		case d.Device == dev:
			shaped = d
		case d.IFBOf == dev:
			ifb = d
		}
	}
	if shaped == nil {
		return nil, nil, fmt.Errorf("no device %s in %.300q", dev, data)
	}
	if shaped.Shaping == nil || shaped.Kernel == nil {
		return nil, nil, fmt.Errorf("%s has no shaping or no kernel tree", dev)
	}
	if shaped.TreeMatches == nil || !*shaped.TreeMatches {
		return nil, nil, fmt.Errorf("%s: the kernel's tree does not match the applied one: %s", dev, shaped.Drift)
	}
	return shaped, ifb, nil
}

// qdisc returns d's first qdisc of kind under parent ("" for any).
func qdisc(d *device, kind, parent string) (int, bool) {
	if d == nil || d.Kernel == nil {
		return 0, false
	}
	for i, q := range d.Kernel.Qdiscs {
		if q.Kind == kind && (parent == "" || q.Parent == parent) {
			return i, true
		}
	}
	return 0, false
}

// atmCell is an ATM cell on the wire; cake counts ATM-framed packets in
// whole cells.
const atmCell = 53

func checkCakeATM(data []byte) error {
	d, ifb, err := parseStatus(data, "wan0")
	if err != nil {
		return err
	}
	if o := d.Shaping.Options; o["linklayer"] != "atm" || o["overhead"] != float64(44) {
		return fmt.Errorf("wan0 options linklayer %v overhead %v, want atm and 44", o["linklayer"], o["overhead"])
	}
	i, ok := qdisc(d, "cake", "root")
	if !ok {
		return fmt.Errorf("wan0: no cake at the root")
	}
	q := d.Kernel.Qdiscs[i]
	if q.Packets == 0 || q.Cake == nil {
		return fmt.Errorf("wan0's cake sent no packets (or has no cake statistics): the smoke's pings did not go through it")
	}
	// The kernel's own account of the framing: with ATM every packet's
	// adjusted length is whole cells (plain overhead would leave most
	// lengths off a multiple of 53).
	if q.Cake.MaxAdjlen == 0 || q.Cake.MaxAdjlen%atmCell != 0 {
		return fmt.Errorf("wan0's cake: max_adjlen %d is not a whole number of %d-byte ATM cells: ATM framing is not applied", q.Cake.MaxAdjlen, atmCell)
	}
	if _, ok := qdisc(ifb, "cake", "root"); !ok {
		return fmt.Errorf("no IFB with cake for wan0's ingress")
	}
	return nil
}

func checkSimple(data []byte) error {
	d, ifb, err := parseStatus(data, "wan0")
	if err != nil {
		return err
	}
	for _, dev := range []*device{d, ifb} {
		if dev == nil {
			return fmt.Errorf("no IFB for wan0's ingress")
		}
		if _, ok := qdisc(dev, "htb", "root"); !ok {
			return fmt.Errorf("%s: no htb at the root", dev.Device)
		}
		if _, ok := qdisc(dev, "fq_codel", ""); !ok {
			return fmt.Errorf("%s: no fq_codel leaf", dev.Device)
		}
	}
	return nil
}

func checkCodelPolice(data []byte) error {
	d, _, err := parseStatus(data, "wan0")
	if err != nil {
		return err
	}
	cp := d.Kernel.CodelPolice
	if cp == nil {
		return fmt.Errorf("wan0 has no codel_police counters: the program is not loaded or its map was not read")
	}
	if cp["passed_packets"] == 0 || cp["passed_bytes"] < cp["passed_packets"]*60 {
		return fmt.Errorf("codel_police counted passed_packets %d, passed_bytes %d for the pings sent into wan0: want packets and at least 60 bytes each", cp["passed_packets"], cp["passed_bytes"])
	}
	return nil
}

// promSample is one sample line of the Prometheus text format: a metric
// name, optional labels, a value, an optional timestamp.
var promSample = regexp.MustCompile(`^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{([a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\]|\\.)*",?)*\})? (\S+)( -?[0-9]+)?$`)

// checkProm checks the text format line by line (what a textfile
// collector would reject), that every sample's family was declared with
// TYPE, and that wan0's shaping is in it.
func checkProm(data []byte) error {
	typed := map[string]bool{}
	samples, wan0 := 0, 0
	for n, line := range strings.Split(strings.TrimRight(string(data), "\n"), "\n") {
		switch {
		case line == "":
			return fmt.Errorf("line %d is empty", n+1)
		case strings.HasPrefix(line, "# TYPE "):
			f := strings.Fields(line)
			if len(f) != 4 || !map[string]bool{"counter": true, "gauge": true, "untyped": true, "histogram": true, "summary": true}[f[3]] {
				return fmt.Errorf("line %d: bad TYPE line %q", n+1, line)
			}
			typed[f[2]] = true
		case strings.HasPrefix(line, "#"):
		default:
			m := promSample.FindStringSubmatch(line)
			if m == nil {
				return fmt.Errorf("line %d is not a sample: %q", n+1, line)
			}
			if _, err := strconv.ParseFloat(m[4], 64); err != nil {
				return fmt.Errorf("line %d: value %q: %v", n+1, m[4], err)
			}
			fam := m[1]
			for _, suf := range []string{"_total", "_bucket", "_sum", "_count"} {
				if !typed[fam] {
					fam = strings.TrimSuffix(m[1], suf)
				}
			}
			if !typed[m[1]] && !typed[fam] {
				return fmt.Errorf("line %d: %s has no TYPE line before it", n+1, m[1])
			}
			samples++
			if strings.Contains(m[2], `"wan0"`) {
				wan0++
			}
		}
	}
	if samples == 0 || wan0 == 0 {
		return fmt.Errorf("%d samples, %d of them about wan0: want some of both", samples, wan0)
	}
	for _, want := range []string{
		`sqm_queue_shaping{interface="wan0",direction="egress"} 1`,
		`sqm_queue_shaping{interface="wan0",direction="ingress"} 1`,
	} {
		if !strings.Contains("\n"+string(data), "\n"+want+"\n") {
			return fmt.Errorf("no line %q: the metrics do not say wan0 is shaped both ways", want)
		}
	}
	return nil
}
