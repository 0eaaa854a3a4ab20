package kernel

import (
	"errors"
	"fmt"
	"strings"

	"golang.org/x/sys/unix"

	"sqm/internal/plan"
)

// ingressHandle is the handle of the ingress qdisc (ffff:).
const ingressHandle = plan.Handle(0xFFFF0000)

// Apply makes iface's shaping equal to p. It is transactional: on failure it
// removes what it built, deletes an IFB it created and rebuilds sqm's
// previous tree from prev.Plan, then returns the kernel's message and what
// to do. A root or ingress qdisc sqm did not install (per prev) makes it
// refuse with ErrForeignQdisc unless opts.Force. If the kernel already
// matches p it changes nothing and reports Changed=false, unless
// opts.Rebuild asks for fresh qdiscs.
func (c *Conn) Apply(p *plan.Plan, prev *Owned, opts ApplyOptions) (*Result, error) {
	if p == nil || p.Interface == "" {
		return nil, errors.New("apply: plan has no interface")
	}
	if err := p.Validate(); err != nil {
		return nil, fmt.Errorf("apply %s: refusing an inconsistent plan: %w", p.Interface, err)
	}
	if prev != nil && prev.Interface != p.Interface {
		return nil, fmt.Errorf("apply %s: previous state is for interface %q; remove that first", p.Interface, prev.Interface)
	}
	l, err := c.linkByName(p.Interface)
	if err != nil {
		return nil, fmt.Errorf("apply: %w", err)
	}
	ok, _, cur, err := c.matches(p, l)
	if err == nil && ok && !prevWantsCleanup(p, prev) && !opts.Rebuild {
		// A tree equal to the plan is adopted whole, its IFB included,
		// whoever built it: it is sqm's shaping in every detail, and the
		// usual way to get here without prev is sqm's own state lost while
		// the shaping stayed (state directory cleared, moved by an
		// upgrade). Not adopting the IFB there would leave it behind at
		// stop and make the next start refuse it as foreign. (A rebuild
		// that takes over someone's IFB under Force does not claim it: it
		// was built for something else.)
		o := ownedFor(p, l.Index, prev)
		if o.IFB != "" {
			if il, err := c.linkByName(o.IFB); err == nil {
				o.IFBIndex = il.Index
			}
		}
		return &Result{Owned: o, Changed: false}, nil
	}
	if cur == nil {
		if cur, err = c.readTree(l.Index); err != nil {
			return nil, fmt.Errorf("apply %s: read current qdiscs: %w", p.Interface, err)
		}
	}
	tx := &txn{c: c, p: p, prev: prev, iface: l}
	if err := tx.check(cur, opts); err != nil {
		return nil, err
	}
	if err := tx.run(cur); err != nil {
		undoErr := tx.rollback()
		if undoErr != nil {
			return nil, fmt.Errorf("apply %s: %w; rollback incomplete: %v", p.Interface, err, undoErr)
		}
		if errors.Is(err, ErrNoLink) {
			return nil, fmt.Errorf("apply %s: %w (rolled back: nothing sqm created is left)", p.Interface, err)
		}
		return nil, fmt.Errorf("apply %s: %w (rolled back: the interface is as it was)", p.Interface, err)
	}
	o := ownedFor(p, l.Index, prev)
	if p.Ingress != nil && p.Ingress.IFB != "" {
		if tx.ifbCreated || (prev != nil && prev.IFB == p.Ingress.IFB) {
			o.IFB, o.IFBIndex = p.Ingress.IFB, tx.ifbIndex
		} else {
			o.IFB, o.IFBIndex = "", 0 // reused a foreign IFB under Force: not ours to delete
		}
	}
	return &Result{Owned: o, Changed: true}, nil
}

// prevWantsCleanup reports whether prev holds something p no longer
// wants (Matches looks only at what p wants).
func prevWantsCleanup(p *plan.Plan, prev *Owned) bool {
	if prev == nil {
		return false
	}
	ifb := ""
	if p.Ingress != nil {
		ifb = p.Ingress.IFB
	}
	return (prev.EgressRoot && p.Egress == nil) || (prev.Ingress && p.Ingress == nil) || (prev.IFB != "" && prev.IFB != ifb)
}

// Interrupted is what Remove may take away after an apply of p was killed
// before any state recorded it: p's root and ingress qdiscs by handle and
// kind alone (a half-built tree matches no plan, so Plan is left out) and
// ifb, the IFB the apply claimed as its own ("" if it found one and reused
// it: that one is not sqm's to delete).
func Interrupted(p *plan.Plan, ifb string) Owned {
	o := ownedFor(p, 0, nil)
	o.Plan, o.IFB = nil, ifb
	return o
}

func ownedFor(p *plan.Plan, ifindex int, prev *Owned) Owned {
	o := Owned{Interface: p.Interface, Ifindex: ifindex, Plan: p}
	if p.Egress != nil && len(p.Egress.Qdiscs) > 0 {
		o.EgressRoot, o.EgressHandle = true, p.Egress.Qdiscs[0].Handle
	}
	if p.Ingress != nil {
		o.Ingress = true
		o.IFB = p.Ingress.IFB
		if prev != nil && prev.IFB == o.IFB {
			o.IFBIndex = prev.IFBIndex
		}
	}
	return o
}

// txn is one Apply in progress and what it has touched.
type txn struct {
	c     *Conn
	p     *plan.Plan
	prev  *Owned
	iface *link

	ifbCreated  bool
	ifbIndex    int
	ifbExisted  bool
	egressDone  bool // the interface's root was deleted or replaced
	ingressDone bool // the interface's ingress qdisc was deleted or replaced
	ifbRootDone bool // the IFB's root was deleted or replaced
	lostForeign []string
}

// owns reports whether cur's root (egress) or ingress qdisc is the one
// sqm recorded in prev, by structure, not handle alone (see ownsRoot).
func (t *txn) owns(cur *tree, egress bool) bool {
	if egress {
		return ownsRoot(cur, t.prev)
	}
	return t.c.ownsIngress(cur, t.prev)
}

// check refuses foreign qdiscs and IFBs.
func (t *txn) check(cur *tree, opts ApplyOptions) error {
	dev := t.p.Interface
	if t.p.Egress != nil {
		if r := cur.root(); r != nil && r.Handle.Major() != 0 && !t.owns(cur, true) {
			if !opts.Force {
				return fmt.Errorf("apply %s: root qdisc %s %s was not installed by sqm; remove it (tc qdisc del dev %s root) or apply with force: %w",
					dev, r.Kind, r.Handle, dev, ErrForeignQdisc)
			}
			t.lostForeign = append(t.lostForeign, fmt.Sprintf("root qdisc %s %s", r.Kind, r.Handle))
		}
	}
	if t.p.Ingress != nil {
		if r := cur.ingress(); r != nil && !t.owns(cur, false) {
			if !opts.Force {
				return fmt.Errorf("apply %s: %s qdisc %s was not installed by sqm; remove it (tc qdisc del dev %s %s) or apply with force: %w",
					dev, r.Kind, r.Handle, dev, r.Kind, ErrForeignQdisc)
			}
			t.lostForeign = append(t.lostForeign, fmt.Sprintf("%s qdisc", r.Kind))
		}
		if name := t.p.Ingress.IFB; name != "" {
			l, err := t.c.linkByName(name)
			switch {
			case errors.Is(err, ErrNoLink):
			case err != nil:
				return fmt.Errorf("apply %s: %w", dev, err)
			case l.Kind != "" && l.Kind != "ifb":
				return fmt.Errorf("apply %s: device %s exists and is a %s, not an ifb; rename it or choose another interface", dev, name, l.Kind)
			default:
				t.ifbExisted, t.ifbIndex = true, l.Index
				if (t.prev == nil || t.prev.IFB != name) && !opts.Force {
					return fmt.Errorf("apply %s: ifb %s exists but sqm did not create it (another sqm instance?); delete it (ip link del %s) or apply with force: %w",
						dev, name, name, ErrForeignQdisc)
				}
			}
		}
	}
	return nil
}

// resolve maps a device named in the plan (the IFB, as a mirred target)
// to its ifindex. The IFB this transaction created or checked is already
// known; asking the kernel again would cost a round trip per use.
func (t *txn) resolve(dev string) (int, error) {
	if t.ifbIndex != 0 && t.p.Ingress != nil && dev == t.p.Ingress.IFB {
		return t.ifbIndex, nil
	}
	l, err := t.c.linkByName(dev)
	if err != nil {
		return 0, err
	}
	return l.Index, nil
}

// run performs the apply in sqm-scripts' order: IFB, egress tree, IFB
// tree, ingress qdisc, IFB up, hook filters last (so no packet is
// redirected to an IFB without its shaper).
func (t *txn) run(cur *tree) error {
	c, p, idx := t.c, t.p, t.iface.Index
	if p.Ingress != nil && p.Ingress.IFB != "" && !t.ifbExisted {
		l, err := c.createIFB(p.Ingress.IFB)
		if err != nil {
			return err
		}
		t.ifbCreated, t.ifbIndex = true, l.Index
		t.step("ifb")
	}
	if p.Egress != nil {
		ops, err := treeOps(p.Egress, c.tick, t.resolve)
		if err != nil {
			return fmt.Errorf("egress: %w", err)
		}
		t.egressDone = true
		if r := cur.root(); r != nil && r.Handle.Major() != 0 {
			if err := c.delQdisc(idx, r.Handle, plan.HandleRoot); err != nil {
				return explain("egress: remove previous root", err, "")
			}
		}
		if err := c.runOps(ops, map[string]int{p.Egress.Device: idx}); err != nil {
			return fmt.Errorf("egress: %w", err)
		}
		t.step("egress")
	}
	if in := p.Ingress; in != nil {
		if in.Shaper != nil {
			ops, err := treeOps(in.Shaper, c.tick, t.resolve)
			if err != nil {
				return fmt.Errorf("ingress shaper: %w", err)
			}
			t.ifbRootDone = true
			if t.ifbExisted {
				if it, err := c.readTree(t.ifbIndex); err == nil {
					if r := it.root(); r != nil && r.Handle.Major() != 0 {
						if err := c.delQdisc(t.ifbIndex, r.Handle, plan.HandleRoot); err != nil {
							return explain("ingress: remove previous ifb root", err, "")
						}
					}
				}
			}
			if err := c.runOps(ops, map[string]int{in.Shaper.Device: t.ifbIndex}); err != nil {
				return fmt.Errorf("ingress shaper on %s: %w", in.Shaper.Device, err)
			}
			t.step("ifb-tree")
		}
		t.ingressDone = true
		if r := cur.ingress(); r != nil {
			if err := c.delQdisc(idx, r.Handle, plan.HandleIngress); err != nil {
				return explain("ingress: remove previous ingress qdisc", err, "")
			}
		}
		ing := op{kind: opQdisc, dev: p.Interface, handle: ingressHandle, parent: plan.HandleIngress,
			tcKind: "ingress", hint: qdiscHint("ingress")}
		if err := c.runOps([]op{ing}, map[string]int{p.Interface: idx}); err != nil {
			return fmt.Errorf("ingress: %w", err)
		}
		if t.ifbIndex != 0 {
			if err := c.setUp(t.ifbIndex); err != nil {
				return err
			}
		}
		hook := make([]op, 0, len(in.Hook))
		for i := range in.Hook {
			o, err := filterOp(p.Interface, &in.Hook[i], c.tick, t.resolve)
			if err != nil {
				return fmt.Errorf("ingress hook filter %d: %w", i, err)
			}
			o.l2len = l2Len(t.iface)
			hook = append(hook, o)
		}
		if err := c.runOps(hook, map[string]int{p.Interface: idx}); err != nil {
			return fmt.Errorf("ingress hook: %w", err)
		}
	}
	// What sqm had before and the new plan no longer wants.
	if pr := t.prev; pr != nil {
		if p.Egress == nil && pr.EgressRoot {
			if r := cur.root(); r != nil && ownsRoot(cur, pr) {
				if err := c.delQdisc(idx, r.Handle, plan.HandleRoot); err != nil && !gone(err) {
					return explain("remove previous egress root", err, "")
				}
			}
		}
		if p.Ingress == nil && pr.Ingress {
			if r := cur.ingress(); r != nil && c.ownsIngress(cur, pr) {
				if err := c.delQdisc(idx, r.Handle, plan.HandleIngress); err != nil && !gone(err) {
					return explain("remove previous ingress qdisc", err, "")
				}
			}
		}
		if pr.IFB != "" && (p.Ingress == nil || p.Ingress.IFB != pr.IFB) {
			if err := c.deleteLink(pr.IFB, "ifb"); err != nil {
				return err
			}
		}
	}
	return nil
}

func (t *txn) step(name string) {
	if t.c.afterStep != nil {
		t.c.afterStep(name)
	}
}

// gone reports whether a delete failed because the object is already gone.
func gone(err error) bool {
	return errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENODEV) || errors.Is(err, unix.EINVAL) || errors.Is(err, ErrNoLink)
}

// runOps sends the requests in order; ifindex maps each op's device.
func (c *Conn) runOps(ops []op, ifindex map[string]int) error {
	for i := range ops {
		o := &ops[i]
		idx, ok := ifindex[o.dev]
		if !ok || idx == 0 {
			return fmt.Errorf("internal error: no ifindex for device %q", o.dev)
		}
		var err error
		if o.bpf != nil {
			prog, lerr := loadBPF(o, o.l2len)
			if lerr != nil {
				c.traceOp(o.dev, idx, o.what(), lerr)
				return fmt.Errorf("%s: %w", o.what(), lerr)
			}
			err = c.rawAdd(o, idx)
			prog.Close()
		} else {
			err = c.rawAdd(o, idx)
		}
		c.traceOp(o.dev, idx, o.what(), err)
		if err != nil {
			hint := o.hint
			if o.kind == opFilter {
				hint = filterHint(o.tcKind, o.acts)
			}
			return explain(o.what(), err, hint)
		}
	}
	return nil
}

func (o *op) what() string {
	switch o.kind {
	case opClass:
		return fmt.Sprintf("add class %s %s (parent %s) on %s", o.tcKind, o.handle, o.parent, o.dev)
	case opFilter:
		return fmt.Sprintf("add filter %s (parent %s, %s) on %s", o.tcKind, o.parent, o.fd.String(), o.dev)
	}
	return fmt.Sprintf("add qdisc %s %s (parent %s) on %s", o.tcKind, o.handle, o.parent, o.dev)
}

// rollback undoes what run did and rebuilds sqm's previous tree.
func (t *txn) rollback() error {
	c, idx := t.c, t.iface.Index
	var errs []error
	del := func(ifindex int, h, parent plan.Handle) {
		if err := c.delQdisc(ifindex, h, parent); err != nil && !gone(err) {
			errs = append(errs, err)
		}
	}
	if t.ingressDone {
		del(idx, ingressHandle, plan.HandleIngress)
	}
	if t.egressDone {
		del(idx, 0, plan.HandleRoot)
	}
	if t.ifbCreated {
		if err := c.deleteLink(t.p.Ingress.IFB, "ifb"); err != nil {
			errs = append(errs, err)
		}
	} else if t.ifbRootDone && t.ifbIndex != 0 {
		del(t.ifbIndex, 0, plan.HandleRoot)
	}
	// The rebuild below may re-create the IFB under a new index: resolve
	// must ask the kernel again.
	t.ifbIndex = 0
	if len(t.lostForeign) > 0 {
		errs = append(errs, fmt.Errorf("forced over %s, which cannot be restored", strings.Join(t.lostForeign, ", ")))
	}
	pr := t.prev
	if pr == nil {
		return errors.Join(errs...)
	}
	if pr.Plan == nil {
		if (t.egressDone && pr.EgressRoot) || (t.ingressDone && pr.Ingress) {
			errs = append(errs, errors.New("the previous sqm tree cannot be rebuilt (state file has no plan); run sqm apply again"))
		}
		return errors.Join(errs...)
	}
	old := pr.Plan
	if t.egressDone && pr.EgressRoot && old.Egress != nil {
		if err := t.rebuildTree(old.Egress, idx); err != nil {
			errs = append(errs, fmt.Errorf("restore previous egress tree: %w", err))
		}
	}
	if (t.ingressDone || t.ifbRootDone) && pr.Ingress && old.Ingress != nil {
		if err := t.rebuildIngress(old); err != nil {
			errs = append(errs, fmt.Errorf("restore previous ingress: %w", err))
		}
	}
	return errors.Join(errs...)
}

func (t *txn) rebuildTree(tr *plan.Tree, ifindex int) error {
	ops, err := treeOps(tr, t.c.tick, t.resolve)
	if err != nil {
		return err
	}
	if err := t.c.delQdisc(ifindex, 0, plan.HandleRoot); err != nil && !gone(err) {
		return err
	}
	return t.c.runOps(ops, map[string]int{tr.Device: ifindex})
}

func (t *txn) rebuildIngress(old *plan.Plan) error {
	c, idx := t.c, t.iface.Index
	in := old.Ingress
	ifbIdx := 0
	if in.IFB != "" {
		l, err := c.linkByName(in.IFB)
		if errors.Is(err, ErrNoLink) {
			l, err = c.createIFB(in.IFB)
		}
		if err != nil {
			return err
		}
		ifbIdx = l.Index
	}
	if in.Shaper != nil {
		if err := t.rebuildTree(in.Shaper, ifbIdx); err != nil {
			return err
		}
	}
	if err := c.delQdisc(idx, ingressHandle, plan.HandleIngress); err != nil && !gone(err) {
		return err
	}
	ing := op{kind: opQdisc, dev: old.Interface, handle: ingressHandle, parent: plan.HandleIngress, tcKind: "ingress"}
	if err := c.runOps([]op{ing}, map[string]int{old.Interface: idx}); err != nil {
		return err
	}
	if ifbIdx != 0 {
		if err := c.setUp(ifbIdx); err != nil {
			return err
		}
	}
	for i := range in.Hook {
		o, err := filterOp(old.Interface, &in.Hook[i], c.tick, t.resolve)
		if err != nil {
			return err
		}
		o.l2len = l2Len(t.iface)
		if err := c.runOps([]op{o}, map[string]int{old.Interface: idx}); err != nil {
			return err
		}
	}
	return nil
}

// Remove deletes exactly what o lists, tolerating objects already gone,
// and leaves anything else alone.
func (c *Conn) Remove(o *Owned) error {
	if o == nil {
		return nil
	}
	var errs []error
	l, err := c.linkByName(o.Interface)
	switch {
	case errors.Is(err, ErrNoLink):
		// The interface and its qdiscs are gone.
	case err != nil:
		errs = append(errs, err)
	case o.Ifindex != 0 && l.Index != o.Ifindex:
		// Recreated since: sqm's qdiscs went with the old device.
	default:
		cur, err := c.readTree(l.Index)
		if err != nil {
			errs = append(errs, err)
			break
		}
		// Only what is still the tree sqm recorded: with a stale state
		// the device may hold someone else's tree under the same handle.
		if r := cur.root(); r != nil && ownsRoot(cur, o) {
			if err := c.delQdisc(l.Index, r.Handle, plan.HandleRoot); err != nil && !gone(err) {
				errs = append(errs, explain("remove egress root", err, ""))
			}
		}
		if r := cur.ingress(); r != nil && c.ownsIngress(cur, o) {
			if err := c.delQdisc(l.Index, r.Handle, plan.HandleIngress); err != nil && !gone(err) {
				errs = append(errs, explain("remove ingress qdisc", err, ""))
			}
		}
	}
	if o.IFB != "" {
		il, err := c.linkByName(o.IFB)
		switch {
		case errors.Is(err, ErrNoLink):
		case err != nil:
			errs = append(errs, err)
		case o.IFBIndex != 0 && il.Index != o.IFBIndex:
			// Someone else's IFB under the same name now.
		default:
			if err := c.deleteLink(o.IFB, "ifb"); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("remove sqm from %s: %w", o.Interface, err)
	}
	return nil
}
