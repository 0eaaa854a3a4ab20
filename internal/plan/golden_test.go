package plan

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"sqm/internal/config"
)

var update = flag.Bool("update", false, "rewrite testdata golden files")

// baseQueue is the shipped sample section with sqm-scripts' defaults.
func baseQueue() *config.Queue {
	return &config.Queue{
		Name: "wan", Interface: "eth0", Enabled: true,
		Download: 85000, Upload: 10000, Qdisc: "fq_codel", Script: "simple",
		SquashDSCP: true, SquashIngress: true, IngressECN: true, EgressECN: true,
		LinkLayer: "none", StabMTU: 2047, StabTSize: 512, LLAM: "default",
	}
}

// variant is one configuration of a golden file.
type variant struct {
	name string
	mod  func(q *config.Queue)
}

func lla(ll, llam string, overhead int, mpu uint32) func(q *config.Queue) {
	return func(q *config.Queue) { q.LinkLayer, q.LLAM, q.Overhead, q.StabMPU = ll, llam, overhead, mpu }
}

// sampleOpts are options each leaf accepts, for the opts variant.
var sampleOpts = map[string]string{
	"fq_codel": "memory_limit 4mb ce_threshold 2ms",
	"codel":    "ce_threshold 2ms",
	"pie":      "tupdate 15ms bytemode",
	"fq_pie":   "flows 2048 ecn_prob 20",
	"cake":     "dual-srchost ack-filter rtt 50ms",
	"sfq":      "perturb 10 depth 64",
	"pfifo":    "limit 500",
	"bfifo":    "limit 64k",
}

func variantsFor(script, qdisc string) []variant {
	vs := []variant{
		{"lla none, both directions", func(q *config.Queue) {}},
		{"lla default ethernet overhead 38 mpu 64", lla("ethernet", "default", 38, 64)},
		{"lla tc_stab atm overhead 44", lla("atm", "tc_stab", 44, 0)},
		{"lla cake atm overhead 44", lla("atm", "cake", 44, 0)},
		{"lla htb_private atm overhead 44", lla("atm", "htb_private", 44, 0)},
		// Above 70 bytes sqm-scripts' burst no longer holds a full frame.
		{"lla tc_stab atm overhead 100", lla("atm", "tc_stab", 100, 0)},
		{"egress only (download 0)", func(q *config.Queue) { q.Download = 0 }},
		{"ingress only (upload 0)", func(q *config.Queue) { q.Upload = 0 }},
		{"slow uplink 830 kbit, noecn, explicit/default targets, opts", func(q *config.Queue) {
			q.Upload, q.EgressECN = 830, false
			q.ITarget = config.Target{Mode: config.TargetExplicit, Value: 5 * time.Millisecond}
			q.ETarget = config.Target{Mode: config.TargetDefault}
			q.ILimit, q.ELimit = 500, 0
			opts := sampleOpts[qdisc]
			if script == "simplest_tbf" && qdisc == "cake" {
				opts = sampleOpts["fq_codel"] // the leaf falls back to fq_codel
			}
			q.IQdiscOpts, q.EQdiscOpts = opts, opts
			switch script { // their ingress is no leaf qdisc
			case "codel_police":
				q.IQdiscOpts = "flowblind"
			case "police":
				q.IQdiscOpts = "burst 250k"
			}
		}},
	}
	if script == "simple" || script == "layer_cake" || script == "piece_of_cake" {
		vs = append(vs,
			variant{"squash_ingress 0 (ingress tiers)", func(q *config.Queue) { q.SquashIngress = false }},
			variant{"squash_ingress 0 squash_dscp 0", func(q *config.Queue) { q.SquashIngress, q.SquashDSCP = false, false }},
		)
	}
	if script == "simple" || script == "piece_of_cake" {
		vs = append(vs, variant{"autorate 1, upload max and target set, two reflectors", func(q *config.Queue) {
			q.Autorate = config.Autorate{Enabled: true, UploadMax: 15000, Target: 10 * time.Millisecond, Reflectors: []string{"9.9.9.9", "irtt.example.net:2112"}}
		}})
	}
	return vs
}

type goldenCase struct {
	Variant string `json:"variant"`
	Plan    *Plan  `json:"plan"`
	// DSCPFilters names the trees whose Filters were the standard DSCP set
	// (testdata/dscp-filters.jsonl) and were left out to keep files small.
	DSCPFilters []string `json:"dscp_filters,omitempty"`
}

// elideDSCPFilters drops the standard filter set from a copy of p's trees
// after checking it is exactly that set.
func elideDSCPFilters(t *testing.T, c *goldenCase) {
	t.Helper()
	std, _ := json.Marshal(dscpFilters(hRoot))
	cp := *c.Plan
	check := func(name string, tr *Tree) *Tree {
		if tr == nil || tr.Filters == nil {
			return tr
		}
		got, _ := json.Marshal(tr.Filters)
		if !bytes.Equal(got, std) {
			t.Fatalf("%s: %s filters are not the standard DSCP set", c.Variant, name)
		}
		c.DSCPFilters = append(c.DSCPFilters, name)
		tc := *tr
		tc.Filters = nil
		return &tc
	}
	cp.Egress = check("egress", cp.Egress)
	if cp.Ingress != nil {
		in := *cp.Ingress
		in.Shaper = check("ingress", in.Shaper)
		cp.Ingress = &in
	}
	c.Plan = &cp
}

// stdFilterShell is the standard DSCP filter set as RenderShell writes it
// for dev.
func stdFilterShell(dev string) string {
	var w strings.Builder
	for _, f := range dscpFilters(hRoot) {
		renderFilter(&w, dev, f)
	}
	return w.String()
}

// elideDSCPShell replaces each tree's standard filter block in a rendered
// script by one line naming testdata/dscp-filters.tc, after checking the
// block is there exactly: the .tc goldens stay small and still show any
// difference.
func elideDSCPShell(t *testing.T, p *Plan, sh string) string {
	t.Helper()
	for _, tr := range []*Tree{p.Egress, p.shaper()} {
		if tr == nil || tr.Filters == nil {
			continue
		}
		std := stdFilterShell(tr.Device)
		if !strings.Contains(sh, std) {
			t.Fatalf("%s: filters on %s are not the standard DSCP set as rendered", p.Section, tr.Device)
		}
		sh = strings.Replace(sh, std, "# [the standard DSCP filter set on "+tr.Device+", see testdata/dscp-filters.tc]\n", 1)
	}
	return sh
}

func (p *Plan) shaper() *Tree {
	if p.Ingress == nil {
		return nil
	}
	return p.Ingress.Shaper
}

func TestGoldenDSCPFilters(t *testing.T) {
	checkGolden(t, "dscp-filters.tc", []byte(stdFilterShell("DEV")))
	var b bytes.Buffer
	for _, f := range dscpFilters(hRoot) {
		line, err := json.Marshal(f)
		if err != nil {
			t.Fatal(err)
		}
		b.Write(append(line, '\n'))
	}
	checkGolden(t, "dscp-filters.jsonl", b.Bytes())
}

// TestGolden builds every recipe x leaf qdisc x link-layer mechanism x
// direction combination and compares the plans (JSON) and their shell
// rendering (.tc) with testdata; -update rewrites them.
func TestGolden(t *testing.T) {
	for _, script := range config.Scripts() {
		qdiscs := leafQdiscList()
		if script == "piece_of_cake" || script == "layer_cake" {
			qdiscs = []string{"cake"}
		}
		for _, qd := range qdiscs {
			name := script + "-" + qd
			t.Run(name, func(t *testing.T) {
				var tc bytes.Buffer
				var cases []goldenCase
				for _, v := range variantsFor(script, qd) {
					q := baseQueue()
					q.Script, q.Qdisc = script, qd
					v.mod(q)
					p, err := Build(q, Env{MTU: 1500})
					if err != nil {
						t.Fatalf("%s: %v", v.name, err)
					}
					if err := p.Validate(); err != nil {
						t.Errorf("%s: %v", v.name, err)
					}
					fmt.Fprintf(&tc, "######## %s\n%s######## remove\n%s\n", v.name, elideDSCPShell(t, p, RenderShell(p)), RenderRemove(p))
					cases = append(cases, goldenCase{Variant: v.name, Plan: p})
				}
				// JSON Lines, one variant a line: indented JSON of the
				// simple.qos filter sets would be megabytes.
				var js bytes.Buffer
				for _, c := range cases {
					elideDSCPFilters(t, &c)
					line, err := json.Marshal(c)
					if err != nil {
						t.Fatal(err)
					}
					js.Write(append(line, '\n'))
					// Plans survive JSON: decoding and encoding again
					// gives the same bytes.
					var back goldenCase
					if err := json.Unmarshal(line, &back); err != nil {
						t.Fatalf("%s: decode: %v", c.Variant, err)
					}
					if again, _ := json.Marshal(back); !bytes.Equal(again, line) {
						t.Fatalf("%s: JSON round trip changed the plan:\n%s\n%s", c.Variant, line, again)
					}
				}
				checkGolden(t, name+".tc", tc.Bytes())
				checkGolden(t, name+".jsonl", js.Bytes())
			})
		}
	}
}

func checkGolden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./internal/plan -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		gl, wl := strings.Split(string(got), "\n"), strings.Split(string(want), "\n")
		for i := 0; i < len(gl) || i < len(wl); i++ {
			var g, w string
			if i < len(gl) {
				g = gl[i]
			}
			if i < len(wl) {
				w = wl[i]
			}
			if g != w {
				t.Fatalf("%s differs from golden at line %d:\n got: %s\nwant: %s\n(run with -update if the change is intended)", path, i+1, g, w)
			}
		}
	}
}
