package config

import (
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// TestSQMScriptsDifferential resolves random configurations with the real
// sqm-scripts and compares every variable it hands to start-sqm with our
// Queue. It runs sqm-scripts' own src/run-openwrt.sh (with its functions.sh
// and defaults.sh) over a small stand-in for OpenWrt's /lib/functions.sh
// config API written here, reading the file through a real `uci` binary as
// config_load does (uci -S -n export), and a stand-in start-sqm that
// sources defaults.sh and prints the variables. Set SQM_SCRIPTS to a
// checkout of tohojo/sqm-scripts and SQM_LIBUCI to a uci binary (see
// internal/uci/libuci_test.go); SQM_SCRIPTS_N sets the number of files.
//
// Without them TestSQMScriptsGolden still compares: it checks Parse against
// the variables sqm-scripts produced, recorded in
// testdata/differential/sqmscripts.golden, for the 200 files of this test
// that we accept. With the sources present it also checks that recording is
// still what sqm-scripts says, and `-update` rewrites it
// (SQM_SCRIPTS_SOURCE names the versions for the header). The recording is
// data produced by running sqm-scripts, not its code.
//
// Known sqm-scripts quirk, not replicated: run.sh exports SQM_DEBUG and
// SQM_VERBOSITY_MAX with ${VAR:-...}, so a non-empty value from the first
// started section leaks into every later one. We compare them for the
// first started section only.
func TestSQMScriptsDifferential(t *testing.T) {
	src, bin := os.Getenv("SQM_SCRIPTS"), os.Getenv("SQM_LIBUCI")
	if src == "" || bin == "" {
		t.Skip("set SQM_SCRIPTS (a tohojo/sqm-scripts checkout) and SQM_LIBUCI (a uci binary) to compare with sqm-scripts")
	}
	n := 200
	if v, err := strconv.Atoi(os.Getenv("SQM_SCRIPTS_N")); err == nil {
		n = v
	}
	h := newScriptsHarness(t, src, bin)
	compared, rejected := 0, 0
	for _, in := range sqmScriptsInputs(n) {
		f, err := Parse("sqm", strings.NewReader(in))
		if err != nil {
			rejected++ // only files we accept are compared (here: enabled sections without a script)
			continue
		}
		compared += checkSQMScripts(t, f, in, h.run(t, in))
	}
	t.Logf("%d files (%d rejected by us), %d started sections compared with sqm-scripts", n, rejected, compared)
}

// sqmScriptsInputs are the n random files of the differential test, the
// same ones for the same n.
func sqmScriptsInputs(n int) []string {
	r := rand.New(rand.NewPCG(5, 6))
	out := make([]string, n)
	for i := range out {
		out[i] = randomConfig(r)
	}
	return out
}

// checkSQMScripts compares the sections f enables with the variables
// sqm-scripts handed to start-sqm for the same file, and returns how many
// sections it compared.
func checkSQMScripts(t *testing.T, f *File, in string, got []map[string]string) int {
	t.Helper()
	want := f.Enabled()
	if len(got) != len(want) {
		t.Fatalf("sqm-scripts starts %d sections, we enable %d:\n%s\nsqm-scripts: %v", len(got), len(want), in, got)
	}
	for j, q := range want {
		if msg := compareVars(q, got[j], j == 0); msg != "" {
			t.Fatalf("section %q differs: %s\nfile:\n%s\nsqm-scripts: %v", q.Name, msg, in, got[j])
		}
	}
	return len(want)
}

// scriptsVars are the variables start-sqm receives that we compare.
const scriptsVars = "IFACE UPLINK DOWNLINK QDISC SCRIPT LLAM LINKLAYER OVERHEAD STAB_MTU STAB_TSIZE STAB_MPU ILIMIT ELIMIT " +
	"ITARGET ETARGET IECN EECN IQDISC_OPTS EQDISC_OPTS ZERO_DSCP_INGRESS IGNORE_DSCP_INGRESS SQM_DEBUG SQM_VERBOSITY_MAX"

type scriptsHarness struct{ dir, runSh string }

func newScriptsHarness(t *testing.T, src, bin string) *scriptsHarness {
	dir := t.TempDir()
	must := func(err error) {
		if err != nil {
			t.Fatal(err)
		}
	}
	lib := filepath.Join(dir, "lib")
	must(os.MkdirAll(filepath.Join(dir, "conf"), 0o755))
	must(os.MkdirAll(filepath.Join(dir, "state", "available_qdiscs"), 0o700))
	must(os.MkdirAll(lib, 0o755))
	for _, f := range []string{"functions.sh", "defaults.sh"} {
		b, err := os.ReadFile(filepath.Join(src, "src", f))
		must(err)
		must(os.WriteFile(filepath.Join(lib, f), b, 0o644))
	}
	start := "#!/bin/sh\n. " + filepath.Join(dir, "sqm.conf") + "\n. \"${SQM_LIB_DIR}/defaults.sh\"\necho BEGIN\n"
	for _, v := range strings.Fields(scriptsVars) {
		start += fmt.Sprintf("printf '%%s=%%s\\n' %s \"$%s\"\n", v, v)
	}
	start += "echo END\n"
	must(os.WriteFile(filepath.Join(lib, "start-sqm"), []byte(start), 0o755))
	// A stand-in for OpenWrt's /lib/functions.sh config API, as far as
	// run-openwrt.sh uses it.
	must(os.WriteFile(filepath.Join(dir, "owrt.sh"), []byte(`
append() { local var="$1" value="$2" sep="${3:- }"; eval "$var=\"\${$var:+\${$var}\${value:+\$sep}}\$value\""; }
package() { :; }
config() { CONFIG_NUM_SECTIONS=$((CONFIG_NUM_SECTIONS + 1)); local name="${2:-cfg$CONFIG_NUM_SECTIONS}"; append CONFIG_SECTIONS "$name"; CONFIG_SECTION="$name"; eval "CONFIG_${name}_TYPE=\"\$1\""; }
option() { local n="$1"; shift; eval "CONFIG_${CONFIG_SECTION}_${n}=\"\$*\""; }
list() { local n="$1"; shift; append "CONFIG_${CONFIG_SECTION}_${n}" "$*" " "; }
config_get() { case "$3" in "") eval echo "\"\${CONFIG_${1}_${2}:-\${4}}\"";; *) eval "${1}=\${CONFIG_${2}_${3}:-\${4}}";; esac; }
config_load() { CONFIG_SECTIONS=; CONFIG_NUM_SECTIONS=0; eval "$(`+bin+` -c "`+filepath.Join(dir, "conf")+`" -S -n export "$1" 2>/dev/null)"; }
config_foreach() { local f="$1"; [ $# -ge 1 ] && shift; local t="$1"; [ $# -ge 1 ] && shift; local s; for s in $CONFIG_SECTIONS; do if [ -n "$t" ]; then eval "[ \"\$CONFIG_${s}_TYPE\" = \"$t\" ]" || continue; fi; $f "$s" "$@"; done; }
`), 0o644))
	must(os.WriteFile(filepath.Join(dir, "sqm.conf"), []byte(fmt.Sprintf(
		"SQM_LIB_DIR=%s\nSQM_STATE_DIR=%s\nSQM_QDISC_STATE_DIR=%s\nSQM_SYSLOG=0\n",
		lib, filepath.Join(dir, "state"), filepath.Join(dir, "state", "available_qdiscs"))), 0o644))
	run, err := os.ReadFile(filepath.Join(src, "src", "run-openwrt.sh"))
	must(err)
	s := strings.Replace(string(run), ". /lib/functions.sh", ". "+filepath.Join(dir, "owrt.sh"), 1)
	s = strings.Replace(s, ". /etc/sqm/sqm.conf", ". "+filepath.Join(dir, "sqm.conf"), 1)
	if s == string(run) {
		t.Fatal("run-openwrt.sh does not source /lib/functions.sh and /etc/sqm/sqm.conf as expected")
	}
	runSh := filepath.Join(dir, "run.sh")
	must(os.WriteFile(runSh, []byte(s), 0o755))
	return &scriptsHarness{dir: dir, runSh: runSh}
}

// run returns the variables of every section sqm-scripts starts, in order.
func (h *scriptsHarness) run(t *testing.T, conf string) []map[string]string {
	if err := os.WriteFile(filepath.Join(h.dir, "conf", "sqm"), []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("sh", h.runSh, "start")
	cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("run-openwrt.sh: %v\n%s%s", err, out, stderr.String())
	}
	if os.Getenv("SQM_SCRIPTS_DEBUG") != "" {
		t.Logf("run-openwrt.sh:\n%s%s", out, stderr.String())
	}
	var res []map[string]string
	var cur map[string]string
	for _, line := range strings.Split(string(out), "\n") {
		switch {
		case line == "BEGIN":
			cur = map[string]string{}
		case line == "END":
			res = append(res, cur)
			cur = nil
		case cur != nil:
			k, v, _ := strings.Cut(line, "=")
			cur[k] = v
		}
	}
	return res
}

func compareVars(q Queue, v map[string]string, first bool) string {
	num := func(name string, want int64) string {
		if got, err := strconv.ParseInt(v[name], 10, 64); err != nil || got != want {
			return fmt.Sprintf("%s: sqm-scripts %q, ours %d; ", name, v[name], want)
		}
		return ""
	}
	str := func(name, got, want string) string {
		if got != want {
			return fmt.Sprintf("%s: sqm-scripts %q, ours %q; ", name, got, want)
		}
		return ""
	}
	flag := func(name string, want bool) string {
		return str(name, v[name], map[bool]string{true: "1", false: "0"}[want])
	}
	ecn := func(name string, want bool) string {
		return str(name, strings.ToUpper(v[name]), map[bool]string{true: "ECN", false: "NOECN"}[want])
	}
	limit := func(name string, want uint32) string {
		if want == 0 {
			return str(name, v[name], "")
		}
		return num(name, int64(want))
	}
	target := func(name string, want Target) string {
		got := v[name]
		switch want.Mode {
		case TargetAuto:
			if got == "" || strings.EqualFold(got, "auto") {
				return ""
			}
		case TargetDefault:
			if strings.EqualFold(got, "default") {
				return ""
			}
		case TargetExplicit:
			if d, err := targetValue(got); err == nil && d == want.Value.Microseconds() {
				return ""
			}
		}
		return fmt.Sprintf("%s: sqm-scripts %q, ours %+v; ", name, got, want)
	}
	ll := v["LINKLAYER"]
	if ll == "adsl" {
		ll = "atm"
	}
	msg := str("IFACE", v["IFACE"], q.Interface) +
		num("UPLINK", int64(q.Upload)) + num("DOWNLINK", int64(q.Download)) +
		str("QDISC", v["QDISC"], q.Qdisc) + str("SCRIPT", strings.TrimSuffix(v["SCRIPT"], ".qos"), q.Script) +
		str("LLAM", v["LLAM"], q.LLAM) + str("LINKLAYER", ll, q.LinkLayer) + num("OVERHEAD", int64(q.Overhead)) +
		num("STAB_MTU", int64(q.StabMTU)) + num("STAB_TSIZE", int64(q.StabTSize)) + num("STAB_MPU", int64(q.StabMPU)) +
		limit("ILIMIT", q.ILimit) + limit("ELIMIT", q.ELimit) + target("ITARGET", q.ITarget) + target("ETARGET", q.ETarget) +
		ecn("IECN", q.IngressECN) + ecn("EECN", q.EgressECN) +
		str("IQDISC_OPTS", v["IQDISC_OPTS"], q.IQdiscOpts) + str("EQDISC_OPTS", v["EQDISC_OPTS"], q.EQdiscOpts) +
		flag("ZERO_DSCP_INGRESS", q.SquashDSCP) + flag("IGNORE_DSCP_INGRESS", q.SquashIngress)
	if first {
		msg += flag("SQM_DEBUG", q.DebugLogging) + num("SQM_VERBOSITY_MAX", int64(q.Verbosity))
	}
	return msg
}

// targetValue reads an explicit target the way sqm-scripts' get_target
// does for the <digits><unit> values the generator writes, in µs.
func targetValue(s string) (int64, error) {
	i := 0
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	n, err := strconv.ParseInt(s[:i], 10, 64)
	if err != nil {
		return 0, err
	}
	switch strings.ToLower(s[i:]) {
	case "s", "sec", "secs":
		return n * 1e6, nil
	case "ms", "msec", "msecs":
		return n * 1e3, nil
	case "us", "usec", "usecs":
		return n, nil
	}
	return 0, fmt.Errorf("unit %q", s[i:])
}

// randomConfig writes 1-3 queue sections (and sometimes an sqm section)
// from values sqm-scripts and LuCI users write, unset and empty included.
func randomConfig(r *rand.Rand) string {
	pools := map[string][]string{
		"download":                       {"", "0", "85000", "1", "14698", "999999"},
		"upload":                         {"", "0", "10000", "2302", "800"},
		"qdisc":                          {"", "cake", "fq_codel", "sfq", "pie"},
		"script":                         {"simple.qos", "piece_of_cake.qos", "layer_cake.qos", "simplest", "simplest_tbf.qos"},
		"squash_dscp":                    {"", "0", "1"},
		"squash_ingress":                 {"", "0", "1"},
		"ingress_ecn":                    {"", "ECN", "NOECN", "ecn"},
		"egress_ecn":                     {"", "ECN", "NOECN", "noecn"},
		"ilimit":                         {"", "1001", "2000"},
		"elimit":                         {"", "1001", "50"},
		"itarget":                        {"", "auto", "AUTO", "default", "Default", "5ms", "16857us", "1s", "20msec"},
		"etarget":                        {"", "auto", "DEFAULT", "5ms", "100usecs", "2secs"},
		"iqdisc_opts":                    {"", "nat dual-dsthost ingress", "diffserv4"},
		"eqdisc_opts":                    {"", "nat dual-srchost", "ack-filter"},
		"linklayer":                      {"", "none", "ethernet", "atm", "adsl"},
		"overhead":                       {"", "0", "44", "-4", "34"},
		"tcMTU":                          {"", "2047", "1500"},
		"tcTSIZE":                        {"", "128", "512"},
		"tcMPU":                          {"", "0", "64"},
		"linklayer_adaptation_mechanism": {"", "default", "cake", "htb_private", "tc_stab"},
		"debug_logging":                  {"", "0", "1"},
		"verbosity":                      {"", "0", "5", "8", "10"},
		"enabled":                        {"", "0", "1", "1", "1"},
		"qdisc_advanced":                 {"0", "1"},
		"target":                         {"5ms"},
	}
	names := make([]string, 0, len(pools))
	for k := range pools {
		names = append(names, k)
	}
	sort.Strings(names)
	var b strings.Builder
	for i := r.IntN(3); i >= 0; i-- {
		if r.IntN(3) == 0 {
			b.WriteString("config queue\n")
		} else {
			fmt.Fprintf(&b, "config queue 'q%d'\n", i)
		}
		fmt.Fprintf(&b, "\toption interface 'eth%d'\n", i)
		for _, name := range names {
			if r.IntN(3) == 0 {
				continue // unset
			}
			vals := pools[name]
			v := vals[r.IntN(len(vals))]
			if strings.HasSuffix(name, "qdisc_opts") && v != "" && r.IntN(2) == 0 {
				for _, w := range strings.Fields(v) {
					fmt.Fprintf(&b, "\tlist %s '%s'\n", name, w)
				}
				continue
			}
			fmt.Fprintf(&b, "\toption %s '%s'\n", name, v)
			if r.IntN(10) == 0 { // set twice: the last wins
				fmt.Fprintf(&b, "\toption %s '%s'\n", name, vals[r.IntN(len(vals))])
			}
		}
		if r.IntN(4) == 0 {
			b.WriteString("\nconfig sqm 'daemon'\n\toption foo 'bar'\n")
		}
		b.WriteString("\n")
	}
	return b.String()
}

const sqmScriptsGolden = "testdata/differential/sqmscripts.golden"

// TestSQMScriptsGolden compares Parse with the recorded sqm-scripts
// answers (see TestSQMScriptsDifferential). A recorded file is one we
// accepted when it was recorded; rejecting it now fails, since sqm-scripts
// starts it.
func TestSQMScriptsGolden(t *testing.T) {
	src, bin := os.Getenv("SQM_SCRIPTS"), os.Getenv("SQM_LIBUCI")
	live := src != "" && bin != ""
	var h *scriptsHarness
	if live {
		h = newScriptsHarness(t, src, bin)
		if *update {
			writeSQMScriptsGolden(t, h)
		}
	}
	rec, err := readSQMScriptsGolden(sqmScriptsGolden)
	if err != nil {
		t.Fatal(err)
	}
	if len(rec) < 100 {
		t.Fatalf("%s: %d files; the recording should have the ~150 files of TestSQMScriptsDifferential we accept", sqmScriptsGolden, len(rec))
	}
	compared := 0
	for _, r := range rec {
		if live && !*update {
			if now := h.run(t, r.In); !reflect.DeepEqual(now, r.Started) {
				t.Fatalf("%s is stale for\n%s\nrecorded %v\nsqm-scripts now %v\nrerun with -update", sqmScriptsGolden, r.In, r.Started, now)
			}
		}
		f, err := Parse("sqm", strings.NewReader(r.In))
		if err != nil {
			t.Fatalf("we now reject a file sqm-scripts starts %d sections of: %v\n%s", len(r.Started), err, r.In)
		}
		compared += checkSQMScripts(t, f, r.In, r.Started)
	}
	if compared == 0 {
		t.Fatalf("%s: no started section to compare", sqmScriptsGolden)
	}
	t.Logf("%d files, %d started sections compared with recorded sqm-scripts variables", len(rec), compared)
}

type sqmScriptsRecord struct {
	In      string
	Started []map[string]string // per section sqm-scripts starts, in order
}

// The recording is line-based text: `in` and the quoted file, a `start`
// line per section sqm-scripts starts (NAME="value" for each of
// scriptsVars), then `end`. Lines starting with # are comments.
func writeSQMScriptsGolden(t *testing.T, h *scriptsHarness) {
	var b strings.Builder
	src := os.Getenv("SQM_SCRIPTS_SOURCE")
	if src == "" {
		src = "unnamed versions (set SQM_SCRIPTS_SOURCE)"
	}
	b.WriteString("# The variables sqm-scripts' run-openwrt.sh hands to start-sqm for the files of\n")
	b.WriteString("# TestSQMScriptsDifferential that Parse accepted when recorded.\n")
	b.WriteString("# Recorded by: SQM_SCRIPTS=dir SQM_LIBUCI=uci go test ./internal/config -run TestSQMScriptsGolden -update\n")
	fmt.Fprintf(&b, "# sqm-scripts and uci: %s\n", src)
	for _, in := range sqmScriptsInputs(200) {
		if _, err := Parse("sqm", strings.NewReader(in)); err != nil {
			continue
		}
		fmt.Fprintf(&b, "in %s\n", strconv.QuoteToASCII(in))
		for _, vars := range h.run(t, in) {
			b.WriteString("start")
			for _, k := range strings.Fields(scriptsVars) {
				v, ok := vars[k]
				if !ok {
					t.Fatalf("sqm-scripts printed no %s for\n%s", k, in)
				}
				fmt.Fprintf(&b, " %s=%s", k, strconv.QuoteToASCII(v))
			}
			b.WriteString("\n")
		}
		b.WriteString("end\n")
	}
	if err := os.MkdirAll(filepath.Dir(sqmScriptsGolden), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(sqmScriptsGolden, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
}

func readSQMScriptsGolden(path string) ([]sqmScriptsRecord, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var out []sqmScriptsRecord
	var cur *sqmScriptsRecord
	for i, text := range strings.Split(string(data), "\n") {
		bad := func(format string, a ...any) error {
			return fmt.Errorf("%s:%d: %s", path, i+1, fmt.Sprintf(format, a...))
		}
		key, rest, _ := strings.Cut(text, " ")
		switch {
		case text == "" || strings.HasPrefix(text, "#"):
		case key == "in" && cur == nil:
			in, err := strconv.Unquote(rest)
			if err != nil {
				return nil, bad("in: bad quoted string: %v", err)
			}
			cur = &sqmScriptsRecord{In: in}
		case key == "start" && cur != nil:
			vars := map[string]string{}
			for rest != "" {
				k, q, ok := strings.Cut(rest, "=")
				if !ok {
					return nil, bad("start: %q has no NAME=value", rest)
				}
				qv, err := strconv.QuotedPrefix(q)
				if err != nil {
					return nil, bad("start: %s: bad quoted value: %v", k, err)
				}
				vars[k], _ = strconv.Unquote(qv)
				rest = strings.TrimPrefix(q[len(qv):], " ")
			}
			for _, k := range strings.Fields(scriptsVars) {
				if _, ok := vars[k]; !ok {
					return nil, bad("start: no %s", k)
				}
			}
			cur.Started = append(cur.Started, vars)
		case key == "end" && cur != nil:
			out = append(out, *cur)
			cur = nil
		default:
			return nil, bad("unexpected %q (want in, start lines, end)", key)
		}
	}
	if cur != nil {
		return nil, fmt.Errorf("%s: the last file has no end line", path)
	}
	return out, nil
}
