package service

import (
	"errors"
	"testing"

	"sqm/internal/config"
	"sqm/internal/plan"
)

// optsKernel records the ApplyOptions the service hands the kernel.
type optsKernel struct {
	*fakeKernel
	opts []ApplyOptions
}

func (k *optsKernel) Apply(p *plan.Plan, prev *Owned, o ApplyOptions) (*Result, error) {
	k.opts = append(k.opts, o)
	return k.fakeKernel.Apply(p, prev, o)
}

// TestRestartKeepsShapingOnFailure: `sqm restart` was Stop then Start, so a
// start that failed after the stop left the interface unshaped. Restart
// replaces each tree in one kernel transaction instead: when the kernel
// refuses the new tree (the fake, like kernel.Apply, then keeps the old
// one), the old tree and its state stay, and nothing was removed.
func TestRestartKeepsShapingOnFailure(t *testing.T) {
	k := newFake("eth0", "eth1")
	s, _ := newService(t, k)
	qs := []config.Queue{queue("wan", "eth0", 1000, 2000), queue("lan", "eth1", 0, 500)}
	if _, err := s.Start(qs, "/etc/config/sqm", PrepareOptions{}, false); err != nil {
		t.Fatal(err)
	}
	before := map[string]string{"eth0": k.trees["eth0"], "eth1": k.trees["eth1"]}

	// A restart with a new rate for eth1 that the kernel refuses.
	qs[1].Upload = 600
	k.failApply["eth1"] = errors.New("fake: kernel module sch_fq_codel is missing")
	if _, err := s.Restart(qs, "/etc/config/sqm", PrepareOptions{}, false); err == nil {
		t.Fatal("Restart succeeded although the kernel refused eth1's tree")
	}
	for iface, tree := range before {
		if k.trees[iface] != tree {
			t.Errorf("%s: tree after the failed restart = %q; want the old one %q", iface, k.trees[iface], tree)
		}
		if st, err := s.Store.Load(iface); err != nil || st == nil {
			t.Errorf("%s: state after the failed restart = %v, %v; want the old state kept", iface, st, err)
		}
		if n := k.count(k.removes, iface); n != 0 {
			t.Errorf("%s: removed %d times; a restart must not take shaping down first", iface, n)
		}
	}
}

// TestRestartRebuildsUnchanged: unlike Start and Reload, Restart rebuilds
// sections whose tree is already in place (fresh counters), and tells the
// kernel to (ApplyOptions.Rebuild), passing --force on; a section no
// longer in the config is removed.
func TestRestartRebuildsUnchanged(t *testing.T) {
	fk := newFake("eth0", "eth1")
	k := &optsKernel{fakeKernel: fk}
	s, _ := newService(t, fk)
	s.Kernel = k
	qs := []config.Queue{queue("wan", "eth0", 1000, 2000), queue("lan", "eth1", 0, 500)}
	if _, err := s.Start(qs, "/etc/config/sqm", PrepareOptions{}, false); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Start(qs, "/etc/config/sqm", PrepareOptions{}, false); err != nil {
		t.Fatal(err)
	}
	if n := fk.count(fk.applies, "eth0"); n != 1 {
		t.Fatalf("Start applied an unchanged section again (%d applies)", n)
	}
	k.opts = nil
	outs, err := s.Restart(qs[:1], "/etc/config/sqm", PrepareOptions{}, true)
	if err != nil {
		t.Fatal(err)
	}
	if n := fk.count(fk.applies, "eth0"); n != 2 {
		t.Errorf("eth0 applied %d times; want 2 (Restart rebuilds it)", n)
	}
	if len(k.opts) != 1 || !k.opts[0].Rebuild || !k.opts[0].Force {
		t.Errorf("kernel got %+v; want one Apply with Rebuild and Force", k.opts)
	}
	if st, _ := s.Store.Load("eth1"); st != nil || fk.count(fk.removes, "eth1") != 1 {
		t.Errorf("eth1, no longer in the config, was not removed (state %v)", st)
	}
	want := map[string]Action{"eth0": ActApplied, "eth1": ActRemoved}
	for _, o := range outs {
		if want[o.Interface] != o.Action {
			t.Errorf("outcome %v; want %s for %s", o, want[o.Interface], o.Interface)
		}
		delete(want, o.Interface)
	}
	if len(want) > 0 {
		t.Errorf("no outcome for %v in %v", want, outs)
	}
}
