package plan

import (
	"errors"
	"strings"
	"testing"
	"time"

	"sqm/internal/config"
)

func mustBuild(t *testing.T, q *config.Queue, mtu int) *Plan {
	t.Helper()
	p, err := Build(q, Env{MTU: mtu})
	if err != nil {
		t.Fatalf("Build: %v", err)
	}
	return p
}

func leafOf(t *testing.T, tr *Tree) *Qdisc {
	t.Helper()
	if tr == nil || len(tr.Qdiscs) < 2 {
		t.Fatalf("tree has no leaf: %+v", tr)
	}
	return &tr.Qdiscs[len(tr.Qdiscs)-1]
}

func us(n int) time.Duration { return time.Duration(n) * time.Microsecond }

// §4.3/§7.6: auto target max(5000, 13992000/kbps) us, interval 95000+target.
func TestAutoTarget(t *testing.T) {
	for _, tt := range []struct {
		kbit             uint64
		target, interval int
	}{
		{100, 139920, 234920},
		{500, 27984, 122984},
		{830, 16857, 111857},
		{1000, 13992, 108992},
		{2000, 6996, 101996},
		{2797, 5002, 100002},
		{2798, 5000, 100000},
		{85000, 5000, 100000},
	} {
		q := baseQueue()
		q.Script, q.Upload, q.Download = "simplest", tt.kbit, 0
		for _, kind := range []string{"fq_codel", "codel", "pie", "fq_pie"} {
			q.Qdisc = kind
			l := leafOf(t, mustBuild(t, q, 1500).Egress)
			var tg, iv time.Duration
			switch kind {
			case "fq_codel":
				tg, iv = l.FqCodel.Target, l.FqCodel.Interval
			case "codel":
				tg, iv = l.Codel.Target, l.Codel.Interval
			case "pie":
				tg = l.Pie.Target
			case "fq_pie":
				tg = l.FqPie.Target
			}
			wantIv := us(tt.interval)
			if kind == "pie" || kind == "fq_pie" {
				wantIv = 0 // target only
			}
			if tg != us(tt.target) || iv != wantIv {
				t.Errorf("%d kbit %s: target %v interval %v, want %v %v", tt.kbit, kind, tg, iv, us(tt.target), wantIv)
			}
		}
	}
}

// Explicit targets keep the interval untouched; "default" gives neither.
func TestTargetModes(t *testing.T) {
	q := baseQueue()
	q.Script = "simplest"
	q.ETarget = config.Target{Mode: config.TargetExplicit, Value: 5 * time.Millisecond}
	q.ITarget = config.Target{Mode: config.TargetDefault}
	p := mustBuild(t, q, 1500)
	if f := leafOf(t, p.Egress).FqCodel; f.Target != 5*time.Millisecond || f.Interval != 0 {
		t.Errorf("explicit: target %v interval %v, want 5ms and none", f.Target, f.Interval)
	}
	if f := leafOf(t, p.Ingress.Shaper).FqCodel; f.Target != 0 || f.Interval != 0 {
		t.Errorf("default: target %v interval %v, want none", f.Target, f.Interval)
	}
	if got := QdiscArgs(leafOf(t, p.Egress)); !strings.Contains(got, "target 5000us ecn") {
		t.Errorf("explicit target renders as %q", got)
	}
	q.Qdisc = "sfq"
	if s := leafOf(t, mustBuild(t, q, 1500).Egress).SFQ; s.Limit != 1001 || s.Flows != 1024 {
		t.Errorf("sfq: %+v, want limit 1001 flows 1024 and no target", s)
	}
}

// §4.1/§7.8: burst = quantum = max(rate/8 (1 ms), ceil((MTU+48)/48)*53).
func TestBurstQuantum(t *testing.T) {
	for _, tt := range []struct {
		kbit  uint64
		mtu   int
		burst uint32
	}{
		{10000, 1500, 1749},
		{13992, 1500, 1749},
		{14000, 1500, 1750},
		{50000, 1500, 6250},
		{85000, 1500, 10625},
		{100000, 1500, 12500},
		{500000, 1500, 62500},
		{1000000, 1500, 125000},
		{1000, 1489, 1749},
		{1000, 1536, 1749},
		{1000, 1280, 1484},
		{1000, 576, 689},
		{1000, 9000, 10017},
	} {
		q := baseQueue()
		q.Script, q.Upload = "simplest", tt.kbit
		p := mustBuild(t, q, tt.mtu)
		for _, c := range p.Egress.Classes {
			if c.HTB.Burst != tt.burst || c.HTB.CBurst != tt.burst || c.HTB.Quantum != tt.burst {
				t.Errorf("%d kbit MTU %d class %s: burst %d cburst %d quantum %d, want %d",
					tt.kbit, tt.mtu, c.ClassID, c.HTB.Burst, c.HTB.CBurst, c.HTB.Quantum, tt.burst)
			}
		}
		q.Script = "simplest_tbf"
		if tb := mustBuild(t, q, tt.mtu).Egress.Qdiscs[0].TBF; tb.Burst != tt.burst || tb.Latency != 300*time.Millisecond || tb.RateBits != tt.kbit*1000 {
			t.Errorf("%d kbit MTU %d tbf: %+v, want burst %d latency 300ms", tt.kbit, tt.mtu, tb, tt.burst)
		}
	}
}

type classWant struct {
	id          Handle
	rate, ceil  uint64 // kbit
	burst       bool
	prio        uint32
	leafQuantum uint32
}

// §3.2/§7.3/§7.4: simple.qos classes at C=10000 (egress) and the 3-tier
// ingress at C=10000.
func TestSimpleClasses(t *testing.T) {
	check := func(t *testing.T, tr *Tree, want []classWant) {
		t.Helper()
		if tr.Qdiscs[0].HTB.Default != 0x12 {
			t.Errorf("default %x, want 12", tr.Qdiscs[0].HTB.Default)
		}
		if len(tr.Classes) != len(want)+1 {
			t.Fatalf("%d classes, want %d", len(tr.Classes), len(want)+1)
		}
		top := tr.Classes[0].HTB
		if tr.Classes[0].ClassID != hTop || top.RateBits != 10000e3 || top.CeilBits != 10000e3 || top.Burst != 1749 {
			t.Errorf("1:1 = %+v", top)
		}
		for i, w := range want {
			c := tr.Classes[i+1]
			h := c.HTB
			if c.ClassID != w.id || c.Parent != hTop || h.RateBits != w.rate*1000 || h.CeilBits != w.ceil*1000 ||
				(h.Burst != 0) != w.burst || h.Prio != w.prio || h.Quantum != 1749 {
				t.Errorf("class %s: %+v, want %+v", c.ClassID, *h, w)
			}
			leaf := tr.Qdiscs[i+1]
			if leaf.Parent != w.id || leaf.Handle != MakeHandle(0x110+uint16(i)*0x10, 0) || leaf.FqCodel.Quantum != w.leafQuantum {
				t.Errorf("leaf %d: %s parent %s quantum %d, want parent %s quantum %d", i, leaf.Handle, leaf.Parent, leaf.FqCodel.Quantum, w.id, w.leafQuantum)
			}
		}
	}
	q := baseQueue()
	q.Upload, q.Download, q.SquashIngress = 10000, 10000, false
	p := mustBuild(t, q, 1500)
	check(t, p.Egress, []classWant{
		{MakeHandle(1, 0x11), 128, 3333, false, 1, 300},
		{MakeHandle(1, 0x12), 1666, 9984, true, 2, 300},
		{MakeHandle(1, 0x13), 1666, 9984, true, 3, 300},
	})
	check(t, p.Ingress.Shaper, []classWant{
		{MakeHandle(1, 0x11), 32, 3333, false, 1, 500},
		{MakeHandle(1, 0x12), 1666, 9984, true, 2, 1500},
		{MakeHandle(1, 0x13), 1666, 9984, true, 3, 300},
	})
	if len(p.Ingress.Shaper.Filters) != 81 || len(p.Egress.Filters) != 81 {
		t.Errorf("filters: egress %d ingress %d, want 81 each", len(p.Egress.Filters), len(p.Ingress.Shaper.Filters))
	}

	// squash_ingress=1: ingress is one tier, default 10, leaf without quantum.
	q.SquashIngress = true
	in := mustBuild(t, q, 1500).Ingress.Shaper
	if in.Qdiscs[0].HTB.Default != 0x10 || len(in.Classes) != 2 || in.Classes[1].ClassID != MakeHandle(1, 0x10) ||
		in.Filters != nil || leafOf(t, in).FqCodel.Quantum != 0 || leafOf(t, in).Handle != hLeaf1 {
		t.Errorf("one-tier ingress: %+v", in)
	}
}

// §7.5 limits and flows; §7.7 ECN.
func TestLimitFlowsECN(t *testing.T) {
	q := baseQueue()
	q.Script, q.EgressECN = "simplest", false
	for _, tt := range []struct {
		kind string
		args string
	}{
		{"fq_codel", "fq_codel limit 1001 flows 1024 target 5000us interval 100000us noecn"},
		{"codel", "codel limit 1001 target 5000us interval 100000us noecn"},
		{"pie", "pie limit 1001 target 5000us noecn"},
		{"fq_pie", "fq_pie limit 1001 target 5000us noecn"},
		{"sfq", "sfq limit 1001 flows 1024"},
		{"pfifo", "pfifo limit 1001"},
		{"bfifo", "bfifo limit 1501500"},
	} {
		q.Qdisc = tt.kind
		if got := QdiscArgs(leafOf(t, mustBuild(t, q, 1500).Egress)); got != "parent 1:10 handle 110: "+tt.args {
			t.Errorf("%s: %q, want %q", tt.kind, got, tt.args)
		}
	}
	q.Qdisc, q.ELimit = "fq_codel", 2000
	if l := leafOf(t, mustBuild(t, q, 1500).Egress).FqCodel.Limit; l != 2000 {
		t.Errorf("elimit 2000 gave limit %d", l)
	}
}

// §7.1, §7.15: IFB names, the redirect, rates of 0.
func TestIngressPlumbing(t *testing.T) {
	for in, want := range map[string]string{
		"eth0": "ifb4eth0", "pppoe-wan": "ifb4pppoe-wan", "enx001122334455": "ifb4enx00112233",
	} {
		if got := IFBName(in); got != want {
			t.Errorf("IFBName(%q) = %q, want %q", in, got, want)
		}
	}
	p := mustBuild(t, baseQueue(), 1500)
	got := FilterArgs(&p.Ingress.Hook[0])
	want := "parent ffff: protocol all prio 10 u32 match u32 0x00000000 0x00000000 at 0 flowid 1:1 action mirred egress redirect dev ifb4eth0"
	if got != want || len(p.Ingress.Hook) != 1 || p.Ingress.IFB != "ifb4eth0" || p.Ingress.Shaper.Device != "ifb4eth0" {
		t.Errorf("redirect: %q\nwant      %q", got, want)
	}
	sh := RenderShell(p)
	order := []string{"ip link add name ifb4eth0 type ifb", "tc qdisc add dev ifb4eth0 root", "tc qdisc add dev eth0 handle ffff: ingress", "ip link set dev ifb4eth0 up", "action mirred"}
	last := -1
	for _, s := range order {
		i := strings.Index(sh, s)
		if i <= last {
			t.Errorf("%q is not after the previous step in:\n%s", s, sh)
		}
		last = i
	}
	q := baseQueue()
	q.Upload = 0
	if p := mustBuild(t, q, 1500); p.Egress != nil || p.Ingress == nil || strings.Contains(RenderShell(p), "root handle 1: htb default 12") {
		t.Errorf("upload 0: egress %+v", p.Egress)
	}
	q.Upload, q.Download = 10000, 0
	if p := mustBuild(t, q, 1500); p.Ingress != nil || strings.Contains(RenderShell(p), "ifb") {
		t.Errorf("download 0: ingress %+v", p.Ingress)
	}
}

// §4.6/§7.10/§7.11: link-layer adaptation strings.
func TestLinkLayer(t *testing.T) {
	q := baseQueue()
	q.Script, q.LinkLayer, q.Overhead, q.LLAM = "simplest", "atm", 40, "default"
	p := mustBuild(t, q, 1500)
	if got := QdiscArgs(&p.Egress.Qdiscs[0]); got != "root handle 1: stab mtu 2047 tsize 512 mpu 0 overhead 40 linklayer atm htb default 10" {
		t.Errorf("tc_stab: %q", got)
	}
	q.Qdisc, q.Overhead, q.StabMPU = "cake", 44, 84
	if got := QdiscArgs(&mustBuild(t, q, 1500).Egress.Qdiscs[0]); got != "root handle 1: cake bandwidth 10000kbit besteffort atm overhead 44 mpu 84" {
		t.Errorf("cake lla: %q", got)
	}
	q.LinkLayer = "ethernet"
	if got := QdiscArgs(&mustBuild(t, q, 1500).Egress.Qdiscs[0]); got != "root handle 1: cake bandwidth 10000kbit besteffort overhead 44 mpu 84" {
		t.Errorf("cake lla ethernet: %q", got)
	}
	q.LLAM = "htb_private" // with cake: cake's keywords (sqm-scripts: none)
	if c := mustBuild(t, q, 1500).Egress.Qdiscs[0].Cake; c.Overhead == nil || *c.Overhead != 44 {
		t.Errorf("htb_private+cake: %+v", c)
	}
	q.Qdisc, q.LinkLayer, q.Overhead, q.StabMPU = "fq_codel", "atm", 44, 0
	p = mustBuild(t, q, 1500)
	if got := ClassArgs(&p.Egress.Classes[1]); !strings.HasSuffix(got, "mpu 0 linklayer atm overhead 44 mtu 2047") || p.Egress.Qdiscs[0].Stab != nil {
		t.Errorf("htb_private class: %q", got)
	}
	q.Script = "simplest_tbf"
	if got := QdiscArgs(&mustBuild(t, q, 1500).Egress.Qdiscs[0]); got != "root handle 1: tbf rate 10000kbit burst 1749 latency 300000us mpu 0 linklayer atm overhead 44" {
		t.Errorf("htb_private tbf (no mtu): %q", got)
	}
	q.LinkLayer = "none"
	if p := mustBuild(t, q, 1500); p.Egress.Qdiscs[0].Stab != nil || p.Egress.Qdiscs[0].TBF.LinkLayer != nil {
		t.Errorf("linklayer none still adapts: %+v", p.Egress.Qdiscs[0])
	}
}

// §7.12: cake option strings per recipe, as typed options.
func TestCakeOptions(t *testing.T) {
	type cakeWant struct{ egress, ingress string }
	for _, tt := range []struct {
		script        string
		squashIngress bool
		squashDSCP    bool
		want          cakeWant
	}{
		{"piece_of_cake", true, true, cakeWant{"bandwidth 10000kbit besteffort nat", "bandwidth 85000kbit besteffort nat wash"}},
		{"piece_of_cake", false, false, cakeWant{"bandwidth 10000kbit besteffort nat", "bandwidth 85000kbit besteffort nat"}},
		{"layer_cake", true, true, cakeWant{"bandwidth 10000kbit diffserv3 nat", "bandwidth 85000kbit besteffort nat wash"}},
		{"layer_cake", false, true, cakeWant{"bandwidth 10000kbit diffserv3 nat", "bandwidth 85000kbit diffserv3 nat wash"}},
		{"layer_cake", false, false, cakeWant{"bandwidth 10000kbit diffserv3 nat", "bandwidth 85000kbit diffserv3 nat"}},
		{"simplest", true, true, cakeWant{"bandwidth 10000kbit besteffort", "bandwidth 85000kbit besteffort"}},
		{"simple", true, true, cakeWant{"bandwidth 10000kbit diffserv3 nat", "bandwidth 85000kbit besteffort nat wash"}},
		{"police", true, true, cakeWant{"bandwidth 10000kbit besteffort nat", ""}},
	} {
		q := baseQueue()
		q.Script, q.Qdisc, q.SquashIngress, q.SquashDSCP = tt.script, "cake", tt.squashIngress, tt.squashDSCP
		p := mustBuild(t, q, 1500)
		got := cakeWant{egress: strings.Join(CakeArgs(p.Egress.Qdiscs[0].Cake), " ")}
		if p.Ingress.Shaper != nil {
			got.ingress = strings.Join(CakeArgs(p.Ingress.Shaper.Qdiscs[0].Cake), " ")
		}
		if got != tt.want {
			t.Errorf("%s squash_ingress=%v squash_dscp=%v:\n got %+v\nwant %+v", tt.script, tt.squashIngress, tt.squashDSCP, got, tt.want)
		}
	}
	// User opts come last and the last competing keyword wins.
	q := baseQueue()
	q.Script, q.Qdisc, q.EQdiscOpts, q.IQdiscOpts = "layer_cake", "cake", "diffserv4 dual-srchost", "diffserv8 nonat dual-dsthost ingress"
	p := mustBuild(t, q, 1500)
	if e := p.Egress.Qdiscs[0].Cake; e.Diffserv != "diffserv4" || e.FlowMode != "dual-srchost" || !*e.NAT {
		t.Errorf("egress opts: %+v", e)
	}
	if i := p.Ingress.Shaper.Qdiscs[0].Cake; i.Diffserv != "diffserv8" || *i.NAT || i.FlowMode != "dual-dsthost" || !*i.Ingress || !*i.Wash {
		t.Errorf("ingress opts: %+v", i)
	}
}

// The police recipe: egress like simplest (or piece_of_cake with cake),
// ingress one policing filter with the documented bucket.
func TestPolice(t *testing.T) {
	for _, tt := range []struct {
		kbit        uint64
		mtu         int
		burst, pmtu uint32
	}{
		{50000, 1500, 125000, 1514}, // 50 Mbit/s * 20 ms
		{1000, 1500, 24224, 1514},   // 16 full frames
		{85000, 1500, 212500, 1514},
		{1000000, 9000, 2500000, 9014},
	} {
		q := baseQueue()
		q.Script, q.Download = "police", tt.kbit
		p := mustBuild(t, q, tt.mtu)
		if p.Ingress.IFB != "" || p.Ingress.Shaper != nil || len(p.Ingress.Hook) != 1 {
			t.Fatalf("police ingress: %+v", p.Ingress)
		}
		f := p.Ingress.Hook[0]
		pol := f.Actions[0].Police
		if f.Protocol != "all" || f.Parent != hFFFF || pol.RateBits != tt.kbit*1000 || pol.Burst != tt.burst || pol.MTU != tt.pmtu {
			t.Errorf("%d kbit: %+v %+v, want burst %d mtu %d", tt.kbit, f, pol, tt.burst, tt.pmtu)
		}
		if p.Egress.Qdiscs[0].Kind != "htb" || p.Egress.Qdiscs[0].HTB.Default != 0x10 {
			t.Errorf("police egress is not simplest: %+v", p.Egress.Qdiscs[0])
		}
		if strings.Contains(RenderShell(p), "ifb") {
			t.Errorf("police plan mentions an IFB:\n%s", RenderShell(p))
		}
	}
}

func TestCheckIFBs(t *testing.T) {
	build := func(name, iface string, down uint64) *Plan {
		q := baseQueue()
		q.Name, q.Interface, q.Download = name, iface, down
		return mustBuild(t, q, 1500)
	}
	a := build("a", "enx001122334455", 1000)
	b := build("b", "enx001122334466", 1000)
	c := build("c", "eth1", 1000)
	err := CheckIFBs([]*Plan{a, c, b})
	if err == nil || !strings.Contains(err.Error(), `"a"`) || !strings.Contains(err.Error(), `"b"`) || !strings.Contains(err.Error(), "ifb4enx00112233") {
		t.Errorf("collision not reported well: %v", err)
	}
	if err := CheckIFBs([]*Plan{a, c, build("d", "enx001122334466", 0)}); err != nil {
		t.Errorf("no IFB without download, yet: %v", err)
	}
	if err := CheckIFBs([]*Plan{c, build("e", "eth1", 0)}); err == nil {
		t.Errorf("two sections on eth1 not reported")
	}
}

// Bad configuration is an OptionError naming the option.
func TestBuildErrors(t *testing.T) {
	for _, tt := range []struct {
		name   string
		mod    func(q *config.Queue)
		mtu    int
		option string
		msg    string
	}{
		{"unknown script", func(q *config.Queue) { q.Script = "fancy" }, 1500, "script", `unknown script "fancy"`},
		{"unknown qdisc", func(q *config.Queue) { q.Qdisc = "red" }, 1500, "qdisc", `unsupported qdisc "red"`},
		{"no interface", func(q *config.Queue) { q.Interface = "" }, 1500, "interface", "no interface"},
		{"bad linklayer", func(q *config.Queue) { q.LinkLayer = "docsis" }, 1500, "linklayer", `unknown link layer "docsis"`},
		{"bad llam", func(q *config.Queue) { q.LinkLayer, q.LLAM = "atm", "magic" }, 1500, "linklayer_adaptation_mechanism", `unknown mechanism "magic"`},
		{"cake overhead range", func(q *config.Queue) { q.Qdisc, q.LinkLayer, q.Overhead = "cake", "atm", 300 }, 1500, "overhead", "outside cake's range"},
		{"tiny rate", func(q *config.Queue) { q.Upload = 8 }, 1500, "upload", "too low"},
		{"egress opts", func(q *config.Queue) { q.EQdiscOpts = "flows 64 turbo" }, 1500, "eqdisc_opts", `unknown fq_codel keyword "turbo"`},
		{"ingress opts", func(q *config.Queue) { q.IQdiscOpts = "target" }, 1500, "iqdisc_opts", `fq_codel keyword "target" needs a value`},
		{"cake opts", func(q *config.Queue) { q.Script, q.IQdiscOpts = "layer_cake", "diffserv5" }, 1500, "iqdisc_opts", `unknown cake keyword "diffserv5"`},
		{"cake opts after tbf fallback", func(q *config.Queue) { q.Script, q.Qdisc, q.EQdiscOpts = "simplest_tbf", "cake", "nat" }, 1500, "eqdisc_opts",
			`unknown fq_codel keyword "nat"; fq_codel accepts: limit PACKETS, flows N, target TIME, interval TIME, quantum BYTES, ecn, noecn, ce_threshold TIME, memory_limit SIZE, drop_batch N (simplest_tbf uses fq_codel instead of cake, so the options must be fq_codel options)`},
		{"cake opts overflow", func(q *config.Queue) {
			q.Script, q.EQdiscOpts = "piece_of_cake", "overhead 200 pppoe-llcsnap pppoe-llcsnap"
		}, 1500, "eqdisc_opts", "adds up to 280"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			q := baseQueue()
			q.OptionPos = map[string]config.Position{tt.option: {File: "/etc/config/sqm", Line: 7}}
			tt.mod(q)
			_, err := Build(q, Env{MTU: tt.mtu})
			var oe *config.OptionError
			if !errors.As(err, &oe) {
				t.Fatalf("error %v (%T) is not an OptionError", err, err)
			}
			if oe.Option != tt.option || !strings.Contains(oe.Msg, tt.msg) || !strings.HasPrefix(err.Error(), "/etc/config/sqm:7: queue \"wan\" option "+tt.option) {
				t.Errorf("got %q, want option %s and %q", err, tt.option, tt.msg)
			}
		})
	}
	if _, err := Build(baseQueue(), Env{MTU: 0}); err == nil || !strings.Contains(err.Error(), "MTU 0") {
		t.Errorf("MTU 0: %v", err)
	}
	// Loopback's MTU is 65536: one more than fits 16 bits, and valid.
	if _, err := Build(baseQueue(), Env{MTU: 65536}); err != nil {
		t.Errorf("MTU 65536 (lo): %v", err)
	}
	if _, err := Build(baseQueue(), Env{MTU: 65537}); err == nil {
		t.Errorf("MTU 65537 accepted")
	}
}

func TestRecipesIterators(t *testing.T) {
	var got []string
	for _, s := range Recipes {
		got = append(got, s)
	}
	for _, s := range LeafQdiscs {
		got = append(got, s)
	}
	if strings.Join(got, " ") != "simplest simple simplest_tbf piece_of_cake layer_cake police codel_police fq_codel codel pie fq_pie cake sfq pfifo bfifo" {
		t.Errorf("iterators yield %q", got)
	}
	for range Recipes {
		break // stopping early must not panic
	}
}

func TestParseHandle(t *testing.T) {
	for s, want := range map[string]Handle{
		"root": HandleRoot, "ingress": HandleIngress, "none": HandleNone,
		"1:": hRoot, "1:1": hTop, "ffff:": hFFFF, "110:": hLeaf1, "1:13": MakeHandle(1, 0x13),
	} {
		got, err := ParseHandle(s)
		if err != nil || got != want || (s != "none" && got.String() != s) {
			t.Errorf("ParseHandle(%q) = %v, %v; want %v", s, got, err, want)
		}
	}
	for _, s := range []string{"", "1", "x:1", "1:x", "10000:", "1:10000", ":1:"} {
		if h, err := ParseHandle(s); err == nil {
			t.Errorf("ParseHandle(%q) = %v, want an error", s, h)
		}
	}
}

// Below 384 kbit/s sqm-scripts' priority class rate (128 kbit) exceeds its
// ceiling (C/3); we clamp it and say so. Below 64 kbit/s we refuse.
func TestSimpleSlowLink(t *testing.T) {
	q := baseQueue()
	q.Upload, q.Download, q.SquashIngress = 100, 64, false
	p := mustBuild(t, q, 1500)
	for _, tr := range []*Tree{p.Egress, p.Ingress.Shaper} {
		for _, c := range tr.Classes {
			if c.HTB.RateBits > c.HTB.CeilBits || c.HTB.RateBits == 0 {
				t.Errorf("%s class %s: rate %d ceil %d", tr.Device, c.ClassID, c.HTB.RateBits, c.HTB.CeilBits)
			}
		}
	}
	if r := p.Egress.Classes[1].HTB.RateBits; r != 33000 {
		t.Errorf("priority rate %d, want clamped to 33000", r)
	}
	if len(p.Notes) < 2 || !strings.Contains(strings.Join(p.Notes, "\n"), "upload rate 100 kbit/s is below 384") {
		t.Errorf("notes %q lack the clamp", p.Notes)
	}
	q.Upload = 63
	if _, err := Build(q, Env{MTU: 1500}); err == nil {
		t.Errorf("upload 63 kbit/s accepted")
	}
}
