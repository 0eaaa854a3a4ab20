package features

import (
	"testing"

	"github.com/florianl/go-tc"
	"github.com/florianl/go-tc/core"
	"golang.org/x/sys/unix"

	"sqm/internal/testutil"
)

// TestVMCakeOnVeth builds the cake root qdisc sqm's piece_of_cake-style
// recipes use (bandwidth, ATM framing, overhead 44, nat, diffserv4) through
// go-tc on the loopback of a fresh namespace and reads it back from the
// kernel. (The name is older than the probe device; docs refer to it.)
func TestVMCakeOnVeth(t *testing.T) {
	testutil.RequireVM(t)
	ns, err := newThrowawayNS()
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Close()
	// go-tc, which sqm no longer links, reads the qdisc back here.
	tcc, err := tc.Open(&tc.Config{NetNS: ns.fd})
	if err != nil {
		t.Fatal(err)
	}
	defer tcc.Close()
	u32p := func(v uint32) *uint32 { return &v }

	const (
		rate      = 18_000_000 / 8 // 18 Mbit/s in bytes/s
		atm       = 1              // CAKE_ATM_ATM
		overhead  = 44
		diffserv4 = 1 // kernel enum: 0 diffserv3, 1 diffserv4, 2 diffserv8, 3 besteffort
	)
	u64 := func(v uint64) *uint64 { return &v }
	want := tc.Cake{
		BaseRate: u64(rate), Atm: u32p(atm), Overhead: u32p(overhead),
		Nat: u32p(1), DiffServMode: u32p(diffserv4),
	}
	cake := want
	err = tcc.Qdisc().Add(&tc.Object{
		Msg:       tc.Msg{Family: unix.AF_UNSPEC, Ifindex: ns.dev, Handle: core.BuildHandle(1, 0), Parent: tc.HandleRoot},
		Attribute: tc.Attribute{Kind: "cake", Cake: &cake},
	})
	if err != nil {
		t.Fatalf("add cake: %v", err)
	}
	qdiscs, err := tcc.Qdisc().Get()
	if err != nil {
		t.Fatalf("read qdiscs back: %v", err)
	}
	var got *tc.Object
	for i := range qdiscs {
		if qdiscs[i].Ifindex == ns.dev && qdiscs[i].Parent == tc.HandleRoot {
			got = &qdiscs[i]
		}
	}
	if got == nil {
		t.Fatalf("no root qdisc on lo after adding cake; have %d qdiscs", len(qdiscs))
	}
	if got.Kind != "cake" || got.Cake == nil {
		t.Fatalf("root qdisc kind %q (cake options %v), want cake", got.Kind, got.Cake)
	}
	if got.Handle != core.BuildHandle(1, 0) {
		t.Errorf("handle %#x, want 1:0", got.Handle)
	}
	check := func(name string, g *uint32, w uint32) {
		t.Helper()
		if g == nil {
			t.Errorf("%s: not reported by the kernel", name)
		} else if *g != w {
			t.Errorf("%s = %d, want %d", name, *g, w)
		}
	}
	if got.Cake.BaseRate == nil || *got.Cake.BaseRate != rate {
		t.Errorf("base rate %v, want %d", got.Cake.BaseRate, rate)
	}
	check("atm", got.Cake.Atm, atm)
	check("overhead", got.Cake.Overhead, overhead)
	check("nat", got.Cake.Nat, 1)
	check("diffserv mode", got.Cake.DiffServMode, diffserv4)
}
