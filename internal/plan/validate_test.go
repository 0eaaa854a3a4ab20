package plan

import (
	"encoding/json"
	"strings"
	"testing"

	"sqm/internal/config"
)

// clonePlan deep-copies p through JSON, so a test can break the copy.
func clonePlan(t *testing.T, p *Plan) *Plan {
	t.Helper()
	b, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	var c Plan
	if err := json.Unmarshal(b, &c); err != nil {
		t.Fatal(err)
	}
	return &c
}

func TestValidateCatches(t *testing.T) {
	q := baseQueue()
	q.SquashIngress = false
	good := mustBuild(t, q, 1500)
	pq := baseQueue()
	pq.Script = "police"
	police := mustBuild(t, pq, 1500)
	for _, tt := range []struct {
		name   string
		base   *Plan
		mutate func(p *Plan)
		want   string
	}{
		{"two option sets", good, func(p *Plan) { p.Egress.Qdiscs[1].Codel = &Codel{} }, "has 2 option sets"},
		{"kind mismatch", good, func(p *Plan) { p.Egress.Qdiscs[1].Kind = "pie" }, `kind "pie" has 1 option sets (match false)`},
		{"duplicate handle", good, func(p *Plan) { p.Egress.Qdiscs[2].Handle = hLeaf1 }, "handle 110: used twice"},
		{"orphan class", good, func(p *Plan) { p.Egress.Classes[2].Parent = MakeHandle(1, 0x77) }, "neither the root nor an earlier class"},
		{"rate above ceil", good, func(p *Plan) { p.Egress.Classes[1].HTB.RateBits = 1e9 }, "want 0 < rate <= ceil"},
		{"leaf on missing class", good, func(p *Plan) { p.Egress.Qdiscs[3].Parent = MakeHandle(1, 0x99) }, "not a class"},
		{"shared prio", good, func(p *Plan) { p.Egress.Filters[3].Prio = 1 }, "prio 1 used twice"},
		{"filter to nowhere", good, func(p *Plan) { p.Ingress.Shaper.Filters[0].FlowID = MakeHandle(1, 0x42) }, "sends to 1:42"},
		{"bad default", good, func(p *Plan) { p.Egress.Qdiscs[0].HTB.Default = 0x20 }, "htb default 20 is not a class"},
		{"redirect elsewhere", good, func(p *Plan) { p.Ingress.Hook[0].Actions[0].Mirred.Device = "ifb0" }, `redirects to "ifb0"`},
		{"IFB without tree", good, func(p *Plan) { p.Ingress.Shaper = nil }, "has no shaper tree"},
		{"tree on wrong device", good, func(p *Plan) { p.Ingress.Shaper.Device = "eth9" }, "not the IFB"},
		{"zero police burst", police, func(p *Plan) { p.Ingress.Hook[0].Actions[0].Police.Burst = 0 }, "zero rate, burst or mtu"},
		{"no hook", police, func(p *Plan) { p.Ingress.Hook = nil }, "no hook filters"},
	} {
		if err := tt.base.Validate(); err != nil {
			t.Fatalf("built plan does not validate: %v", err)
		}
		p := clonePlan(t, tt.base)
		tt.mutate(p)
		err := p.Validate()
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: Validate = %v, want %q", tt.name, err, tt.want)
		}
	}
}

// FuzzBuild builds plans from arbitrary section values: Build must never
// panic, and every plan it returns must validate, render, and survive JSON.
func FuzzBuild(f *testing.F) {
	f.Add(uint32(10000), uint32(85000), uint8(1), uint8(0), uint8(2), uint8(1), int16(44), uint16(0), uint8(3), "", "", uint16(1500))
	f.Add(uint32(830), uint32(0), uint8(3), uint8(4), uint8(1), uint8(0), int16(-4), uint16(84), uint8(0), "diffserv4 nat", "ingress rtt 5ms", uint16(1492))
	f.Add(uint32(0), uint32(50000), uint8(5), uint8(6), uint8(0), uint8(3), int16(0), uint16(0), uint8(1), "limit 10", "", uint16(9000))
	f.Fuzz(func(t *testing.T, up, down uint32, script, qdisc, ll, llam uint8, overhead int16, mpu uint16, flags uint8, eopts, iopts string, mtu uint16) {
		recipes, leaves := config.Scripts(), leafQdiscList()
		q := &config.Queue{
			Name: "fuzz", Interface: "eth0", Upload: uint64(up), Download: uint64(down),
			Script: recipes[int(script)%len(recipes)], Qdisc: leaves[int(qdisc)%len(leaves)],
			LinkLayer: []string{"none", "ethernet", "atm", "adsl"}[ll%4], LLAM: []string{"default", "cake", "htb_private", "tc_stab"}[llam%4],
			Overhead: int(overhead), StabMPU: uint32(mpu), SquashDSCP: flags&1 != 0, SquashIngress: flags&2 != 0,
			IngressECN: flags&4 != 0, EgressECN: flags&8 != 0, ILimit: uint32(flags >> 4), EQdiscOpts: eopts, IQdiscOpts: iopts,
		}
		p, err := Build(q, Env{MTU: int(mtu)})
		if err != nil {
			return
		}
		if err := p.Validate(); err != nil {
			t.Fatalf("%+v: %v", q, err)
		}
		if RenderShell(p) == "" || RenderRemove(p) == "" {
			t.Fatal("empty rendering")
		}
		b, err := json.Marshal(p)
		if err != nil {
			t.Fatal(err)
		}
		var back Plan
		if err := json.Unmarshal(b, &back); err != nil {
			t.Fatalf("JSON: %v", err)
		}
	})
}
