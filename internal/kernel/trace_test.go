package kernel

import (
	"strings"
	"testing"
)

// TestTrace: with SetTrace, Apply and Remove report each change they send,
// naming the device (the IFB's own name for its tree) and the kernel's
// answer; one op per qdisc, class and filter of the plan.
func TestTrace(t *testing.T) {
	_, c := setupNS(t)
	var ops []Op
	c.SetTrace(func(o Op) { ops = append(ops, o) })
	p := build(t, queue("simple", "pfifo"))
	r, err := c.Apply(p, nil, ApplyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := 0
	for _, tr := range []int{len(p.Egress.Qdiscs) + len(p.Egress.Classes) + len(p.Egress.Filters),
		len(p.Ingress.Shaper.Qdiscs) + len(p.Ingress.Shaper.Classes) + len(p.Ingress.Shaper.Filters),
		len(p.Ingress.Hook)} {
		want += tr
	}
	want += 3 // create ifb, ingress qdisc, ifb up
	var text []string
	for _, o := range ops {
		if o.Err != nil {
			t.Errorf("op failed: %v", o)
		}
		text = append(text, o.String())
	}
	all := strings.Join(text, "\n")
	if len(ops) != want {
		t.Errorf("%d ops traced, want %d:\n%s", len(ops), want, all)
	}
	for _, s := range []string{"ifb4wan0: create ifb ifb4wan0: ok", "wan0: add qdisc htb 1: (parent root) on wan0: ok",
		"ifb4wan0: add qdisc htb 1: (parent root) on ifb4wan0: ok", "wan0: add qdisc ingress ffff: (parent ingress) on wan0: ok",
		"ifb4wan0: set link up: ok"} {
		if !strings.Contains(all, s) {
			t.Errorf("trace lacks %q:\n%s", s, all)
		}
	}
	ops = nil
	if err := c.Remove(&r.Owned); err != nil {
		t.Fatal(err)
	}
	text = text[:0]
	for _, o := range ops {
		text = append(text, o.String())
	}
	all = strings.Join(text, "\n")
	for _, s := range []string{"wan0: delete qdisc 1: (parent root): ok", "wan0: delete qdisc ffff: (parent ingress): ok", "ifb4wan0: delete device ifb4wan0: ok"} {
		if !strings.Contains(all, s) {
			t.Errorf("Remove trace lacks %q:\n%s", s, all)
		}
	}
	c.SetTrace(nil)
}
