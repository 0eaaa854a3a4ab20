package autorun

import (
	"fmt"
	"sync"
	"time"

	"sqm/internal/autorate"
	"sqm/internal/config"
	"sqm/internal/kernel"
	"sqm/internal/plan"
)

// Kernel is the running tree of one queue as the loop changes it: both
// directions' shapers on one netlink connection, which it owns (a
// kernel.Conn is not safe for concurrent use: the daemon's own stays the
// daemon's). It knows the tree that runs now (the plan at the rates set
// so far), which Hold hands to the daemon's drift check.
type Kernel struct {
	mu   sync.Mutex
	conn *kernel.Conn
	base *plan.Plan
	dirs [2]*kernelShaper
	// One qdisc dump serves both directions' Read in a tick: the first
	// Read dumps and marks the other's counters fresh, the other uses
	// them.
	sc    [2]kernel.ShaperCounters
	fresh [2]bool
	// rootKind: every shaped tree is its root qdisc alone (cake's
	// recipes), of these kinds: a GET of each root replaces the dump.
	rootKind [2]string
	rootOnly bool
}

type kernelShaper struct {
	k       *Kernel
	q       *config.Queue
	env     plan.Env
	ingress bool
	dir     autorate.Dir
	ifindex int
	cur     *plan.Tree
}

// NewKernel takes over conn for the queue q whose plan p runs (built at
// mtu): the egress tree on p.Interface is the upload shaper, the IFB's
// the download one. Directions without a tree, or without autorate
// (p.Autorate's range nil), get no shaper.
func NewKernel(conn *kernel.Conn, q *config.Queue, p *plan.Plan, mtu int) (*Kernel, error) {
	k := &Kernel{conn: conn, base: p}
	if p.Autorate == nil {
		return nil, fmt.Errorf("autorun: queue %s has autorate off", q.Name)
	}
	for d, dir := range []struct {
		tree *plan.Tree
		on   bool
	}{
		{ingressTree(p), p.Autorate.Download != nil},
		{p.Egress, p.Autorate.Upload != nil},
	} {
		if dir.tree == nil || !dir.on {
			continue
		}
		idx, err := conn.LinkIndex(dir.tree.Device)
		if err != nil {
			return nil, fmt.Errorf("autorun: %w", err)
		}
		k.dirs[d] = &kernelShaper{k: k, q: q, env: plan.Env{MTU: mtu}, ingress: d == int(autorate.Down), dir: autorate.Dir(d), ifindex: idx, cur: dir.tree}
	}
	if k.dirs[0] == nil && k.dirs[1] == nil {
		return nil, fmt.Errorf("autorun: queue %s shapes no direction autorate may change", q.Name)
	}
	k.rootOnly = true
	for d, ks := range k.dirs {
		if ks == nil {
			continue
		}
		if len(ks.cur.Qdiscs) != 1 {
			k.rootOnly = false
			break
		}
		k.rootKind[d] = ks.cur.Qdiscs[0].Kind
	}
	return k, nil
}

func ingressTree(p *plan.Plan) *plan.Tree {
	if p.Ingress == nil {
		return nil
	}
	return p.Ingress.Shaper
}

// Shapers are the loop's shapers (nil where a direction is not shaped).
func (k *Kernel) Shapers() [2]Shaper {
	var s [2]Shaper
	for d, ks := range k.dirs {
		if ks != nil {
			s[d] = ks
		}
	}
	return s
}

// Hold runs f with the plan as it runs now (the base plan with each
// direction's tree at the rate last set), while no rate changes: the
// daemon's drift check compares the kernel with it, so autorate's changes
// are not drift, and a change cannot come between its read and the
// comparison.
func (k *Kernel) Hold(f func(running *plan.Plan) error) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	p := *k.base
	if ks := k.dirs[autorate.Up]; ks != nil {
		p.Egress = ks.cur
	}
	if ks := k.dirs[autorate.Down]; ks != nil {
		in := *p.Ingress
		in.Shaper = ks.cur
		p.Ingress = &in
	}
	return f(&p)
}

// Rates returns the rates (kbit/s) set now per direction; 0 for one
// without a shaper.
func (k *Kernel) Rates() [2]uint64 {
	k.mu.Lock()
	defer k.mu.Unlock()
	var r [2]uint64
	for d, ks := range k.dirs {
		if ks != nil {
			r[d] = ks.cur.RateKbit
		}
	}
	return r
}

// Close closes the netlink connection.
func (k *Kernel) Close() error { return k.conn.Close() }

func (s *kernelShaper) Read(sh *autorate.Shaper) error {
	k := s.k
	k.mu.Lock()
	defer k.mu.Unlock()
	if !k.fresh[s.dir] {
		var idx [2]int
		for d, ks := range k.dirs {
			if ks != nil {
				idx[d] = ks.ifindex
			}
		}
		var err error
		if k.rootOnly {
			err = k.conn.ShaperRootCounters(idx, k.rootKind, &k.sc)
		} else {
			err = k.conn.ShaperCounters(idx, &k.sc)
		}
		if err != nil {
			return err
		}
		for d, ks := range k.dirs {
			k.fresh[d] = ks != nil
		}
	}
	k.fresh[s.dir] = false
	sc := &k.sc[s.dir]
	*sh = autorate.Shaper{Bytes: sc.Bytes, HaveQueue: true, Backlog: sc.Backlog, Drops: sc.Drops, Marks: sc.Marks,
		Delay: time.Duration(sc.CakeDelayUS) * time.Microsecond}
	return nil
}

// SetRate sets the tree plan.Rerate builds at bits/s (to the kbit/s) in
// place. A failure leaves what the kernel holds uncertain (SetRate may
// have changed some classes), so the tree is rebuilt at the rate before.
func (s *kernelShaper) SetRate(bits uint64) (uint64, error) {
	kbit := (bits + 500) / 1000
	s.k.mu.Lock()
	defer s.k.mu.Unlock()
	if kbit == s.cur.RateKbit {
		return kbit * 1000, nil
	}
	next, err := plan.Rerate(s.q, s.env, s.ingress, kbit)
	if err != nil {
		return s.cur.RateKbit * 1000, err
	}
	if err := s.k.conn.SetRate(s.ifindex, s.cur, next); err != nil {
		// Put the classes already changed back: the same change the
		// other way round, from a tree that is now partly next.
		if rerr := s.k.conn.SetRate(s.ifindex, next, s.cur); rerr != nil {
			err = fmt.Errorf("%w; and putting the rate back: %v", err, rerr)
		}
		return s.cur.RateKbit * 1000, err
	}
	s.cur = next
	return kbit * 1000, nil
}
