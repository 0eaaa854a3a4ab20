package kernel

import "testing"

// TestApplyRebuild: Apply leaves a matching tree alone, except with
// Rebuild (sqm restart), which replaces it as one transaction and reports
// the change.
func TestApplyRebuild(t *testing.T) {
	_, c := setupNS(t)
	p := build(t, queue("simple", "pfifo"))
	r1, err := c.Apply(p, nil, ApplyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	same, err := c.Apply(p, &r1.Owned, ApplyOptions{})
	if err != nil || same.Changed {
		t.Fatalf("re-apply of a matching tree: changed=%v err=%v; want an unchanged tree", same != nil && same.Changed, err)
	}
	r2, err := c.Apply(p, &r1.Owned, ApplyOptions{Rebuild: true})
	if err != nil || !r2.Changed {
		t.Fatalf("Rebuild: changed=%v err=%v; want the tree rebuilt", r2 != nil && r2.Changed, err)
	}
	if ok, diff, err := c.Matches(p); err != nil || !ok {
		t.Fatalf("after Rebuild the tree does not match: %v\n%s", err, diff)
	}
	if r2.Owned.IFB != r1.Owned.IFB || r2.Owned.IFB == "" {
		t.Errorf("Rebuild lost the IFB: before %q, after %q", r1.Owned.IFB, r2.Owned.IFB)
	}
	if err := c.Remove(&r2.Owned); err != nil {
		t.Fatal(err)
	}
	assertClean(t, c, p)
}
