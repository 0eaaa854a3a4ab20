package plan

import (
	"strings"
	"testing"
	"time"

	"sqm/internal/config"
)

// TestCodelPolicer pins how codel_police's parameters follow from the
// queue section (the reasoning is on codelPolicer).
func TestCodelPolicer(t *testing.T) {
	ms := time.Millisecond
	for _, c := range []struct {
		name string
		mod  func(q *config.Queue)
		want CodelPolice
	}{
		{"50 Mbit auto", func(q *config.Queue) { q.Download = 50000 },
			CodelPolice{RateBits: 50e6, Target: 5 * ms, Interval: 100 * ms, Limit: 20 * ms, MTU: 1514, ECN: true, Flows: true}},
		// Below 2.8 Mbit/s one ATM-expanded full packet takes longer
		// than 5 ms: target and interval grow with it, as fq_codel's.
		{"1 Mbit auto", func(q *config.Queue) { q.Download = 1000 },
			CodelPolice{RateBits: 1e6, Target: 13992 * time.Microsecond, Interval: 108992 * time.Microsecond, Limit: 193792 * time.Microsecond, MTU: 1514, ECN: true, Flows: true}},
		{"itarget explicit", func(q *config.Queue) {
			q.Download, q.ITarget = 50000, config.Target{Mode: config.TargetExplicit, Value: 2 * ms}
		}, CodelPolice{RateBits: 50e6, Target: 2 * ms, Interval: 97 * ms, Limit: 8 * ms, MTU: 1514, ECN: true, Flows: true}},
		// At 1 Mbit/s 16 full frames (194 ms) exceed four targets.
		{"itarget default", func(q *config.Queue) {
			q.Download, q.ITarget = 1000, config.Target{Mode: config.TargetDefault}
		}, CodelPolice{RateBits: 1e6, Target: 5 * ms, Interval: 100 * ms, Limit: 193792 * time.Microsecond, MTU: 1514, ECN: true, Flows: true}},
		// 100 frames of 1514 bytes at 8 Mbit/s: 151.4 ms.
		{"ilimit", func(q *config.Queue) { q.Download, q.ILimit = 8000, 100 },
			CodelPolice{RateBits: 8e6, Target: 5 * ms, Interval: 100 * ms, Limit: 151400 * time.Microsecond, MTU: 1514, ECN: true, Flows: true}},
		{"noecn flowblind", func(q *config.Queue) { q.Download, q.IngressECN, q.IQdiscOpts = 50000, false, "flows flowblind" },
			CodelPolice{RateBits: 50e6, Target: 5 * ms, Interval: 100 * ms, Limit: 20 * ms, MTU: 1514, ECN: false, Flows: false}},
	} {
		t.Run(c.name, func(t *testing.T) {
			q := baseQueue()
			q.Script = "codel_police"
			c.mod(q)
			p, err := Build(q, Env{MTU: 1500})
			if err != nil {
				t.Fatal(err)
			}
			if p.Ingress == nil || p.Ingress.IFB != "" || len(p.Ingress.Hook) != 1 || p.Ingress.Hook[0].Kind != "bpf" {
				t.Fatalf("ingress is not one bpf filter without an IFB: %+v", p.Ingress)
			}
			if got := *p.Ingress.Hook[0].CodelPolice; got != c.want {
				t.Errorf("parameters %+v, want %+v", got, c.want)
			}
			if err := p.Validate(); err != nil {
				t.Error(err)
			}
			// Egress is shaped as the police recipe shapes it.
			q.Script, q.IQdiscOpts = "police", "" // its ingress options differ
			pp, err := Build(q, Env{MTU: 1500})
			if err != nil {
				t.Fatal(err)
			}
			if RenderShell(&Plan{Interface: "x", Egress: p.Egress}) != RenderShell(&Plan{Interface: "x", Egress: pp.Egress}) {
				t.Errorf("egress differs from the police recipe's")
			}
		})
	}
}

func TestCodelPolicerErrors(t *testing.T) {
	for _, c := range []struct {
		name string
		mod  func(q *config.Queue)
		want string
	}{
		{"unknown opt", func(q *config.Queue) { q.IQdiscOpts = "memory_limit 4mb" },
			`option iqdisc_opts: codel_police: unknown option "memory_limit"; use flows or flowblind`},
		{"target too long", func(q *config.Queue) { q.ITarget = config.Target{Mode: config.TargetExplicit, Value: 2 * time.Second} },
			"option itarget: target 2s gives an interval of 2.095s; codel_police allows at most 1s"},
		{"ilimit below target", func(q *config.Queue) { q.ILimit = 1 },
			"option ilimit: 1 full frames take 142.494µs at 85000 kbit/s; codel_police needs a limit above the target 5ms and at most 10s"},
		{"ilimit too long", func(q *config.Queue) { q.Download, q.ILimit = 1000, 5000 },
			"option ilimit: 5000 full frames take 1m0.56s at 1000 kbit/s"},
	} {
		t.Run(c.name, func(t *testing.T) {
			q := baseQueue()
			q.Script = "codel_police"
			c.mod(q)
			_, err := Build(q, Env{MTU: 1500})
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %v, want it to contain %q", err, c.want)
			}
		})
	}
}

func TestCodelPoliceValidate(t *testing.T) {
	ok := CodelPolice{RateBits: 50e6, Target: 5 * time.Millisecond, Interval: 100 * time.Millisecond, Limit: 200 * time.Millisecond, MTU: 1514}
	if err := ok.Validate(); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		mod  func(c *CodelPolice)
		want string
	}{
		{func(c *CodelPolice) { c.RateBits = 1000 }, "rate 1000 bit/s is outside"},
		{func(c *CodelPolice) { c.RateBits = 1e12 }, "rate 1000000000000 bit/s is outside"},
		{func(c *CodelPolice) { c.Interval = 0 }, "interval 0s is outside"},
		{func(c *CodelPolice) { c.Interval = 2 * time.Second }, "interval 2s is outside"},
		{func(c *CodelPolice) { c.Target = 0 }, "target 0s must be above 0"},
		{func(c *CodelPolice) { c.Target = c.Interval }, "below the interval"},
		{func(c *CodelPolice) { c.Limit = c.Target }, "limit 5ms must be above the target"},
		{func(c *CodelPolice) { c.Limit = time.Minute }, "at most 10s"},
		{func(c *CodelPolice) { c.MTU = 20 }, "mtu 20 is outside"},
	} {
		p := ok
		c.mod(&p)
		if err := p.Validate(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want %q", p, err, c.want)
		}
		// A plan carrying it fails Validate too, naming the filter.
		pl := &Plan{Interface: "eth0", Ingress: &Ingress{Hook: []Filter{{Parent: hFFFF, Kind: "bpf", Protocol: "all", CodelPolice: &p}}}}
		if err := pl.Validate(); err == nil || !strings.Contains(err.Error(), "hook filter 0") {
			t.Errorf("plan with %+v: %v", p, err)
		}
	}
	pl := &Plan{Interface: "eth0", Ingress: &Ingress{Hook: []Filter{{Parent: hFFFF, Kind: "bpf", Protocol: "all"}}}}
	if err := pl.Validate(); err == nil || !strings.Contains(err.Error(), "bpf filter without a program") {
		t.Errorf("bpf filter without parameters: %v", err)
	}
}

func FuzzParseCodelPoliceOpts(f *testing.F) {
	for _, s := range []string{"", "flows", "flowblind", "flows flowblind", "quantum 300", "flows\tflowblind  flows"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		flows, err := parseCodelPoliceOpts(strings.Fields(s))
		if err != nil {
			if !strings.Contains(err.Error(), "use flows or flowblind") {
				t.Errorf("error %q does not say what to use", err)
			}
			return
		}
		// Accepted input holds only the two keywords; the last decides.
		f := strings.Fields(s)
		if len(f) > 0 && flows != (f[len(f)-1] == "flows") {
			t.Errorf("%q: flows = %v", s, flows)
		}
	})
}
