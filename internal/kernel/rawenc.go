package kernel

import (
	"encoding/binary"
	"fmt"

	"golang.org/x/sys/unix"

	"sqm/internal/netlink"
	"sqm/internal/nlattr"
	"sqm/internal/plan"
)

func le32(v uint32) []byte {
	b := make([]byte, 4)
	binary.NativeEndian.PutUint32(b, v)
	return b
}

func cstr(s string) []byte { return append([]byte(s), 0) }

// actionAttr encodes one entry of a filter's action list: order prio,
// TCA_ACT_KIND and TCA_ACT_OPTIONS.
func actionAttr(prio uint16, kind string, opts []byte) []byte {
	return nlattr.Nest(prio, append(nlattr.Attr(1, cstr(kind)), nlattr.Nest(2, opts)...))
}

// u32 attributes (linux/pkt_cls.h TCA_U32_*).
const (
	tcaU32ClassID = 1
	tcaU32Sel     = 5
	tcaU32Act     = 7
)

// u32Sel encodes struct tc_u32_sel with fixed-offset keys, in the kernel's
// layout (go-tc packs offmask one byte early: go-tc#14; our keys never
// use it, but a police filter is encoded here whole).
func u32Sel(keys []plan.U32Key) []byte {
	b := make([]byte, 16+16*len(keys))
	b[0] = 1 // TC_U32_TERMINAL
	b[2] = uint8(len(keys))
	for i, k := range keys {
		kb := b[16+16*i:]
		binary.BigEndian.PutUint32(kb[0:], k.Mask)
		binary.BigEndian.PutUint32(kb[4:], k.Val&k.Mask)
		binary.NativeEndian.PutUint32(kb[8:], uint32(k.Off))
	}
	return b
}

// u32Options is a u32 filter's TCA_OPTIONS payload.
func u32Options(keys []plan.U32Key, flowid plan.Handle, acts []byte) []byte {
	b := nlattr.Attr(tcaU32Sel, u32Sel(keys))
	if flowid != 0 {
		b = append(b, nlattr.Attr(tcaU32ClassID, le32(uint32(flowid)))...)
	}
	if len(acts) > 0 {
		b = append(b, nlattr.Nest(tcaU32Act, acts)...)
	}
	return b
}

// tcmsg encodes struct tcmsg.
func tcmsg(ifindex int, handle, parent plan.Handle, info uint32) []byte {
	b := make([]byte, tcmsgLen)
	b[0] = unix.AF_UNSPEC
	binary.NativeEndian.PutUint32(b[4:], uint32(int32(ifindex)))
	binary.NativeEndian.PutUint32(b[8:], uint32(handle))
	binary.NativeEndian.PutUint32(b[12:], uint32(parent))
	binary.NativeEndian.PutUint32(b[16:], info)
	return b
}

// request is the RTM_NEW* message that creates o on ifindex: tcmsg,
// kind, options (omitted if nil), stab.
func (o *op) request(ifindex int) netlink.Message {
	typ := unix.RTM_NEWQDISC
	switch o.kind {
	case opClass:
		typ = unix.RTM_NEWTCLASS
	case opFilter:
		typ = unix.RTM_NEWTFILTER
	}
	data := tcmsg(ifindex, o.handle, o.parent, o.info)
	switch {
	case o.tcLayout && o.kind == opFilter:
		data = append(data, nlattr.Attr(tcaKind, cstr(o.tcKind))...)
		data = append(data, nlattr.Attr(tcaOptions, o.rawOpts)...)
	case o.tcLayout:
		data = append(data, nlattr.Attr(tcaOptions, o.rawOpts)...)
		data = append(data, nlattr.Attr(tcaKind, cstr(o.tcKind))...)
		if o.stab != nil {
			data = append(data, nlattr.Attr(tcaStab, o.stab)...)
		}
	default:
		data = append(data, nlattr.Attr(tcaKind, cstr(o.tcKind))...)
		if o.rawOpts != nil {
			data = append(data, nlattr.Nest(tcaOptions, o.rawOpts)...)
		}
		if o.stab != nil {
			data = append(data, nlattr.Nest(tcaStab, o.stab)...)
		}
	}
	return netlink.Message{
		Header: netlink.Header{
			Type:  uint16(typ),
			Flags: netlink.Request | netlink.Acknowledge | netlink.Create | netlink.Excl,
		},
		Data: data,
	}
}

// rawAdd sends o's request.
func (c *Conn) rawAdd(o *op, ifindex int) error {
	_, err := c.raw.Execute(o.request(ifindex))
	return err
}

// rawDel deletes one qdisc (by parent; handle optional).
func (c *Conn) delQdisc(ifindex int, handle, parent plan.Handle) error {
	_, err := c.raw.Execute(netlink.Message{
		Header: netlink.Header{Type: unix.RTM_DELQDISC, Flags: netlink.Request | netlink.Acknowledge},
		Data:   tcmsg(ifindex, handle, parent, 0),
	})
	c.traceOp("", ifindex, fmt.Sprintf("delete qdisc %s (parent %s)", handle, parent), err)
	if err != nil {
		return fmt.Errorf("delete qdisc %s (parent %s) on ifindex %d: %w", handle, parent, ifindex, err)
	}
	return nil
}
