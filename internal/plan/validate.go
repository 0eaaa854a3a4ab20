package plan

import (
	"errors"
	"fmt"

	"sqm/internal/config"
)

// Validate checks that p is internally consistent: every qdisc has the
// options of its kind, handles are unique, every class and leaf hangs off
// something that exists, filters point at existing classes and never
// share a prio, and the ingress side is either a shaped IFB with its
// redirect or a policer. Build's plans always pass; Validate is for plans
// that come from elsewhere (JSON state, hand-written tests) before they
// are applied. It reports every problem found, joined.
func (p *Plan) Validate() error {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("plan %s: "+format, append([]any{p.Interface}, args...)...))
	}
	if p.Interface == "" {
		bad("no interface")
	}
	if p.Egress != nil {
		if p.Egress.Device != p.Interface {
			bad("egress tree is on %q, not the interface", p.Egress.Device)
		}
		errs = append(errs, validateTree(p.Egress)...)
	}
	if in := p.Ingress; in != nil {
		if len(in.Hook) == 0 {
			bad("ingress has no hook filters")
		}
		for i, f := range in.Hook {
			if f.Parent != hFFFF {
				bad("hook filter %d has parent %s, want ffff:", i, f.Parent)
			}
			if f.Kind == "bpf" {
				if f.CodelPolice == nil {
					bad("hook filter %d is a bpf filter without a program", i)
				} else if err := f.CodelPolice.Validate(); err != nil {
					bad("hook filter %d: %v", i, err)
				}
			}
			for _, a := range f.Actions {
				switch {
				case a.Mirred != nil && a.Mirred.Device != in.IFB:
					bad("hook filter %d redirects to %q, not the IFB %q", i, a.Mirred.Device, in.IFB)
				case a.Police != nil && (a.Police.RateBits == 0 || a.Police.Burst == 0 || a.Police.MTU == 0):
					bad("hook filter %d polices with a zero rate, burst or mtu: %+v", i, *a.Police)
				case a.Mirred == nil && a.Police == nil:
					bad("hook filter %d has an empty action", i)
				}
			}
		}
		switch {
		case in.IFB != "" && in.Shaper == nil:
			bad("IFB %s has no shaper tree", in.IFB)
		case in.IFB == "" && in.Shaper != nil:
			bad("ingress shaper tree without an IFB")
		case in.Shaper != nil:
			if in.Shaper.Device != in.IFB {
				bad("ingress tree is on %q, not the IFB %q", in.Shaper.Device, in.IFB)
			}
			if len(in.IFB) > maxIfName {
				bad("IFB name %q is longer than %d characters", in.IFB, maxIfName)
			}
			errs = append(errs, validateTree(in.Shaper)...)
		}
	}
	return errors.Join(errs...)
}

// optionsSet counts the kind-specific option pointers of q and reports
// whether the one matching q.Kind is among them.
func optionsSet(q *Qdisc) (n int, match bool) {
	for _, o := range []struct {
		set  bool
		kind string
	}{
		{q.HTB != nil, "htb"}, {q.TBF != nil, "tbf"}, {q.Cake != nil, "cake"}, {q.FqCodel != nil, "fq_codel"},
		{q.Codel != nil, "codel"}, {q.Pie != nil, "pie"}, {q.FqPie != nil, "fq_pie"}, {q.SFQ != nil, "sfq"},
		{q.Fifo != nil, "pfifo"}, {q.Fifo != nil, "bfifo"},
	} {
		if o.set {
			if o.kind != "bfifo" { // Fifo serves both fifos: count it once
				n++
			}
			if o.kind == q.Kind {
				match = true
			}
		}
	}
	return n, match
}

func validateTree(t *Tree) []error {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("tree on %s: "+format, append([]any{t.Device}, args...)...))
	}
	if t.Device == "" {
		bad("no device")
	}
	if len(t.Qdiscs) == 0 {
		bad("no qdiscs")
		return errs
	}
	root := t.Qdiscs[0]
	if root.Parent != HandleRoot {
		bad("first qdisc %s has parent %s, want root", root.Handle, root.Parent)
	}
	handles := map[Handle]bool{}
	for _, q := range t.Qdiscs {
		if q.Handle.Minor() != 0 || q.Handle.Major() == 0 || q.Handle == HandleRoot {
			bad("qdisc handle %s is not major:", q.Handle)
		}
		if handles[q.Handle] {
			bad("qdisc handle %s used twice", q.Handle)
		}
		handles[q.Handle] = true
		if n, match := optionsSet(&q); n != 1 || !match {
			bad("qdisc %s of kind %q has %d option sets (match %v), want exactly its own", q.Handle, q.Kind, n, match)
		}
		if st := q.Stab; st != nil && (st.TSize > config.MaxStabTSize || st.MTU > config.MaxStabMTU) {
			bad("qdisc %s size table of %d cells for mtu %d is beyond the kernel's %d cells and mtu %d", q.Handle, st.TSize, st.MTU, config.MaxStabTSize, config.MaxStabMTU)
		}
		if q.TBF != nil {
			errs = append(errs, validateRateLL(t.Device, "tbf "+q.Handle.String(), q.TBF.LinkLayer)...)
		}
	}
	classes := map[Handle]*HTBClass{}
	for _, c := range t.Classes {
		if c.HTB == nil {
			bad("class %s has no htb parameters", c.ClassID)
			continue
		}
		if c.ClassID.Major() != root.Handle.Major() || c.ClassID.Minor() == 0 {
			bad("class id %s is not under root %s", c.ClassID, root.Handle)
		}
		if classes[c.ClassID] != nil {
			bad("class %s defined twice", c.ClassID)
		}
		if c.Parent != root.Handle && classes[c.Parent] == nil {
			bad("class %s has parent %s, which is neither the root nor an earlier class", c.ClassID, c.Parent)
		}
		if c.HTB.RateBits == 0 || c.HTB.RateBits > c.HTB.CeilBits {
			bad("class %s rate %d, ceil %d: want 0 < rate <= ceil", c.ClassID, c.HTB.RateBits, c.HTB.CeilBits)
		}
		errs = append(errs, validateRateLL(t.Device, "class "+c.ClassID.String(), c.HTB.LinkLayer)...)
		classes[c.ClassID] = c.HTB
	}
	if len(t.Classes) > 0 && root.Kind != "htb" {
		bad("classes under a %s root", root.Kind)
	}
	if root.HTB != nil && classes[MakeHandle(root.Handle.Major(), root.HTB.Default)] == nil {
		bad("htb default %x is not a class", root.HTB.Default)
	}
	parents := map[Handle]bool{}
	for _, q := range t.Qdiscs[1:] {
		switch {
		case root.Kind == "htb" && classes[q.Parent] == nil:
			bad("leaf %s hangs off %s, which is not a class", q.Handle, q.Parent)
		case root.Kind == "tbf" && q.Parent != root.Handle:
			bad("leaf %s hangs off %s, not the tbf %s", q.Handle, q.Parent, root.Handle)
		case root.Kind != "htb" && root.Kind != "tbf":
			bad("leaf %s under a classless %s root", q.Handle, root.Kind)
		}
		if parents[q.Parent] {
			bad("two leaves on %s", q.Parent)
		}
		parents[q.Parent] = true
	}
	prios := map[uint16]bool{}
	for _, f := range t.Filters {
		if f.Parent != root.Handle {
			bad("filter prio %d has parent %s, want the root %s", f.Prio, f.Parent, root.Handle)
		}
		if prios[f.Prio] {
			bad("filter prio %d used twice", f.Prio)
		}
		prios[f.Prio] = true
		if f.Kind == "u32" && (f.U32 == nil || len(f.U32.Keys) == 0) {
			bad("u32 filter prio %d has no keys", f.Prio)
		}
		if classes[f.FlowID] == nil {
			bad("filter prio %d sends to %s, which is not a class", f.Prio, f.FlowID)
		}
	}
	return errs
}

// validateRateLL checks htb_private accounting against struct tc_ratespec,
// whose overhead and mpu are unsigned 16-bit fields.
func validateRateLL(dev, what string, r *RateLinkLayer) []error {
	if r == nil || (r.Overhead >= 0 && r.Overhead <= maxRateSpecField && r.MPU <= maxRateSpecField) {
		return nil
	}
	return []error{fmt.Errorf("tree on %s: %s: rate-table overhead %d / mpu %d outside the kernel's 0..%d", dev, what, r.Overhead, r.MPU, maxRateSpecField)}
}
