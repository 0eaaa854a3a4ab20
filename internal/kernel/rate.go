package kernel

import (
	"encoding/binary"
	"errors"
	"fmt"

	"golang.org/x/sys/unix"

	"sqm/internal/netlink"
	"sqm/internal/plan"
)

// ErrNotRateChange: SetRate was given a tree that differs from the running
// one in more than its rates (another recipe, other handles): a rate
// change cannot make it, Apply must.
var ErrNotRateChange = errors.New("not a rate change of the running tree")

// SetRate changes the shaping rate of the tree running on ifindex (the
// interface for egress, the IFB for ingress) from cur, the tree it holds,
// to next, the same direction's plan.Rerate at the new rate. It is the
// autorate controller's actuator, called several times a second on a
// router, so it sends only what changed, in place, and touches no queue:
//
//   - cake: RTM_NEWQDISC without NLM_F_CREATE/EXCL on the root's handle,
//     TCA_OPTIONS holding TCA_CAKE_BASE_RATE64 alone. cake_change leaves
//     every option the message does not carry as it was and re-derives
//     its tin rates without dropping a packet. The size table, if the
//     plan has one, is sent again: qdisc_change replaces the qdisc's stab
//     with the message's, so a change without TCA_STAB would drop it.
//   - tbf (simplest_tbf): RTM_NEWQDISC as above with the whole
//     tc_tbf_qopt (tbf_change takes nothing less). tbf_change also sets a
//     fifo child's limit to tbf's byte limit (fifo_set_limit), so a
//     pfifo or bfifo leaf gets its own options sent again (fifo's change
//     sets the limit and flushes nothing); other leaves stay untouched.
//   - htb recipes: RTM_NEWTCLASS without NLM_F_CREATE/EXCL for each class
//     whose rate, ceil, burst or quantum differ, with the whole
//     tc_htb_opt as classOp encodes it (htb_change_class takes the
//     parameters whole); the root qdisc and the leaves are not touched.
//
// The ingress policers (police, codel_police) have no tree on an IFB and
// plan.Rerate refuses them, so they never reach here.
//
// A failure leaves the classes already changed at the new rate and the
// rest at the old one; the caller keeps cur as what it believes runs
// only when SetRate returns nil, and on an error re-applies (Apply) to
// get one consistent tree.
func (c *Conn) SetRate(ifindex int, cur, next *plan.Tree) error {
	if err := rateShape(cur, next); err != nil {
		return err
	}
	for i := range next.Qdiscs {
		o, n := &cur.Qdiscs[i], &next.Qdiscs[i]
		switch {
		case n.Kind == "cake" && n.Cake != nil && o.Cake != nil && n.Cake.BandwidthBits != o.Cake.BandwidthBits:
			if err := c.setCakeRate(ifindex, n); err != nil {
				return fmt.Errorf("set rate of cake %s on %s: %w", n.Handle, next.Device, err)
			}
		case n.Kind == "tbf" && n.TBF != nil && o.TBF != nil && (n.TBF.RateBits != o.TBF.RateBits || n.TBF.Burst != o.TBF.Burst):
			if err := c.setTBFRate(ifindex, next.Device, n); err != nil {
				return fmt.Errorf("set rate of tbf %s on %s: %w", n.Handle, next.Device, err)
			}
			// tbf_change hands its own byte limit to a fifo child
			// (fifo_set_limit), whatever kind of fifo: give the leaf
			// its limit back.
			for j := range next.Qdiscs {
				if l := &next.Qdiscs[j]; l.Parent == n.Handle && (l.Kind == "pfifo" || l.Kind == "bfifo") {
					if err := c.resendQdisc(ifindex, next.Device, l); err != nil {
						return fmt.Errorf("restore the limit of %s %s on %s after the tbf change: %w", l.Kind, l.Handle, next.Device, err)
					}
				}
			}
		}
	}
	for i := range next.Classes {
		o, n := cur.Classes[i].HTB, next.Classes[i].HTB
		if o != nil && n != nil && o.RateBits == n.RateBits && o.CeilBits == n.CeilBits &&
			o.Burst == n.Burst && o.CBurst == n.CBurst && o.Quantum == n.Quantum && o.Prio == n.Prio {
			continue
		}
		if err := c.setClassRate(ifindex, &next.Classes[i]); err != nil {
			return fmt.Errorf("set rate of class %s on %s: %w", next.Classes[i].ClassID, next.Device, err)
		}
	}
	return nil
}

// rateShape checks that next is cur with other rates: the same device,
// qdiscs (handle, parent, kind) and classes (id, parent), in the same
// order. (One message for every mismatch: this code is in the router
// build, and what differs is in the two plans.)
func rateShape(cur, next *plan.Tree) error {
	same := cur != nil && next != nil && cur.Device == next.Device &&
		len(cur.Qdiscs) == len(next.Qdiscs) && len(cur.Classes) == len(next.Classes)
	for i := 0; same && i < len(cur.Qdiscs); i++ {
		o, n := &cur.Qdiscs[i], &next.Qdiscs[i]
		same = o.Handle == n.Handle && o.Parent == n.Parent && o.Kind == n.Kind
	}
	for i := 0; same && i < len(cur.Classes); i++ {
		o, n := &cur.Classes[i], &next.Classes[i]
		same = o.ClassID == n.ClassID && o.Parent == n.Parent && n.HTB != nil
	}
	if !same {
		return fmt.Errorf("set rate: the new tree has other qdiscs or classes than the running one: %w", ErrNotRateChange)
	}
	return nil
}

// Attribute types of a rate change (linux/pkt_sched.h).
const (
	tcaCakeBaseRate64 = 2
)

// change sends one RTM_NEW* request built in c.rbuf, without
// NLM_F_CREATE or NLM_F_EXCL: the kernel changes the object with that
// handle and fails (ENOENT) if there is none.
func (c *Conn) change(typ uint16, b []byte) error {
	c.rbuf = b // keep the grown buffer for the next change
	_, err := c.raw.Execute(netlink.Message{
		Header: netlink.Header{Type: typ, Flags: netlink.Request | netlink.Acknowledge},
		Data:   b,
	})
	return err
}

// setCakeRate sends cake's bandwidth alone (and the stab, if any).
func (c *Conn) setCakeRate(ifindex int, q *plan.Qdisc) error {
	b := appendCakeRate(c.rbuf[:0], ifindex, q)
	if q.Stab != nil {
		raw, err := c.stab(q.Stab)
		if err != nil {
			return err
		}
		b = appendAttr(b, tcaStab, raw)
	}
	err := c.change(unix.RTM_NEWQDISC, b)
	if c.traceFn != nil {
		c.traceOp("", ifindex, fmt.Sprintf("change qdisc cake %s: bandwidth %d bit/s", q.Handle, q.Cake.BandwidthBits), err)
	}
	return err
}

// appendCakeRate appends the request payload of a cake bandwidth change:
// tcmsg, TCA_OPTIONS holding TCA_CAKE_BASE_RATE64 (bytes/s) alone, then
// TCA_KIND, in the order creation sends them.
func appendCakeRate(b []byte, ifindex int, q *plan.Qdisc) []byte {
	b = appendTcmsg(b, ifindex, q.Handle, q.Parent, 0)
	opts := len(b)
	b = appendAttrHeader(b, tcaOptions)
	b = appendAttrHeader(b, tcaCakeBaseRate64)
	b = binary.NativeEndian.AppendUint64(b, q.Cake.BandwidthBits/8)
	endAttr(b, opts+4)
	endAttr(b, opts)
	return appendAttrString(b, tcaKind, "cake")
}

// setTBFRate resends tbf's parameters whole, encoded as for creation.
// simplest_tbf is rare enough that it keeps qdiscOp's allocations.
func (c *Conn) setTBFRate(ifindex int, dev string, q *plan.Qdisc) error {
	return c.resendQdisc(ifindex, dev, q)
}

// resendQdisc sends q's creation request as a change (no NLM_F_CREATE or
// NLM_F_EXCL): the kernel sets its parameters in place.
func (c *Conn) resendQdisc(ifindex int, dev string, q *plan.Qdisc) error {
	o, err := qdiscOp(dev, q, c.tick)
	if err != nil {
		return err
	}
	m := o.request(ifindex)
	m.Header.Flags = netlink.Request | netlink.Acknowledge
	_, err = c.raw.Execute(m)
	if c.traceFn != nil {
		c.traceOp(dev, ifindex, fmt.Sprintf("change qdisc %s %s", q.Kind, q.Handle), err)
	}
	return err
}

// setClassRate resends one htb class's parameters, encoded by htbParms as
// classOp encodes them.
func (c *Conn) setClassRate(ifindex int, cl *plan.Class) error {
	b, err := appendClassRate(c.rbuf[:0], ifindex, cl, c.tick)
	if err != nil {
		return err
	}
	err = c.change(unix.RTM_NEWTCLASS, b)
	if c.traceFn != nil {
		c.traceOp("", ifindex, fmt.Sprintf("change class htb %s: rate %d ceil %d bit/s", cl.ClassID, cl.HTB.RateBits, cl.HTB.CeilBits), err)
	}
	return err
}

// appendClassRate appends the payload of an htb class change: the one
// classOp's request carries to create the class.
func appendClassRate(b []byte, ifindex int, cl *plan.Class, tick float64) ([]byte, error) {
	var p [htbOptLen]byte
	rate, ceil, err := htbParms(p[:], cl.HTB, tick, nil)
	if err != nil {
		return b, err
	}
	b = appendTcmsg(b, ifindex, cl.ClassID, cl.Parent, 0)
	opts := len(b)
	b = appendAttrHeader(b, tcaOptions)
	b = appendAttr(b, tcaHtbParms, p[:])
	if rate >= 1<<32 {
		b = appendAttrHeader(b, tcaHtbRate64)
		b = binary.NativeEndian.AppendUint64(b, rate)
		endAttr(b, len(b)-12)
	}
	if ceil >= 1<<32 {
		b = appendAttrHeader(b, tcaHtbCeil64)
		b = binary.NativeEndian.AppendUint64(b, ceil)
		endAttr(b, len(b)-12)
	}
	endAttr(b, opts)
	return appendAttrString(b, tcaKind, "htb"), nil
}

// stab is the TCA_STAB payload of s, computed once per distinct table
// (a rate change resends it unchanged).
func (c *Conn) stab(s *plan.Stab) ([]byte, error) {
	if c.stabRaw != nil && c.stabKey == *s {
		return c.stabRaw, nil
	}
	_, raw, err := stabFor(s)
	if err != nil {
		return nil, err
	}
	c.stabKey, c.stabRaw = *s, raw
	return raw, nil
}

// appendTcmsg appends struct tcmsg (see tcmsg).
func appendTcmsg(b []byte, ifindex int, handle, parent plan.Handle, info uint32) []byte {
	b = append(b, unix.AF_UNSPEC, 0, 0, 0)
	b = binary.NativeEndian.AppendUint32(b, uint32(int32(ifindex)))
	b = binary.NativeEndian.AppendUint32(b, uint32(handle))
	b = binary.NativeEndian.AppendUint32(b, uint32(parent))
	return binary.NativeEndian.AppendUint32(b, info)
}

// appendAttrHeader starts an attribute whose length endAttr fills in once
// its payload is appended.
func appendAttrHeader(b []byte, typ uint16) []byte {
	b = binary.NativeEndian.AppendUint16(b, 0)
	return binary.NativeEndian.AppendUint16(b, typ)
}

// endAttr sets the length of the attribute starting at off to the end of
// b. Every payload here is a multiple of 4 bytes long, so no padding.
func endAttr(b []byte, off int) {
	binary.NativeEndian.PutUint16(b[off:], uint16(len(b)-off))
}

// appendAttr appends one attribute holding data, padded to 4 bytes.
func appendAttr(b []byte, typ uint16, data []byte) []byte {
	b = binary.NativeEndian.AppendUint16(b, uint16(4+len(data)))
	b = binary.NativeEndian.AppendUint16(b, typ)
	b = append(b, data...)
	for len(b)%4 != 0 {
		b = append(b, 0)
	}
	return b
}

// appendAttrString appends a NUL-terminated string attribute.
func appendAttrString(b []byte, typ uint16, s string) []byte {
	b = binary.NativeEndian.AppendUint16(b, uint16(4+len(s)+1))
	b = binary.NativeEndian.AppendUint16(b, typ)
	b = append(b, s...)
	b = append(b, 0)
	for len(b)%4 != 0 {
		b = append(b, 0)
	}
	return b
}
