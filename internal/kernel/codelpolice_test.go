package kernel

import (
	"slices"
	"strings"
	"testing"
	"time"

	"sqm/internal/codelpolice"
	"sqm/internal/config"
)

// loadedCodelPolice lists the codel_police programs the kernel holds.
func loadedCodelPolice(t *testing.T) []uint32 {
	t.Helper()
	ids, err := codelpolice.LoadedPrograms()
	if err != nil {
		t.Fatal(err)
	}
	return ids
}

// waitUnloaded waits until none of ids is loaded any more. The kernel
// frees a program after an RCU grace period once its last reference (the
// filter) is gone, so it lingers briefly; the deadline is generous and
// only bounds a failing test, it is not what is checked.
func waitUnloaded(t *testing.T, ids []uint32) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		var left []uint32
		for _, id := range loadedCodelPolice(t) {
			if slices.Contains(ids, id) {
				left = append(left, id)
			}
		}
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("codel_police programs %v still loaded after Remove", left)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestApplyCodelPoliceHost: the recipe applies on a veth (the verifier
// accepts the program on this kernel), matches itself, re-applies without
// change, reports counters, and Remove leaves neither filter nor program.
func TestApplyCodelPoliceHost(t *testing.T) {
	for _, v := range []struct {
		name string
		mod  func(q *config.Queue)
	}{
		{"flows", func(q *config.Queue) {}},
		{"flowblind-noecn", func(q *config.Queue) { q.IQdiscOpts, q.IngressECN = "flowblind", false }},
		{"ingress-only", func(q *config.Queue) { q.Upload = 0 }},
	} {
		t.Run(v.name, func(t *testing.T) {
			ns, c := setupNS(t)
			before := loadedCodelPolice(t)
			q := queue("codel_police", "pfifo")
			v.mod(q)
			p := build(t, q)
			res := applyCycle(t, ns, c, p)
			var ours []uint32
			for _, id := range loadedCodelPolice(t) {
				if !slices.Contains(before, id) {
					ours = append(ours, id)
				}
			}
			if len(ours) != 1 {
				t.Errorf("%d new codel_police programs loaded, want 1 (the second Apply must not load another)", len(ours))
			}
			out := ns.sh(t, "tc", "filter", "show", "dev", "wan0", "ingress")
			if !strings.Contains(out, "direct-action") || !strings.Contains(out, "codel_police-") {
				t.Errorf("tc filter show does not list the program in direct-action mode:\n%s", out)
			}
			var st []DeviceStatus
			var err error
			ns.Do(func() { st, err = c.Status("wan0") })
			if err != nil {
				t.Fatal(err)
			}
			if st[0].CodelPolice == nil {
				t.Errorf("Status has no codel_police counters")
			}
			if st[0].Filters != 1 {
				t.Errorf("Status counts %d filters, want 1", st[0].Filters)
			}
			// A plan with another rate must not match the installed one.
			q2 := queue("codel_police", "pfifo")
			v.mod(q2)
			q2.Download++
			if ok, _, _ := c.Matches(build(t, q2)); ok {
				t.Errorf("Matches is true for a plan with another rate")
			}
			if err := c.Remove(&res.Owned); err != nil {
				t.Fatalf("Remove: %v", err)
			}
			assertClean(t, c, p)
			waitUnloaded(t, ours)
		})
	}
}

// TestCodelPoliceBadParams: a plan with parameters out of range is
// refused before anything is changed.
func TestCodelPoliceBadParams(t *testing.T) {
	_, c := setupNS(t)
	p := build(t, queue("codel_police", "pfifo"))
	p.Ingress.Hook[0].CodelPolice.Target = 0
	_, err := c.Apply(p, nil, ApplyOptions{})
	if err == nil || !strings.Contains(err.Error(), "target") {
		t.Fatalf("Apply with target 0: %v, want an error naming the target", err)
	}
	assertClean(t, c, p)
}
