package kernel

import (
	"errors"
	"strings"
	"testing"

	"sqm/internal/plan"
)

// TestStaleStateSparesForeignTree: sqm used to count any root qdisc with
// the recorded handle (1:) and any ingress qdisc as its own, so with a
// stale state file `sqm stop` deleted an administrator's own "htb 1:"
// tree and start replaced it without --force (issue 10 item 4). Both now
// compare the device with the recorded plan's structure.
func TestStaleStateSparesForeignTree(t *testing.T) {
	ns, c := setupNS(t)
	p := build(t, queue("simple", "pfifo"))
	res, err := c.Apply(p, nil, ApplyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	stale := res.Owned
	if err := c.Remove(&stale); err != nil {
		t.Fatal(err)
	}
	// The administrator's own tree, under sqm's handles.
	ns.sh(t, "tc", "qdisc", "add", "dev", "wan0", "root", "handle", "1:", "htb", "default", "10")
	ns.sh(t, "tc", "class", "add", "dev", "wan0", "parent", "1:", "classid", "1:10", "htb", "rate", "1mbit")
	ns.sh(t, "tc", "qdisc", "add", "dev", "wan0", "handle", "ffff:", "ingress")
	before := ns.sh(t, "tc", "qdisc", "show", "dev", "wan0") + ns.sh(t, "tc", "class", "show", "dev", "wan0")

	if err := c.Remove(&stale); err != nil {
		t.Fatalf("Remove with stale state: %v", err)
	}
	if after := ns.sh(t, "tc", "qdisc", "show", "dev", "wan0") + ns.sh(t, "tc", "class", "show", "dev", "wan0"); after != before {
		t.Errorf("Remove with a stale state changed the administrator's tree:\nbefore:\n%s\nafter:\n%s", before, after)
	}
	_, err = c.Apply(p, &stale, ApplyOptions{})
	if !errors.Is(err, ErrForeignQdisc) || !strings.Contains(err.Error(), "root qdisc htb 1: was not installed by sqm") {
		t.Errorf("Apply over the administrator's tree with a stale state: %v; want ErrForeignQdisc naming htb 1:", err)
	}
	if after := ns.sh(t, "tc", "qdisc", "show", "dev", "wan0") + ns.sh(t, "tc", "class", "show", "dev", "wan0"); after != before {
		t.Errorf("refused Apply changed the tree:\nbefore:\n%s\nafter:\n%s", before, after)
	}
}

// TestOwnedTreeStillRecognised: sqm's own tree, with option values
// changed behind its back, is still sqm's (same structure), so stop
// removes it and start replaces it without --force.
func TestOwnedTreeStillRecognised(t *testing.T) {
	ns, c := setupNS(t)
	p := build(t, queue("simple", "pfifo"))
	res, err := c.Apply(p, nil, ApplyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ns.sh(t, "tc", "class", "change", "dev", "wan0", "parent", "1:1", "classid", "1:12", "htb", "rate", "1mbit", "ceil", "2mbit")
	q := queue("simple", "pfifo")
	q.Upload = 20000
	res2, err := c.Apply(build(t, q), &res.Owned, ApplyOptions{})
	if err != nil {
		t.Fatalf("re-apply over sqm's own (tuned) tree: %v", err)
	}
	if err := c.Remove(&res2.Owned); err != nil {
		t.Fatal(err)
	}
	assertClean(t, c, p)
}

func TestShapes(t *testing.T) {
	tr := &plan.Tree{Qdiscs: []plan.Qdisc{{Kind: "htb", Handle: plan.MakeHandle(1, 0), Parent: plan.HandleRoot}}}
	if got := planShape(tr); len(got) != 1 || got[0] != "qdisc htb 1: parent root" {
		t.Errorf("planShape = %q", got)
	}
	if !sameShape([]string{"a", "b"}, []string{"b", "a"}) || sameShape([]string{"a"}, []string{"a", "a"}) {
		t.Error("sameShape compares as sorted lists")
	}
	if got := noIfindex("u32 mirred(egress redirect ifindex 17)"); got != "u32 mirred(egress redirect ifindex N)" {
		t.Errorf("noIfindex = %q", got)
	}
}
