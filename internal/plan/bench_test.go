package plan

import "testing"

// BenchmarkBuildSimple builds the largest plan: simple.qos with three tiers
// and the full u32 filter set in both directions.
func BenchmarkBuildSimple(b *testing.B) {
	q := baseQueue()
	q.SquashIngress = false
	q.LinkLayer, q.Overhead = "atm", 44
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Build(q, Env{MTU: 1500}); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkBuildPieceOfCake(b *testing.B) {
	q := baseQueue()
	q.Script, q.Qdisc, q.EQdiscOpts = "piece_of_cake", "cake", "dual-srchost ack-filter"
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Build(q, Env{MTU: 1500}); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkRenderShellSimple(b *testing.B) {
	q := baseQueue()
	q.SquashIngress = false
	p, err := Build(q, Env{MTU: 1500})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		_ = RenderShell(p)
	}
}
