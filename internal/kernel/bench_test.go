package kernel

import (
	"testing"

	"sqm/internal/plan"
)

// benchApplyRemove times plan.Build + Apply + Remove of a full
// egress+ingress setup in one namespace.
func benchApplyRemove(b *testing.B, script, qdisc string) {
	_, c := setupNS(b)
	q := queue(script, qdisc)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		p, err := plan.Build(q, plan.Env{MTU: 1500})
		if err != nil {
			b.Fatal(err)
		}
		res, err := c.Apply(p, nil, ApplyOptions{})
		if err != nil {
			b.Fatal(err)
		}
		if err := c.Remove(&res.Owned); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkApplyRemoveHost: simple.qos with pfifo leaves (htb, 3 tiers,
// 40 u32 filters, IFB) on the host kernel.
func BenchmarkApplyRemoveHost(b *testing.B) { benchApplyRemove(b, "simple", "pfifo") }

// BenchmarkApplyRemoveHostSimplest: the smallest htb tree.
func BenchmarkApplyRemoveHostSimplest(b *testing.B) { benchApplyRemove(b, "simplest", "pfifo") }

// BenchmarkApplyRemoveHostEgressOnly: simple.qos without ingress, to
// separate the IFB's cost (link creation and deletion) from tc's.
func BenchmarkApplyRemoveHostEgressOnly(b *testing.B) {
	_, c := setupNS(b)
	q := queue("simple", "pfifo")
	q.Download = 0
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		p, err := plan.Build(q, plan.Env{MTU: 1500})
		if err != nil {
			b.Fatal(err)
		}
		res, err := c.Apply(p, nil, ApplyOptions{})
		if err != nil {
			b.Fatal(err)
		}
		if err := c.Remove(&res.Owned); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkStatusHost times Status of wan0 under simple.qos with pfifo
// leaves: a link lookup and the qdisc, class and filter dumps (40 u32
// filters) that sqm status and the daemon's metrics run.
func BenchmarkStatusHost(b *testing.B) {
	_, c := setupNS(b)
	q := queue("simple", "pfifo")
	p, err := plan.Build(q, plan.Env{MTU: 1500})
	if err != nil {
		b.Fatal(err)
	}
	if _, err := c.Apply(p, nil, ApplyOptions{}); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		st, err := c.Status("wan0")
		if err != nil {
			b.Fatal(err)
		}
		if len(st) != 1 || st[0].Filters == 0 {
			b.Fatalf("status: %+v", st)
		}
	}
}
