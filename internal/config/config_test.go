package config

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"sqm/internal/uci"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden")

// render prints a File with every resolved field and position.
func render(f *File) string {
	var b strings.Builder
	for _, q := range f.Queues {
		fmt.Fprintf(&b, "queue %q at %s\n", q.Name, q.Pos)
		fmt.Fprintf(&b, "\tenabled=%v interface=%q download=%d upload=%d qdisc=%q script=%q\n",
			q.Enabled, q.Interface, q.Download, q.Upload, q.Qdisc, q.Script)
		fmt.Fprintf(&b, "\tsquash_dscp=%v squash_ingress=%v ingress_ecn=%v egress_ecn=%v\n",
			q.SquashDSCP, q.SquashIngress, q.IngressECN, q.EgressECN)
		fmt.Fprintf(&b, "\tilimit=%d elimit=%d itarget=%s etarget=%s\n", q.ILimit, q.ELimit, target(q.ITarget), target(q.ETarget))
		fmt.Fprintf(&b, "\tiqdisc_opts=%q eqdisc_opts=%q\n", q.IQdiscOpts, q.EQdiscOpts)
		fmt.Fprintf(&b, "\tlinklayer=%q overhead=%d tcMTU=%d tcTSIZE=%d tcMPU=%d llam=%q\n",
			q.LinkLayer, q.Overhead, q.StabMTU, q.StabTSize, q.StabMPU, q.LLAM)
		fmt.Fprintf(&b, "\tdebug_logging=%v verbosity=%d\n", q.DebugLogging, q.Verbosity)
		if a := q.Autorate; !reflect.DeepEqual(a, Autorate{}) {
			dn, up := q.AutorateRange(true), q.AutorateRange(false)
			fmt.Fprintf(&b, "\tautorate=%v download=%d/%d/%d upload=%d/%d/%d target=%v probe=%s reflectors=%q\n",
				a.Enabled, dn.Min, dn.Base, dn.Max, up.Min, up.Base, up.Max, q.AutorateTargetOrDefault(), q.AutorateProbeOrDefault(), a.Reflectors)
		}
		var opts []string
		for k, p := range q.OptionPos {
			opts = append(opts, fmt.Sprintf("%s@%d", k, p.Line))
		}
		sort.Strings(opts)
		fmt.Fprintf(&b, "\tpositions: %s\n", strings.Join(opts, " "))
	}
	for _, w := range f.Warnings {
		fmt.Fprintf(&b, "warning: %s\n", w)
	}
	return b.String()
}

func target(t Target) string {
	switch t.Mode {
	case TargetAuto:
		return "auto"
	case TargetDefault:
		return "default"
	}
	return t.Value.String()
}

func TestGolden(t *testing.T) {
	files, err := filepath.Glob("testdata/*.sqm")
	if err != nil || len(files) == 0 {
		t.Fatalf("no fixtures: %v", err)
	}
	for _, path := range files {
		t.Run(filepath.Base(path), func(t *testing.T) {
			f, err := Load(path)
			if err != nil {
				t.Fatalf("Load: %v", err)
			}
			got := render(f)
			golden := strings.TrimSuffix(path, ".sqm") + ".golden"
			if *update {
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run go test -update)", err)
			}
			if got != string(want) {
				t.Errorf("%s differs from %s:\n--- got\n%s\n--- want\n%s", path, golden, got, want)
			}
		})
	}
}

// TestShippedDefault pins the values of sqm-scripts' shipped /etc/config/sqm
// (sqm-scripts.md §7.18) independently of the golden file.
func TestShippedDefault(t *testing.T) {
	f, err := Load("testdata/default.sqm")
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Queues) != 1 || len(f.Warnings) != 0 {
		t.Fatalf("queues %d, warnings %v; want 1 queue, no warnings", len(f.Queues), f.Warnings)
	}
	q := f.Queues[0]
	want := scriptDefaults()
	want.Name, want.Pos, want.OptionPos = "eth1", Position{File: "testdata/default.sqm", Line: 1}, q.OptionPos
	want.Interface, want.Download, want.Upload, want.Qdisc, want.Script = "eth1", 85000, 10000, "cake", "piece_of_cake"
	if !reflect.DeepEqual(q, want) {
		t.Errorf("got  %+v\nwant %+v", q, want)
	}
	if len(q.OptionPos) != 13 || q.OptionPos["linklayer"].Line != 14 {
		t.Errorf("OptionPos = %v; want 13 options, linklayer at line 14", q.OptionPos)
	}
	if len(f.Enabled()) != 0 {
		t.Errorf("the shipped default is disabled, Enabled() = %v", f.Enabled())
	}
}

// parseOne parses a one-section file with the given option lines.
func parseOne(t *testing.T, lines ...string) (*File, error) {
	t.Helper()
	in := "config queue 'wan'\n"
	for _, l := range lines {
		in += "\t" + l + "\n"
	}
	return Parse("/etc/config/sqm", strings.NewReader(in))
}

func TestOptions(t *testing.T) {
	base := []string{"option interface 'eth0'", "option script 'simple'"}
	tests := []struct {
		option string
		value  string
		check  func(q Queue) bool
	}{
		{"enabled", "1", func(q Queue) bool { return q.Enabled }},
		{"enabled", "0", func(q Queue) bool { return !q.Enabled }},
		{"enabled", "", func(q Queue) bool { return !q.Enabled }},
		{"interface", "pppoe-wan", func(q Queue) bool { return q.Interface == "pppoe-wan" }},
		{"interface", "eth0.2", func(q Queue) bool { return q.Interface == "eth0.2" }},
		{"interface", "enx001122334455", func(q Queue) bool { return q.Interface == "enx001122334455" }},
		{"download", "85000", func(q Queue) bool { return q.Download == 85000 }},
		{"download", "0", func(q Queue) bool { return q.Download == 0 }},
		{"download", "", func(q Queue) bool { return q.Download == 14698 }},
		{"upload", "10000", func(q Queue) bool { return q.Upload == 10000 }},
		{"upload", "", func(q Queue) bool { return q.Upload == 2302 }},
		{"upload", "4294967296", func(q Queue) bool { return q.Upload == MaxKbit }},
		{"qdisc", "cake", func(q Queue) bool { return q.Qdisc == "cake" }},
		{"qdisc", "fq_pie", func(q Queue) bool { return q.Qdisc == "fq_pie" }},
		{"qdisc", "", func(q Queue) bool { return q.Qdisc == "fq_codel" }},
		{"script", "piece_of_cake.qos", func(q Queue) bool { return q.Script == "piece_of_cake" }},
		{"script", "layer_cake", func(q Queue) bool { return q.Script == "layer_cake" }},
		{"script", "simplest_tbf.qos", func(q Queue) bool { return q.Script == "simplest_tbf" }},
		{"script", "police", func(q Queue) bool { return q.Script == "police" }},
		{"squash_dscp", "0", func(q Queue) bool { return !q.SquashDSCP }},
		{"squash_dscp", "", func(q Queue) bool { return q.SquashDSCP }},
		{"squash_ingress", "0", func(q Queue) bool { return !q.SquashIngress }},
		{"squash_ingress", "1", func(q Queue) bool { return q.SquashIngress }},
		{"ingress_ecn", "NOECN", func(q Queue) bool { return !q.IngressECN }},
		{"ingress_ecn", "ECN", func(q Queue) bool { return q.IngressECN }},
		{"ingress_ecn", "", func(q Queue) bool { return q.IngressECN }},
		{"egress_ecn", "NOECN", func(q Queue) bool { return !q.EgressECN }},
		{"egress_ecn", "noecn", func(q Queue) bool { return !q.EgressECN }},
		{"egress_ecn", "", func(q Queue) bool { return q.EgressECN }},
		{"ilimit", "2000", func(q Queue) bool { return q.ILimit == 2000 }},
		{"ilimit", "", func(q Queue) bool { return q.ILimit == 0 }},
		{"elimit", "1001", func(q Queue) bool { return q.ELimit == 1001 }},
		{"itarget", "auto", func(q Queue) bool { return q.ITarget == Target{Mode: TargetAuto} }},
		{"itarget", "AUTO", func(q Queue) bool { return q.ITarget == Target{Mode: TargetAuto} }},
		{"itarget", "", func(q Queue) bool { return q.ITarget == Target{Mode: TargetAuto} }},
		{"itarget", "Default", func(q Queue) bool { return q.ITarget == Target{Mode: TargetDefault} }},
		{"itarget", "5ms", func(q Queue) bool { return q.ITarget == Target{TargetExplicit, 5 * time.Millisecond} }},
		{"etarget", "16857us", func(q Queue) bool { return q.ETarget == Target{TargetExplicit, 16857 * time.Microsecond} }},
		{"etarget", "1s", func(q Queue) bool { return q.ETarget == Target{TargetExplicit, time.Second} }},
		{"etarget", "2.5msec", func(q Queue) bool { return q.ETarget == Target{TargetExplicit, 2500 * time.Microsecond} }},
		{"etarget", "10usecs", func(q Queue) bool { return q.ETarget == Target{TargetExplicit, 10 * time.Microsecond} }},
		{"iqdisc_opts", "nat dual-dsthost ingress", func(q Queue) bool { return q.IQdiscOpts == "nat dual-dsthost ingress" }},
		{"eqdisc_opts", "ack-filter", func(q Queue) bool { return q.EQdiscOpts == "ack-filter" }},
		{"linklayer", "ethernet", func(q Queue) bool { return q.LinkLayer == "ethernet" }},
		{"linklayer", "atm", func(q Queue) bool { return q.LinkLayer == "atm" }},
		{"linklayer", "adsl", func(q Queue) bool { return q.LinkLayer == "atm" }},
		{"linklayer", "", func(q Queue) bool { return q.LinkLayer == "none" }},
		{"overhead", "44", func(q Queue) bool { return q.Overhead == 44 }},
		{"overhead", "-1500", func(q Queue) bool { return q.Overhead == -1500 }},
		{"overhead", "", func(q Queue) bool { return q.Overhead == 0 }},
		{"tcMTU", "1500", func(q Queue) bool { return q.StabMTU == 1500 }},
		{"tcMTU", "", func(q Queue) bool { return q.StabMTU == 2047 }},
		{"tcTSIZE", "128", func(q Queue) bool { return q.StabTSize == 128 }},
		{"tcTSIZE", "", func(q Queue) bool { return q.StabTSize == 512 }},
		{"tcMPU", "64", func(q Queue) bool { return q.StabMPU == 64 }},
		{"linklayer_adaptation_mechanism", "tc_stab", func(q Queue) bool { return q.LLAM == "tc_stab" }},
		{"linklayer_adaptation_mechanism", "htb_private", func(q Queue) bool { return q.LLAM == "htb_private" }},
		{"linklayer_adaptation_mechanism", "cake", func(q Queue) bool { return q.LLAM == "cake" }},
		{"linklayer_adaptation_mechanism", "", func(q Queue) bool { return q.LLAM == "default" }},
		{"debug_logging", "1", func(q Queue) bool { return q.DebugLogging }},
		{"debug_logging", "", func(q Queue) bool { return !q.DebugLogging }},
		{"verbosity", "10", func(q Queue) bool { return q.Verbosity == 10 }},
		{"verbosity", "0", func(q Queue) bool { return q.Verbosity == 0 }},
		{"verbosity", "", func(q Queue) bool { return q.Verbosity == 5 }},
	}
	for _, tt := range tests {
		t.Run(tt.option+"="+tt.value, func(t *testing.T) {
			lines := append(base, fmt.Sprintf("option %s '%s'", tt.option, tt.value))
			f, err := parseOne(t, lines...)
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if len(f.Warnings) != 0 {
				t.Errorf("warnings: %v", f.Warnings)
			}
			q := f.Queues[0]
			if !tt.check(q) {
				t.Errorf("option %s %q resolved to %+v", tt.option, tt.value, q)
			}
			if tt.value != "" && q.OptionPos[tt.option] != (Position{File: "/etc/config/sqm", Line: 4}) {
				t.Errorf("OptionPos[%s] = %v, want /etc/config/sqm:4", tt.option, q.OptionPos[tt.option])
			}
		})
	}
}

func TestOptionErrors(t *testing.T) {
	tests := []struct {
		option, value, want string
	}{
		{"enabled", "yes", `/etc/config/sqm:2: queue "wan" option enabled: "yes" is not 0 or 1 ("1" enables the section, "0" disables it (sqm-scripts starts a section only if enabled is 1))`},
		{"enabled", "01", `"01" is not 0 or 1`},
		{"interface", "averyveryverylongname", `/etc/config/sqm:2: queue "wan" option interface: interface name "averyveryverylongname" is 21 characters long; Linux allows at most 15`},
		{"interface", "eth0:1", `interface name "eth0:1" contains '/', ':' or white space, which Linux does not allow`},
		{"interface", "a b", `interface name "a b" contains '/', ':' or white space`},
		{"interface", "..", `interface name ".." is not allowed by Linux`},
		{"download", "85mbit", `/etc/config/sqm:2: queue "wan" option download: "85mbit" is not a number of kbit/s (sqm-scripts takes download in kbit/s, e.g. 85000)`},
		{"download", "-1", `"-1" is not a number of kbit/s`},
		{"download", "+5", `"+5" is not a number of kbit/s`},
		{"upload", "1.5", `option upload: "1.5" is not a number of kbit/s (sqm-scripts takes upload in kbit/s, e.g. 10000)`},
		{"upload", "4294967297", `option upload: "4294967297" kbit/s is too large (at most 4294967296 kbit/s`},
		{"upload", "99999999999999999999999", `is not a number of kbit/s`},
		{"qdisc", "Cake", `option qdisc: "Cake" is not a qdisc name (lower-case letters, digits and _, e.g. cake or fq_codel)`},
		{"script", "hfsc_lite.qos", `option script: unknown script "hfsc_lite.qos"; use one of simplest, simple, simplest_tbf, piece_of_cake, layer_cake, police, codel_police (with or without .qos)`},
		{"squash_dscp", "true", `option squash_dscp: "true" is not 0 or 1 ("1" washes DSCP marks of received packets, "0" keeps them)`},
		{"squash_ingress", "2", `option squash_ingress: "2" is not 0 or 1`},
		{"ingress_ecn", "on", `option ingress_ecn: "on" is not ECN or NOECN`},
		{"egress_ecn", "Ecn", `option egress_ecn: "Ecn" is not ECN or NOECN`},
		{"ilimit", "4294967296", `option ilimit: 4294967296 is out of range: a queue limit in packets (bytes for bfifo) must be from 1 to 4294967295`},
		{"elimit", "1k", `option elimit: "1k" is not a queue limit in packets (bytes for bfifo) (a whole number from 1 to 4294967295, e.g. 1001)`},
		{"itarget", "4295s", `option itarget: 4295s is out of range: a target must be at most 1h11m34.967295s`},
		{"itarget", "20", `option itarget: "20" has no unit; use auto, default, or a time with a unit (s, sec, secs, ms, msec, msecs, us, usec, usecs), e.g. 5ms`},
		{"itarget", "5ns", `option itarget: "5ns" is not a target; use auto`},
		{"etarget", "automatic", `option etarget: "automatic" is not a target`},
		{"linklayer", "vdsl", `option linklayer: unknown link layer "vdsl"; use none, ethernet or atm (adsl means atm)`},
		{"overhead", "-1501", `option overhead: -1501 is out of range: a per-packet overhead in bytes must be from -1500 to 1500`},
		{"overhead", "1501", `option overhead: 1501 is out of range: a per-packet overhead in bytes must be from -1500 to 1500`},
		{"overhead", "99999999999999999999", `option overhead: 99999999999999999999 is out of range`},
		{"overhead", "4x", `option overhead: "4x" is not a per-packet overhead in bytes (a whole number from -1500 to 1500, e.g. 34 or 44)`},
		{"overhead", "+4", `option overhead: "+4" is not a per-packet overhead`},
		{"tcMTU", "-1", `option tcMTU: -1 is out of range: a size-table MTU in bytes must be from 0 to 65536`},
		{"tcMTU", "65537", `option tcMTU: 65537 is out of range`},
		{"tcTSIZE", "big", `option tcTSIZE: "big" is not a size-table size in cells (a whole number from 0 to 32749, e.g. 512)`},
		// Issue 10 item 7: this made the size-table code allocate 8 GB.
		{"tcTSIZE", "4000000000", `/etc/config/sqm:2: queue "wan" option tcTSIZE: 4000000000 is out of range: a size-table size in cells must be from 0 to 32749`},
		{"tcTSIZE", "32750", `option tcTSIZE: 32750 is out of range`},
		{"tcMPU", "4294967296", `option tcMPU: 4294967296 is out of range: a minimum packet size in bytes must be from 0 to 65535`},
		{"tcMPU", "65536", `option tcMPU: 65536 is out of range`},
		{"linklayer_adaptation_mechanism", "stab", `option linklayer_adaptation_mechanism: unknown mechanism "stab"; use default, cake, htb_private or tc_stab`},
		{"debug_logging", "on", `option debug_logging: "on" is not 0 or 1`},
		{"verbosity", "3", `option verbosity: "3" is not a log level; use 0 (silent), 1 (error), 2 (warning), 5 (info), 8 (debug) or 10 (trace)`},
	}
	for _, tt := range tests {
		t.Run(tt.option+"="+tt.value, func(t *testing.T) {
			// The bad option comes first (line 2) in an enabled
			// section: that section is refused with file:line.
			bad := fmt.Sprintf("option %s '%s'", tt.option, tt.value)
			var rest []string
			for _, o := range []string{"interface 'eth0'", "script 'simple'", "enabled '1'"} {
				if !strings.HasPrefix(o, tt.option+" ") {
					rest = append(rest, "option "+o)
				}
			}
			f, err := parseOne(t, append([]string{bad}, rest...)...)
			if err == nil {
				t.Fatalf("Parse succeeded, want error %q", tt.want)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error = %q\nwant it to contain %q", err, tt.want)
			}
			var oe *OptionError
			if !errors.As(err, &oe) || oe.Option != tt.option || oe.Section != "wan" || oe.Pos.Line != 2 {
				t.Errorf("error %#v is not an *OptionError for option %s at line 2", oe, tt.option)
			}
			if f == nil || len(f.Queues) != 0 || len(f.Refused) != 1 || f.Refused[0].Section != "wan" || f.Refused[0].Pos.Line != 1 {
				t.Fatalf("want the section refused and nothing to start; got %+v", f)
			}
			if tt.option == "enabled" {
				return
			}
			// Disabled, the same value is a warning at most: sqm-scripts
			// never reads a disabled section (issue 23 item 1).
			rest[len(rest)-1] = "option enabled '0'"
			f, err = parseOne(t, append([]string{bad}, rest...)...)
			if err != nil || len(f.Refused) != 0 || len(f.Queues) != 1 {
				t.Fatalf("disabled: err %v, refused %v", err, f.Refused)
			}
			if len(f.Warnings) != 1 || !strings.Contains(f.Warnings[0].String(), tt.want) || !strings.Contains(f.Warnings[0].String(), "section is disabled") {
				t.Errorf("disabled: warnings %v, want one with %q", f.Warnings, tt.want)
			}
		})
	}
}

func TestEnabledSectionsMustBeComplete(t *testing.T) {
	tests := []struct {
		name  string
		lines []string
		want  string
	}{
		{"no interface", []string{"option enabled 1", "option script simple"},
			`/etc/config/sqm:1: queue "wan" option interface: no interface given; set option interface to the device to shape, e.g. eth0 or pppoe-wan`},
		{"no script", []string{"option enabled 1", "option interface eth0"},
			`/etc/config/sqm:1: queue "wan" option script: no script given; sqm-scripts refuses to start without one; use one of simplest, simple, simplest_tbf, piece_of_cake, layer_cake, police`},
		{"empty script", []string{"option enabled 1", "option interface eth0", "option script ''"},
			`option script: no script given`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := parseOne(t, tt.lines...)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error = %v, want %q", err, tt.want)
			}
			if len(f.Refused) != 1 || len(f.Queues) != 0 {
				t.Errorf("refused %v, queues %v; want the section refused", f.Refused, f.Queues)
			}
			// The same section disabled is fine: sqm-scripts skips it.
			lines := append([]string{}, tt.lines...)
			lines[0] = "option enabled 0"
			if _, err := parseOne(t, lines...); err != nil {
				t.Errorf("disabled: %v", err)
			}
		})
	}
}

func TestAllErrorsReported(t *testing.T) {
	in := "config queue a\n\toption enabled 1\n\toption download x\n\toption upload y\nconfig queue\n\toption enabled 1\n\toption verbosity 4\n"
	_, err := Parse("f", strings.NewReader(in))
	if err == nil {
		t.Fatal("no error")
	}
	want := `f:3: queue "a" option download: "x" is not a number of kbit/s (sqm-scripts takes download in kbit/s, e.g. 85000)
f:4: queue "a" option upload: "y" is not a number of kbit/s (sqm-scripts takes upload in kbit/s, e.g. 10000)
f:7: queue "@queue[1]" option verbosity: "4" is not a log level; use 0 (silent), 1 (error), 2 (warning), 5 (info), 8 (debug) or 10 (trace)`
	if err.Error() != want {
		t.Errorf("error =\n%s\nwant\n%s", err, want)
	}
}

// TestSectionsStandAlone is issue 23 item 1: a disabled section naming a
// recipe sqm does not have, and an enabled section with a broken value,
// must not keep the good section from starting. The broken one is refused
// with file:line; the disabled one is a warning.
func TestSectionsStandAlone(t *testing.T) {
	in := `config queue 'old'
	option enabled '0'
	option interface 'eth2'
	option script 'hfsc_lite.qos'

config queue 'broken'
	option enabled '1'
	option interface 'eth1'
	option script 'simple'
	option download '85mbit'
	option upload '1.5'

config queue 'good'
	option enabled '1'
	option interface 'eth0'
	option script 'simplest'

config queue 'noiface'
	option enabled '1'
	option interface 'eth0:1'
	option script 'simplest'
	option ilimit '0'
`
	f, err := Parse("/etc/config/sqm", strings.NewReader(in))
	if f == nil {
		t.Fatalf("Parse returned no file: %v", err)
	}
	var names []string
	for _, q := range f.Enabled() {
		names = append(names, q.Name)
	}
	if strings.Join(names, ",") != "good" {
		t.Errorf("Enabled() = %v, want good", names)
	}
	if len(f.Queues) != 2 || f.Queues[0].Name != "old" || f.Queues[0].Enabled {
		t.Errorf("Queues = %+v, want old (disabled) and good", f.Queues)
	}
	if len(f.Refused) != 2 {
		t.Fatalf("Refused = %v, want broken and noiface", f.Refused)
	}
	b, n := f.Refused[0], f.Refused[1]
	if b.Section != "broken" || b.Interface != "eth1" || b.Pos.String() != "/etc/config/sqm:6" || len(b.Errs) != 2 {
		t.Errorf("refused[0] = %+v", b)
	}
	if n.Section != "noiface" || n.Interface != "" || n.Pos.Line != 18 {
		t.Errorf("refused[1] = %+v (its interface is not a valid name, so it is not recorded)", n)
	}
	want := `/etc/config/sqm:10: queue "broken" option download: "85mbit" is not a number of kbit/s (sqm-scripts takes download in kbit/s, e.g. 85000)
/etc/config/sqm:11: queue "broken" option upload: "1.5" is not a number of kbit/s (sqm-scripts takes upload in kbit/s, e.g. 10000)
/etc/config/sqm:20: queue "noiface" option interface: interface name "eth0:1" contains '/', ':' or white space, which Linux does not allow`
	if err == nil || err.Error() != want || f.Err().Error() != want {
		t.Errorf("error =\n%v\nwant\n%s", err, want)
	}
	var oe *OptionError
	if !errors.As(err, &oe) || oe.Section != "broken" || oe.Pos.Line != 10 {
		t.Errorf("errors.As(*OptionError) = %+v", oe)
	}
	var warns []string
	for _, w := range f.Warnings {
		warns = append(warns, w.String())
	}
	wantWarns := []string{
		`/etc/config/sqm:4: queue "old" option script: unknown script "hfsc_lite.qos"; use one of simplest, simple, simplest_tbf, piece_of_cake, layer_cake, police, codel_police (with or without .qos) (the section is disabled, so this does not matter until it is enabled)`,
		`/etc/config/sqm:22: queue "noiface" option ilimit: "0" means the default limit (1001 packets, where the qdisc takes one); sqm-scripts would pass limit 0 to tc, which drops nearly everything (leave it empty instead)`,
	}
	if !reflect.DeepEqual(warns, wantWarns) {
		t.Errorf("warnings =\n%s\nwant\n%s", strings.Join(warns, "\n"), strings.Join(wantWarns, "\n"))
	}
}

// TestLimitZeroIsDefault: LuCI's form accepts ilimit/elimit 0; it means
// the default, as an empty value does, with a warning.
func TestLimitZeroIsDefault(t *testing.T) {
	for _, v := range []string{"0", "00"} {
		f, err := parseOne(t, "option enabled 1", "option interface eth0", "option script simple", "option ilimit "+v, "option elimit "+v)
		if err != nil {
			t.Fatalf("%s: %v", v, err)
		}
		q := f.Queues[0]
		if q.ILimit != 0 || q.ELimit != 0 || len(f.Warnings) != 2 || f.Warnings[0].Option != "ilimit" || f.Warnings[1].Option != "elimit" {
			t.Errorf("%s: ilimit %d elimit %d, warnings %v; want the default (0) and a warning each", v, q.ILimit, q.ELimit, f.Warnings)
		}
	}
}

func TestSyntaxErrorIsUCIError(t *testing.T) {
	_, err := Parse("/etc/config/sqm", strings.NewReader("config queue wan\n\toption download '85000\n"))
	var ue *uci.Error
	if !errors.As(err, &ue) || ue.Line != 2 {
		t.Fatalf("error = %v, want a *uci.Error", err)
	}
}

func TestLoadMissingFile(t *testing.T) {
	_, err := Load(filepath.Join(t.TempDir(), "sqm"))
	if err == nil || !strings.Contains(err.Error(), "load config: open ") || !errors.Is(err, os.ErrNotExist) {
		t.Errorf("error = %v, want a wrapped ErrNotExist", err)
	}
}

func TestQueueLookup(t *testing.T) {
	f, err := Load("testdata/luci-anonymous.sqm")
	if err != nil {
		t.Fatal(err)
	}
	for ref, iface := range map[string]string{"@queue[0]": "pppoe-wan", "@queue[1]": "eth0.2", "@queue[-1]": "eth0.2"} {
		q := f.Queue(ref)
		if q == nil || q.Interface != iface {
			t.Errorf("Queue(%q) = %+v, want interface %s", ref, q, iface)
		}
	}
	if q := f.Queue("nope"); q != nil {
		t.Errorf("Queue(nope) = %+v", q)
	}
	if got := len(f.Enabled()); got != 1 {
		t.Errorf("Enabled() has %d queues, want 1", got)
	}
}

func TestDefaultsValidate(t *testing.T) {
	q := Defaults()
	if err := q.Validate(); err == nil || !strings.Contains(err.Error(), "command line: option interface: no interface given") {
		t.Errorf("Defaults().Validate() = %v, want a missing-interface error at the command line", err)
	}
	q.Interface = "eth0"
	if err := q.Validate(); err != nil {
		t.Errorf("Defaults() with an interface: %v", err)
	}
	if q.Download != 14698 || q.Upload != 2302 || q.Script != "piece_of_cake" || q.Qdisc != "cake" || !q.SquashDSCP ||
		!q.SquashIngress || !q.IngressECN || !q.EgressECN || q.LinkLayer != "none" || q.StabMTU != 2047 ||
		q.StabTSize != 512 || q.LLAM != "default" || q.Verbosity != 5 || q.Enabled {
		t.Errorf("Defaults() = %+v", q)
	}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name   string
		modify func(q *Queue)
		want   string // "" = valid
	}{
		{"ok", func(q *Queue) {}, ""},
		{"script with .qos", func(q *Queue) { q.Script = "simple.qos" }, ""},
		{"adsl", func(q *Queue) { q.LinkLayer = "adsl" }, ""},
		{"bad iface", func(q *Queue) { q.Interface = "a/b" }, `option interface: interface name "a/b" contains '/'`},
		{"bad script", func(q *Queue) { q.Script = "foo" }, `option script: unknown script "foo"`},
		{"no script", func(q *Queue) { q.Script = "" }, `option script: no script given`},
		{"bad qdisc", func(q *Queue) { q.Qdisc = "" }, `option qdisc: "" is not a qdisc name`},
		{"huge rate", func(q *Queue) { q.Download = MaxKbit + 1 }, `option download: 4294967297 kbit/s is too large`},
		{"bad linklayer", func(q *Queue) { q.LinkLayer = "" }, `option linklayer: unknown link layer ""`},
		{"bad overhead", func(q *Queue) { q.Overhead = -2000 }, `option overhead: -2000 is out of range: a per-packet overhead in bytes must be from -1500 to 1500`},
		{"huge overhead", func(q *Queue) { q.Overhead = 1<<31 - 1 }, `option overhead: 2147483647 is out of range`},
		{"huge tsize", func(q *Queue) { q.StabTSize = 4000000000 }, `option tcTSIZE: 4000000000 is out of range: a size-table size in cells must be from 0 to 32749`},
		{"max tsize", func(q *Queue) { q.StabTSize = MaxStabTSize }, ""},
		{"huge stab mtu", func(q *Queue) { q.StabMTU = 1 << 20 }, `option tcMTU: 1048576 is out of range`},
		{"huge mpu", func(q *Queue) { q.StabMPU = 1 << 20 }, `option tcMPU: 1048576 is out of range`},
		{"default limit", func(q *Queue) { q.ILimit = 0 }, ""},
		{"huge target", func(q *Queue) { q.ITarget = Target{TargetExplicit, 2 * time.Hour} }, `option itarget: target 2h0m0s is out of range`},
		{"bad llam", func(q *Queue) { q.LLAM = "" }, `option linklayer_adaptation_mechanism: unknown mechanism ""`},
		{"negative target", func(q *Queue) { q.ETarget = Target{TargetExplicit, -1} }, `option etarget: target -1ns is negative`},
		{"bad verbosity", func(q *Queue) { q.Verbosity = 7 }, `option verbosity: 7 is not a log level`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q := Defaults()
			q.Interface = "eth0"
			q.Name = "cli"
			tt.modify(&q)
			err := q.Validate()
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("Validate: %v", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Errorf("Validate = %v, want %q", err, tt.want)
			}
		})
	}
}

func FuzzParse(f *testing.F) {
	files, _ := filepath.Glob("testdata/*.sqm")
	for _, p := range files {
		if b, err := os.ReadFile(p); err == nil {
			f.Add(string(b))
		}
	}
	for _, opt := range []string{"tcTSIZE '4000000000'", "tcTSIZE '32749'", "tcMTU '65536'", "tcMPU '65535'", "overhead '-1500'", "overhead '1500'", "etarget '4294s'", "ilimit '4294967295'"} {
		f.Add("config queue 'q'\n\toption " + opt + "\n")
	}
	f.Add("config queue 'old'\n\toption enabled '0'\n\toption script 'hfsc_lite.qos'\nconfig queue 'b'\n\toption enabled '1'\n\toption interface 'eth1'\n\toption download 'x'\nconfig queue\n\toption enabled '1'\n\toption interface 'eth0'\n\toption script 'simple'\n\toption ilimit '0'\n")
	for _, opt := range []string{"autorate_target '0.5'", "autorate_target '1e3'", "autorate_target '1000.0001'", "autorate_reflector '[::1]:1 a.b:65535 ::ffff:1.2.3.4'",
		"autorate_reflector '1::2::3'", "autorate_upload_min '99999999999999999999'", "autorate_probe 'both'"} {
		f.Add("config queue 'q'\n\toption enabled 1\n\toption interface eth0\n\toption script simple\n\toption autorate 1\n\toption " + opt + "\n")
	}
	f.Fuzz(func(t *testing.T, in string) {
		file, err := Parse("fuzz", strings.NewReader(in))
		if file == nil {
			var ue *uci.Error
			if !errors.As(err, &ue) || err.Error() == "" {
				t.Fatalf("no file, and the error %v is not a UCI syntax error", err)
			}
			return
		}
		// Every section is either usable or refused, never lost, and the
		// error is exactly the refusals (issue 23 item 1).
		if (err == nil) != (len(file.Refused) == 0) || (err != nil && err.Error() != file.Err().Error()) {
			t.Fatalf("error %v does not match refused %v", err, file.Refused)
		}
		if n := len(file.UCI.SectionsOfType("queue")); n != len(file.Queues)+len(file.Refused) {
			t.Fatalf("%d queue sections, %d usable + %d refused", n, len(file.Queues), len(file.Refused))
		}
		for _, r := range file.Refused {
			if len(r.Errs) == 0 || r.Error() == "" || r.Pos.Line == 0 {
				t.Fatalf("refusal %+v has no error or position", r)
			}
			for _, e := range r.Errs {
				var oe *OptionError
				if !errors.As(e, &oe) || oe.Section != r.Section || oe.Pos.Line == 0 {
					t.Fatalf("refusal of %q: %v is not an *OptionError of the section with a line", r.Section, e)
				}
			}
			if r.Interface != "" && CheckIfName(r.Interface) != nil {
				t.Fatalf("refusal records the invalid interface %q", r.Interface)
			}
		}
		for _, q := range file.Queues {
			if q.Enabled {
				if err := q.Validate(); err != nil {
					t.Fatalf("enabled queue %q passed Parse but not Validate: %v", q.Name, err)
				}
			}
			// Every section's numbers are within the kernel's bounds,
			// disabled ones included (issue 10 item 7).
			for option, n := range map[string]int64{"overhead": int64(q.Overhead), "tcMTU": int64(q.StabMTU),
				"tcTSIZE": int64(q.StabTSize), "tcMPU": int64(q.StabMPU)} {
				if msg := rangeMsg(option, n); msg != "" {
					t.Fatalf("queue %q passed Parse with %s", q.Name, msg)
				}
			}
			if q.Enabled && q.Autorate.Enabled {
				for _, ingress := range []bool{false, true} {
					if r := q.AutorateRange(ingress); r.Base != 0 && !(MinRateKbit <= r.Min && r.Min <= r.Base && r.Base <= r.Max && r.Max <= MaxKbit) {
						t.Fatalf("queue %q passed Parse with autorate rates %+v", q.Name, r)
					}
				}
				if d := q.AutorateTargetOrDefault(); d < AutorateMinTarget || d > AutorateMaxTarget {
					t.Fatalf("queue %q passed Parse with autorate target %v", q.Name, d)
				}
			}
			if q.Download > MaxKbit || q.Upload > MaxKbit || q.ITarget.Value > MaxTarget || q.ETarget.Value > MaxTarget {
				t.Fatalf("queue %q passed Parse with a rate or target out of range: %+v", q.Name, q)
			}
			checkFormat(t, q)
			s := file.UCI.Lookup(q.Name)
			if s == nil {
				t.Fatalf("queue %q not found in the UCI file", q.Name)
			}
			for _, o := range s.Options {
				if _, ok := q.OptionPos[o.Name]; !ok {
					t.Fatalf("queue %q: no position for option %q", q.Name, o.Name)
				}
			}
		}
	})
}

// TestDistSample keeps the sample shipped for OpenWrt loadable without
// warnings, so users start from a file sqm accepts as is.
func TestDistSample(t *testing.T) {
	const path = "../../dist/openwrt/sqm.config"
	if _, err := os.Stat(path); err != nil {
		t.Skipf("no sample: %v", err)
	}
	f, err := Load(path)
	if err != nil {
		t.Fatalf("the shipped sample does not load: %v", err)
	}
	if len(f.Queues) == 0 || len(f.Warnings) != 0 {
		t.Errorf("sample: %d queues, warnings %v; want at least one queue and no warnings", len(f.Queues), f.Warnings)
	}
}

func TestEnabledSkipsSecondSectionOnAnInterface(t *testing.T) {
	f, err := Load("testdata/warnings.sqm")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, q := range f.Enabled() {
		got = append(got, q.Name)
	}
	if strings.Join(got, ",") != "wan" {
		t.Errorf("Enabled() = %v, want only wan (wan_copy shapes the same interface)", got)
	}
	if len(f.Queues) != 3 || !f.Queues[1].Enabled {
		t.Errorf("Queues keeps every section as written; got %d, wan_copy enabled=%v", len(f.Queues), f.Queues[1].Enabled)
	}
}

// TestEffective: the first *enabled* section of an interface starts, later
// enabled ones are skipped with a warning naming both, and other
// interfaces are unaffected.
func TestEffective(t *testing.T) {
	mk := func(name, iface string, on bool, line int) Queue {
		return Queue{Name: name, Interface: iface, Enabled: on, Pos: Position{File: "sqm", Line: line},
			OptionPos: map[string]Position{"interface": {File: "sqm", Line: line + 1}}}
	}
	qs := []Queue{mk("a", "eth0", false, 1), mk("b", "eth0", true, 5), mk("c", "eth1", true, 9), mk("d", "eth0", true, 13), mk("e", "eth0", true, 17)}
	start, skipped := Effective(qs)
	var names []string
	for _, q := range start {
		names = append(names, q.Name)
	}
	if strings.Join(names, ",") != "b,c" {
		t.Errorf("started %v, want b,c", names)
	}
	if len(skipped) != 2 {
		t.Fatalf("skipped %v, want d and e", skipped)
	}
	if got := skipped[0].String(); !strings.HasPrefix(got, `sqm:14: queue "d" option interface: section skipped: interface eth0 is already shaped by queue "b" (sqm:5)`) {
		t.Errorf("warning %q", got)
	}
}
