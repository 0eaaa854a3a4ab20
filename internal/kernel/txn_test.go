package kernel

import (
	"errors"
	"strings"
	"testing"

	"sqm/internal/plan"
	"sqm/internal/testutil"
)

// TestApplyFailureKeepsPrevious: the host kernel refuses fq_codel (no
// sch_fq_codel) after the htb root and classes were already rebuilt (Apply
// does not probe first), so the rollback must rebuild the previous tree
// from prev.Plan, and the error must name the module and the package.
func TestApplyFailureKeepsPrevious(t *testing.T) {
	if testutil.InVM() {
		t.Skip("the VM kernel has fq_codel; this injection relies on the host lacking it")
	}
	ns, c := setupNS(t)
	var steps []string
	c.afterStep = func(s string) { steps = append(steps, s) }
	old := build(t, queue("simple", "pfifo"))
	res, err := c.Apply(old, nil, ApplyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	before := ns.sh(t, "tc", "-d", "qdisc", "show")
	beforeF := ns.sh(t, "tc", "filter", "show", "dev", "wan0", "parent", "ffff:")

	bad := build(t, queue("simple", "fq_codel"))
	steps = nil
	_, err = c.Apply(bad, &res.Owned, ApplyOptions{})
	if err == nil {
		t.Fatal("Apply with fq_codel succeeded on a kernel without it")
	}
	want := "kernel module sch_fq_codel is missing (OpenWrt builds it into its kernel; a custom kernel needs it enabled)"
	if !errors.Is(err, ErrNotSupported) || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "rolled back") {
		t.Errorf("error does not say %q and that it rolled back: %v", want, err)
	}
	t.Logf("error: %v (steps done: %v)", err, steps)
	if ok, diff, err := c.Matches(old); err != nil || !ok {
		t.Fatalf("previous tree not restored: err=%v diff:\n%s", err, diff)
	}
	if after := ns.sh(t, "tc", "-d", "qdisc", "show"); after != before {
		t.Errorf("qdiscs differ after rollback:\nbefore:\n%s\nafter:\n%s", before, after)
	}
	if after := ns.sh(t, "tc", "filter", "show", "dev", "wan0", "parent", "ffff:"); after != beforeF {
		t.Errorf("ingress hook differs after rollback:\nbefore:\n%s\nafter:\n%s", beforeF, after)
	}
	// A failure at the very last step (the police hook; act_police is
	// missing here) after egress, ingress qdisc and IFB were redone.
	pol := build(t, queue("police", "pfifo"))
	if _, err := c.Apply(pol, &res.Owned, ApplyOptions{}); err == nil {
		t.Fatal("police Apply succeeded without act_police")
	}
	if ok, diff, err := c.Matches(old); err != nil || !ok {
		t.Fatalf("previous tree not restored after a late failure: err=%v diff:\n%s", err, diff)
	}
	if after := ns.sh(t, "tc", "-d", "qdisc", "show"); after != before {
		t.Errorf("qdiscs differ after late rollback:\nbefore:\n%s\nafter:\n%s", before, after)
	}
	if err := c.Remove(&res.Owned); err != nil {
		t.Fatal(err)
	}
	assertClean(t, c, old)
}

// TestApplyFailureFreshInterface: a failing first apply leaves nothing,
// including the IFB it created.
func TestApplyFailureFreshInterface(t *testing.T) {
	if testutil.InVM() {
		t.Skip("relies on the host kernel lacking fq_codel")
	}
	_, c := setupNS(t)
	// Fails in the middle (fq_codel) and at the very end (police).
	bad := build(t, queue("simple", "fq_codel"))
	if _, err := c.Apply(bad, nil, ApplyOptions{}); err == nil {
		t.Fatal("Apply succeeded")
	}
	assertClean(t, c, bad)
	// Policing fails too (no act_police here): the ingress qdisc must go.
	pol := build(t, queue("police", "pfifo"))
	_, err := c.Apply(pol, nil, ApplyOptions{})
	if err == nil {
		t.Fatal("police Apply succeeded on a kernel without act_police")
	}
	t.Logf("police error: %v", err)
	assertClean(t, c, pol)
}

func TestForeignQdiscRefused(t *testing.T) {
	ns, c := setupNS(t)
	p := build(t, queue("simplest", "pfifo"))
	ns.sh(t, "tc", "qdisc", "add", "dev", "wan0", "root", "handle", "5:", "tbf", "rate", "1mbit", "burst", "10k", "latency", "50ms")
	_, err := c.Apply(p, nil, ApplyOptions{})
	if !errors.Is(err, ErrForeignQdisc) {
		t.Fatalf("Apply over a foreign tbf: %v, want ErrForeignQdisc", err)
	}
	if !strings.Contains(ns.sh(t, "tc", "qdisc", "show", "dev", "wan0"), "tbf 5:") {
		t.Fatal("foreign tbf was touched by a refused Apply")
	}
	// An sqm tree from an earlier run (prev) is not foreign...
	prev := &Owned{Interface: "wan0", EgressRoot: true, EgressHandle: plan.MakeHandle(5, 0)}
	r, err := c.Apply(p, prev, ApplyOptions{})
	if err != nil {
		t.Fatalf("Apply over sqm's own previous root: %v", err)
	}
	// ...and a foreign ingress qdisc is, even where sqm had its own.
	ns.sh(t, "tc", "qdisc", "del", "dev", "wan0", "ingress")
	ns.sh(t, "tc", "qdisc", "add", "dev", "wan0", "clsact")
	_, err = c.Apply(p, &r.Owned, ApplyOptions{})
	if !errors.Is(err, ErrForeignQdisc) {
		t.Fatalf("Apply over clsact: %v, want ErrForeignQdisc", err)
	}
	res, err := c.Apply(p, &r.Owned, ApplyOptions{Force: true})
	if err != nil {
		t.Fatalf("forced Apply: %v", err)
	}
	if ok, diff, _ := c.Matches(p); !ok {
		t.Fatalf("forced Apply does not match:\n%s", diff)
	}
	if err := c.Remove(&res.Owned); err != nil {
		t.Fatal(err)
	}
	assertClean(t, c, p)
}

// TestForeignIFBRefused: an IFB of the same name sqm did not create.
func TestForeignIFBRefused(t *testing.T) {
	ns, c := setupNS(t)
	p := build(t, queue("simplest", "pfifo"))
	ns.sh(t, "ip", "link", "add", p.Ingress.IFB, "type", "ifb")
	if _, err := c.Apply(p, nil, ApplyOptions{}); !errors.Is(err, ErrForeignQdisc) {
		t.Fatalf("Apply with a foreign IFB: %v, want ErrForeignQdisc", err)
	}
	res, err := c.Apply(p, nil, ApplyOptions{Force: true})
	if err != nil {
		t.Fatal(err)
	}
	if res.Owned.IFB != "" {
		t.Errorf("a reused foreign IFB is recorded as sqm's: %q", res.Owned.IFB)
	}
	if err := c.Remove(&res.Owned); err != nil {
		t.Fatal(err)
	}
	if ok, _ := c.LinkExists(p.Ingress.IFB); !ok {
		t.Error("Remove deleted an IFB sqm did not create")
	}
}

// TestReapplyChangedPlan: a new rate on an interface sqm owns replaces the
// tree; dropping ingress removes the hook and the IFB.
func TestReapplyChangedPlan(t *testing.T) {
	_, c := setupNS(t)
	q := queue("simple", "pfifo")
	p1 := build(t, q)
	r1, err := c.Apply(p1, nil, ApplyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	q.Upload = 20000
	p2 := build(t, q)
	if ok, _, _ := c.Matches(p2); ok {
		t.Fatal("Matches(p2) true before applying p2: Matches does not compare rates")
	}
	r2, err := c.Apply(p2, &r1.Owned, ApplyOptions{})
	if err != nil || !r2.Changed {
		t.Fatalf("re-apply: changed=%v err=%v", r2 != nil && r2.Changed, err)
	}
	if ok, diff, _ := c.Matches(p2); !ok {
		t.Fatalf("after re-apply:\n%s", diff)
	}
	q.Download = 0
	p3 := build(t, q)
	r3, err := c.Apply(p3, &r2.Owned, ApplyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if ok, diff, _ := c.Matches(p3); !ok {
		t.Fatalf("after dropping ingress:\n%s", diff)
	}
	if ok, _ := c.LinkExists(p1.Ingress.IFB); ok {
		t.Error("IFB still exists after ingress shaping was turned off")
	}
	l, _ := c.linkByName("wan0")
	cur, _ := c.readTree(l.Index)
	if cur.ingress() != nil {
		t.Error("ingress qdisc still present after ingress shaping was turned off")
	}
	if err := c.Remove(&r3.Owned); err != nil {
		t.Fatal(err)
	}
	assertClean(t, c, p1)
}

// TestMatchesDetectsTampering: someone deletes a class filter or the
// root; Matches must say so.
func TestMatchesDetectsTampering(t *testing.T) {
	ns, c := setupNS(t)
	p := build(t, queue("simple", "pfifo"))
	if _, err := c.Apply(p, nil, ApplyOptions{}); err != nil {
		t.Fatal(err)
	}
	ns.sh(t, "tc", "qdisc", "replace", "dev", "wan0", "parent", "1:12", "handle", "120:", "pfifo", "limit", "5")
	ok, diff, err := c.Matches(p)
	if err != nil || ok || !strings.Contains(diff, "limit: want 1001, kernel has 5") {
		t.Errorf("changed leaf limit: ok=%v err=%v diff:\n%s", ok, err, diff)
	}
	ns.sh(t, "tc", "filter", "del", "dev", "wan0", "parent", "1:", "prio", "10")
	if _, diff, _ := c.Matches(p); !strings.Contains(diff, "missing filter parent 1: prio 10") {
		t.Errorf("deleted filter not reported:\n%s", diff)
	}
	ns.sh(t, "tc", "qdisc", "del", "dev", "wan0", "root")
	if _, diff, _ := c.Matches(p); !strings.Contains(diff, "missing qdisc htb 1:") {
		t.Errorf("deleted root not reported:\n%s", diff)
	}
}

// TestRemoveLeavesOthersAlone: after someone replaced sqm's root and
// ingress qdiscs, Remove must not delete theirs.
func TestRemoveLeavesOthersAlone(t *testing.T) {
	ns, c := setupNS(t)
	p := build(t, queue("simplest", "pfifo"))
	res, err := c.Apply(p, nil, ApplyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ns.sh(t, "tc", "qdisc", "replace", "dev", "wan0", "root", "handle", "7:", "tbf", "rate", "1mbit", "burst", "10k", "latency", "50ms")
	ns.sh(t, "tc", "qdisc", "del", "dev", "wan0", "ingress")
	ns.sh(t, "tc", "qdisc", "add", "dev", "wan0", "clsact")
	if err := c.Remove(&res.Owned); err != nil {
		t.Fatal(err)
	}
	out := ns.sh(t, "tc", "qdisc", "show", "dev", "wan0")
	if !strings.Contains(out, "tbf 7:") || !strings.Contains(out, "clsact") {
		t.Errorf("Remove deleted qdiscs sqm did not own:\n%s", out)
	}
	if ok, _ := c.LinkExists(p.Ingress.IFB); ok {
		t.Error("Remove left sqm's IFB")
	}
}
