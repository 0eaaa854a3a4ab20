package kernel

import (
	"encoding/binary"
	"errors"
	"fmt"

	"golang.org/x/sys/unix"

	"sqm/internal/netlink"
	"sqm/internal/nlattr"
	"sqm/internal/plan"
)

// ShaperCounters is what the autorate loop reads of one direction's tree
// several times a second: the root qdisc's cumulative counters (what the
// shaper sent, queues and dropped: htb and tbf add their leaves' backlog
// and drops to their own), the ECN marks of every qdisc on the device
// (they live in the leaves' xstats: fq_codel, cake), and cake's largest
// per-tin average delay when the root is cake.
type ShaperCounters struct {
	Bytes        uint64
	Backlog      uint32 // bytes queued
	Drops, Marks uint64
	CakeDelayUS  uint32 // 0: not cake, or an empty cake
	Cake         bool
	// RateBits is the root's configured rate (cake's bandwidth, tbf's
	// rate), bits/s; 0 for htb, whose rates are its classes'. cake's
	// capacity estimate in its statistics is not it: cake sets that at
	// creation and a rate change in place leaves it.
	RateBits uint64
}

// LinkIndex returns the device's ifindex; the error wraps ErrNoLink if it
// is missing.
func (c *Conn) LinkIndex(iface string) (int, error) {
	l, err := c.linkByName(iface)
	if err != nil {
		return 0, err
	}
	return l.Index, nil
}

// ShaperCounters reads the counters of the trees on ifindex[0] and
// ifindex[1] (0: none) into sc, from one dump of the qdiscs: the kernel
// dumps every device's qdiscs whatever the request names, so two devices
// cost what one does. Status also dumps every class and filter (cake's
// flows among the classes), which a loop reading each probe interval
// cannot afford on a router.
func (c *Conn) ShaperCounters(ifindex [2]int, sc *[2]ShaperCounters) error {
	req := tcmsg(0, 0, 0, 0)
	msgs, err := c.raw.Execute(netlink.Message{Header: netlink.Header{Type: uint16(dumpQdiscs), Flags: netlink.Dump}, Data: req})
	for i := 1; i < dumpTries && errors.Is(err, netlink.ErrDumpInterrupted); i++ {
		msgs, err = c.raw.Execute(netlink.Message{Header: netlink.Header{Type: uint16(dumpQdiscs), Flags: netlink.Dump}, Data: req})
	}
	if err != nil {
		return explain("dump qdiscs", err, "")
	}
	*sc = [2]ShaperCounters{}
	var root [2]bool
	for _, m := range msgs {
		// Only the two devices' qdiscs are decoded: a router's dump
		// holds every interface's (each radio's mq and fq_codels).
		if len(m.Data) >= tcmsgLen {
			if idx := int(int32(binary.NativeEndian.Uint32(m.Data[4:]))); idx != ifindex[0] && idx != ifindex[1] {
				continue
			}
		}
		q, err := decodeObject(m.Data)
		if err != nil {
			return fmt.Errorf("shaper counters: %w", err)
		}
		for i := range ifindex {
			if ifindex[i] != 0 && q.Ifindex == ifindex[i] {
				root[i] = sc[i].add(&q) || root[i]
			}
		}
	}
	for i := range ifindex {
		if ifindex[i] != 0 && !root[i] {
			return fmt.Errorf("shaper counters of ifindex %d: no root qdisc: %w", ifindex[i], ErrNoLink)
		}
	}
	return nil
}

// ShaperRootCounters is ShaperCounters for trees of one qdisc (cake's
// recipes), read with one GET of each device's root: a dump carries
// every device's qdiscs, twice over (the second pass finds the end), and
// a router's radios have an mq and four fq_codels each. kind[i] is the
// root's kind in the plan: a root of another kind (the tree removed
// under the loop: the device's default qdisc) wraps ErrNoLink.
func (c *Conn) ShaperRootCounters(ifindex [2]int, kind [2]string, sc *[2]ShaperCounters) error {
	*sc = [2]ShaperCounters{}
	for i, idx := range ifindex {
		if idx == 0 {
			continue
		}
		req := tcmsg(idx, 0, plan.HandleRoot, 0)
		// Echo: kernels before 6.9 send a GET's answer as a
		// notification, to the asker only when it asks for an echo.
		msgs, err := c.raw.Execute(netlink.Message{Header: netlink.Header{Type: unix.RTM_GETQDISC, Flags: unix.NLM_F_ECHO}, Data: req})
		if err != nil {
			if errors.Is(err, unix.ENODEV) {
				return fmt.Errorf("shaper counters of ifindex %d: %w", idx, errors.Join(ErrNoLink, err))
			}
			return explain(fmt.Sprintf("get the root qdisc of ifindex %d", idx), err, "")
		}
		if len(msgs) != 1 {
			return fmt.Errorf("shaper counters of ifindex %d: %d replies to a GET of the root qdisc, want 1", idx, len(msgs))
		}
		q, err := decodeObject(msgs[0].Data)
		if err != nil {
			return fmt.Errorf("shaper counters: %w", err)
		}
		if q.Ifindex != idx || q.Kind != kind[i] || !sc[i].add(&q) {
			return fmt.Errorf("shaper counters of ifindex %d: the root is %s on ifindex %d, want %s: %w", idx, q.Kind, q.Ifindex, kind[i], ErrNoLink)
		}
	}
	return nil
}

// add counts one qdisc of the device; it reports whether it was the root.
func (sc *ShaperCounters) add(q *object) bool {
	switch q.Kind {
	case "fq_codel":
		if x := decodeFqCodelXStats(q.XStats); x != nil {
			sc.Marks += uint64(x.ECNMark)
		}
	case "cake":
		marks, delay := cakeTinSums(q.XStats)
		sc.Marks += marks
		if q.Parent == plan.HandleRoot && delay > sc.CakeDelayUS {
			sc.CakeDelayUS = delay
		}
	}
	if q.Parent != plan.HandleRoot {
		return false
	}
	sc.Bytes, sc.Backlog, sc.Drops = q.Stats.Bytes, q.Stats.BacklogBytes, uint64(q.Stats.Drops)
	sc.Cake = q.Kind == "cake"
	sc.RateBits = rootRate(q)
	return true
}

// rootRate reads cake's TCA_CAKE_BASE_RATE64 (bytes/s) or tbf's rate
// (TCA_TBF_RATE64, else the tc_ratespec in TCA_TBF_PARMS) in bits/s.
func rootRate(q *object) uint64 {
	ad := nlattr.NewDecoder(q.Options)
	var rate uint64
	for ad.Next() {
		switch {
		case q.Kind == "cake" && ad.Type() == tcaCakeBaseRate64:
			return 8 * scalar(ad.Bytes())
		case q.Kind == "tbf" && ad.Type() == 4: // TCA_TBF_RATE64
			return 8 * scalar(ad.Bytes())
		case q.Kind == "tbf" && ad.Type() == 1: // TCA_TBF_PARMS
			if b := ad.Bytes(); len(b) >= 12 {
				rate = 8 * uint64(u32At(b, 8))
			}
		}
	}
	return rate
}

// cakeTinSums is what the counters need of cake's xstats: the ECN marks
// of all tins and the largest tin's average delay (µs). It walks the
// attributes in place, where decodeCakeXStats builds every tin's every
// field through maps: this runs on each autorate tick.
func cakeTinSums(x []byte) (marks uint64, maxDelayUS uint32) {
	ad := nlattr.NewDecoder(x)
	for ad.Next() {
		if ad.Type() != cakeStatsTinStats {
			continue
		}
		tins := nlattr.NewDecoder(ad.Bytes())
		for tins.Next() {
			tin := nlattr.NewDecoder(tins.Bytes())
			for tin.Next() {
				switch tin.Type() {
				case cakeTinECNMarkedPackets:
					marks += uint64(uint32(scalar(tin.Bytes())))
				case cakeTinAvgDelayUS:
					maxDelayUS = max(maxDelayUS, uint32(scalar(tin.Bytes())))
				}
			}
		}
	}
	return marks, maxDelayUS
}

// ShaperRate reads the rate dev's shaper runs at now, in bits/s: the
// root's own for cake and tbf, the top class's for htb (0: no shaper at
// the root). An autorate loop changes it in place, so `sqm status`
// compares the rest of an autorated tree at this rate
// (service.AutorateDrift) instead of at a rate the daemon would have to
// write to a file at every change.
func (c *Conn) ShaperRate(dev string) (uint64, error) {
	l, err := c.linkByName(dev)
	if err != nil {
		return 0, fmt.Errorf("shaper rate %s: %w", dev, err)
	}
	qs, err := c.dump(dumpQdiscs, l.Index, 0)
	if err != nil {
		return 0, fmt.Errorf("shaper rate %s: %w", dev, err)
	}
	t := tree{qdiscs: qs}
	root := t.root()
	switch {
	case root == nil:
		return 0, nil
	case root.Kind != "htb":
		return rootRate(root), nil
	}
	cls, err := c.dump(dumpClasses, l.Index, 0)
	if err != nil {
		return 0, fmt.Errorf("shaper rate %s: %w", dev, err)
	}
	for i := range cls {
		// The kernel reports a top class's parent as the root.
		if cl := &cls[i]; cl.Kind == "htb" && cl.Parent == plan.HandleRoot && cl.Handle.Major() == root.Handle.Major() {
			r, _, _, _ := htbRates(cl)
			return 8 * r, nil
		}
	}
	return 0, nil
}
