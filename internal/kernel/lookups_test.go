package kernel

import "testing"

// TestApplyLookups holds Apply and Matches to the link lookups they need:
// each RTM_GETLINK is a netlink round trip, which on a slow router CPU is
// a visible part of `sqm start`. A fresh egress+ingress apply needs the
// interface, the IFB (absent: checked once while comparing and once
// before creating it) and the created IFB's index; the mirred target is
// that IFB and must not be looked up again. An unchanged re-apply needs
// the interface and the IFB.
func TestApplyLookups(t *testing.T) {
	_, c := setupNS(t)
	p := build(t, queue("simplest", "pfifo"))
	if p.Ingress == nil || p.Ingress.IFB == "" || len(p.Ingress.Hook) == 0 {
		t.Fatalf("test plan has no IFB with a hook filter: %+v", p.Ingress)
	}
	cases := []struct {
		name string
		max  int
		run  func() error
	}{
		{"fresh apply", 4, func() error {
			res, err := c.Apply(p, nil, ApplyOptions{})
			if err == nil && !res.Changed {
				t.Errorf("fresh apply reported no change")
			}
			return err
		}},
		{"matches", 2, func() error {
			ok, diff, err := c.Matches(p)
			if err == nil && !ok {
				t.Errorf("tree differs right after apply:\n%s", diff)
			}
			return err
		}},
	}
	for _, tc := range cases {
		c.lookups = 0
		if err := tc.run(); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if c.lookups > tc.max {
			t.Errorf("%s: %d link lookups, want at most %d", tc.name, c.lookups, tc.max)
		}
	}
}
