package kernel

import (
	"errors"
	"strings"
	"testing"

	"sqm/internal/config"
	"sqm/internal/plan"
)

// queue is sqm-scripts' sample section on the test veth.
func queue(script, qdisc string) *config.Queue {
	return &config.Queue{
		Name: "wan", Interface: "wan0", Enabled: true,
		Download: 85000, Upload: 10000, Qdisc: qdisc, Script: script,
		SquashDSCP: true, SquashIngress: true, IngressECN: true, EgressECN: true,
		LinkLayer: "none", StabMTU: 2047, StabTSize: 512, LLAM: "default",
	}
}

func build(t testing.TB, q *config.Queue) *plan.Plan {
	t.Helper()
	p, err := plan.Build(q, plan.Env{MTU: 1500})
	if err != nil {
		t.Fatalf("plan.Build: %v", err)
	}
	return p
}

type llaVariant struct {
	name string
	mod  func(q *config.Queue)
}

var llaVariants = []llaVariant{
	{"none", func(q *config.Queue) {}},
	{"ethernet-38-mpu64", func(q *config.Queue) { q.LinkLayer, q.LLAM, q.Overhead, q.StabMPU = "ethernet", "default", 38, 64 }},
	{"tc_stab-atm-44", func(q *config.Queue) { q.LinkLayer, q.LLAM, q.Overhead = "atm", "tc_stab", 44 }},
	{"htb_private-atm-44", func(q *config.Queue) { q.LinkLayer, q.LLAM, q.Overhead = "atm", "htb_private", 44 }},
	{"egress-only", func(q *config.Queue) { q.Download = 0 }},
	{"ingress-only", func(q *config.Queue) { q.Upload = 0 }},
	{"ingress-tiers", func(q *config.Queue) { q.SquashIngress = false }},
}

// setupNS returns a namespace with veth wan0<->wan1 and a Conn in it.
func setupNS(t testing.TB) (*testNS, *Conn) {
	ns := newTestNS(t)
	ns.veth(t, "wan0", "wan1")
	return ns, ns.open(t)
}

// assertClean checks that nothing of sqm's is left on wan0 and no IFB.
func assertClean(t *testing.T, c *Conn, p *plan.Plan) {
	t.Helper()
	l, err := c.linkByName("wan0")
	if err != nil {
		t.Fatal(err)
	}
	cur, err := c.readTree(l.Index)
	if err != nil {
		t.Fatal(err)
	}
	if r := cur.root(); r != nil && r.Handle.Major() != 0 {
		t.Errorf("root qdisc %s %s left behind", r.Kind, r.Handle)
	}
	if r := cur.ingress(); r != nil {
		t.Errorf("ingress qdisc %s left behind", r.Kind)
	}
	if len(cur.classes) != 0 || len(cur.filters) != 0 {
		t.Errorf("%d classes, %d filters left behind", len(cur.classes), len(cur.filters))
	}
	if p.Ingress != nil && p.Ingress.IFB != "" {
		if ok, err := c.LinkExists(p.Ingress.IFB); err != nil || ok {
			t.Errorf("ifb %s left behind (exists=%v, err=%v)", p.Ingress.IFB, ok, err)
		}
	}
}

// applyCycle is the common check: apply, read back, idempotent re-apply,
// remove leaves nothing.
func applyCycle(t *testing.T, ns *testNS, c *Conn, p *plan.Plan) *Result {
	t.Helper()
	res, err := c.Apply(p, nil, ApplyOptions{})
	if err != nil {
		t.Fatalf("Apply: %v", err)
	}
	if !res.Changed {
		t.Errorf("first Apply reported Changed=false")
	}
	ok, diff, err := c.Matches(p)
	if err != nil || !ok {
		t.Fatalf("Matches after Apply: ok=%v err=%v diff:\n%s\ntc says:\n%s", ok, err, diff, ns.sh(t, "tc", "-d", "qdisc", "show"))
	}
	again, err := c.Apply(p, &res.Owned, ApplyOptions{})
	if err != nil {
		t.Fatalf("second Apply: %v", err)
	}
	if again.Changed {
		t.Errorf("second Apply reported Changed=true")
	}
	if p.Egress != nil && (!res.Owned.EgressRoot || res.Owned.EgressHandle != p.Egress.Qdiscs[0].Handle) {
		t.Errorf("Owned egress = %v %s", res.Owned.EgressRoot, res.Owned.EgressHandle)
	}
	if p.Ingress != nil && (!res.Owned.Ingress || res.Owned.IFB != p.Ingress.IFB) {
		t.Errorf("Owned ingress = %v ifb %q, want ifb %q", res.Owned.Ingress, res.Owned.IFB, p.Ingress.IFB)
	}
	return res
}

func TestApplyRecipesHost(t *testing.T) {
	for _, script := range []string{"simplest", "simple", "simplest_tbf"} {
		for _, qd := range []string{"pfifo", "bfifo"} {
			for _, v := range llaVariants {
				t.Run(script+"/"+qd+"/"+v.name, func(t *testing.T) {
					ns, c := setupNS(t)
					q := queue(script, qd)
					v.mod(q)
					p := build(t, q)
					res := applyCycle(t, ns, c, p)
					// tc's own view must agree on the kinds.
					out := ns.sh(t, "tc", "qdisc", "show", "dev", "wan0")
					if p.Egress != nil && !strings.Contains(out, p.Egress.Qdiscs[0].Kind+" "+p.Egress.Qdiscs[0].Handle.String()) {
						t.Errorf("tc qdisc show does not list the root:\n%s", out)
					}
					if err := c.Remove(&res.Owned); err != nil {
						t.Fatalf("Remove: %v", err)
					}
					assertClean(t, c, p)
					if ok, _, _ := c.Matches(p); ok {
						t.Errorf("Matches still true after Remove")
					}
					// Removing twice tolerates everything being gone.
					if err := c.Remove(&res.Owned); err != nil {
						t.Errorf("second Remove: %v", err)
					}
				})
			}
		}
	}
}

func TestApplyNoLink(t *testing.T) {
	_, c := setupNS(t)
	q := queue("simple", "pfifo")
	q.Interface = "nosuch0"
	p := build(t, q)
	if _, err := c.Apply(p, nil, ApplyOptions{}); !errors.Is(err, ErrNoLink) {
		t.Errorf("Apply on missing device: %v, want ErrNoLink", err)
	}
	if _, err := c.LinkMTU("nosuch0"); !errors.Is(err, ErrNoLink) {
		t.Errorf("LinkMTU: %v, want ErrNoLink", err)
	}
	if ok, err := c.LinkExists("nosuch0"); ok || err != nil {
		t.Errorf("LinkExists(nosuch0) = %v, %v", ok, err)
	}
	if mtu, err := c.LinkMTU("wan0"); err != nil || mtu != 1500 {
		t.Errorf("LinkMTU(wan0) = %d, %v; want 1500", mtu, err)
	}
}

// Interrupted names a killed first apply's qdiscs by handle only and the
// IFB only if the apply claimed it.
func TestInterrupted(t *testing.T) {
	p := build(t, queue("simple", "fq_codel"))
	o := Interrupted(p, "ifb4wan0")
	if o.Interface != "wan0" || !o.EgressRoot || o.EgressHandle != plan.MakeHandle(1, 0) || !o.Ingress || o.IFB != "ifb4wan0" || o.Plan != nil || o.IFBIndex != 0 || o.Ifindex != 0 {
		t.Errorf("Interrupted = %+v", o)
	}
	if o := Interrupted(p, ""); o.IFB != "" {
		t.Errorf("an IFB the apply did not claim is named: %q", o.IFB)
	}
	q := queue("simplest", "fq_codel")
	q.Download = 0
	if o := Interrupted(build(t, q), ""); o.Ingress {
		t.Errorf("egress-only plan: %+v names an ingress qdisc", o)
	}
}
