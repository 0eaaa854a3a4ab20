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

// Top-level tc attributes (linux/rtnetlink.h TCA_*).
const (
	tcaKind    = 1
	tcaOptions = 2
	tcaStats   = 3
	tcaXStats  = 4
	tcaStats2  = 7
	tcaStab    = 8
	tcaChain   = 11
)

// TCA_STATS2 nest (linux/gen_stats.h).
const (
	tcaStatsBasic     = 1
	tcaStatsRateEst   = 2
	tcaStatsQueue     = 3
	tcaStatsApp       = 4
	tcaStatsRateEst64 = 5
	tcaStatsPkt64     = 8
)

// dumpTries bounds the retries of a dump the kernel marks interrupted.
const dumpTries = 3

// tcmsgLen is sizeof(struct tcmsg).
const tcmsgLen = 20

// object is one qdisc, class or filter as the kernel dumps it. Options and
// XStats stay raw: only kinds sqm displays or compares are decoded, and an
// unknown kind is carried along, never an error.
type object struct {
	Kind    string
	Ifindex int
	Handle  plan.Handle // qdisc handle, class id, filter handle
	Parent  plan.Handle
	Info    uint32 // filters: prio<<16 | protocol (network order)
	Options []byte
	XStats  []byte
	Stab    *sizeSpec
	Stats   Counters
}

// dumpKind selects what dump asks for.
type dumpKind uint16

const (
	dumpQdiscs  dumpKind = unix.RTM_GETQDISC
	dumpClasses dumpKind = unix.RTM_GETTCLASS
	dumpFilters dumpKind = unix.RTM_GETTFILTER
)

// dump lists qdiscs, classes or filters of one device. The kernel dumps
// qdiscs of all devices (filtered here), classes of ifindex, and filters of
// the qdisc or class parent.
func (c *Conn) dump(kind dumpKind, ifindex int, parent plan.Handle) ([]object, error) {
	req := tcmsg(ifindex, 0, parent, 0)
	var msgs []netlink.Message
	var err error
	// A dump interrupted by a concurrent change (another tool, or the
	// kernel adding flow classes) is whole but maybe inconsistent: ask
	// again, a few times.
	for range dumpTries {
		msgs, err = c.raw.Execute(netlink.Message{
			Header: netlink.Header{Type: uint16(kind), Flags: netlink.Dump},
			Data:   req,
		})
		if !errors.Is(err, netlink.ErrDumpInterrupted) {
			break
		}
	}
	if err != nil {
		if errors.Is(err, unix.ENODEV) {
			return nil, fmt.Errorf("dump tc objects of ifindex %d: %w", ifindex, errors.Join(ErrNoLink, err))
		}
		return nil, explain(fmt.Sprintf("dump tc objects of ifindex %d", ifindex), err, "")
	}
	out := make([]object, 0, len(msgs))
	for _, m := range msgs {
		o, err := decodeObject(m.Data)
		if err != nil {
			return nil, fmt.Errorf("dump tc objects of ifindex %d: %w", ifindex, err)
		}
		if o.Ifindex != ifindex {
			continue
		}
		out = append(out, o)
	}
	return out, nil
}

// decodeObject decodes one RTM_NEW{QDISC,TCLASS,TFILTER} message body.
func decodeObject(b []byte) (object, error) {
	var o object
	if len(b) < tcmsgLen {
		return o, fmt.Errorf("decode tc message: %d bytes, shorter than struct tcmsg", len(b))
	}
	o.Ifindex = int(int32(binary.NativeEndian.Uint32(b[4:])))
	o.Handle = plan.Handle(binary.NativeEndian.Uint32(b[8:]))
	o.Parent = plan.Handle(binary.NativeEndian.Uint32(b[12:]))
	o.Info = binary.NativeEndian.Uint32(b[16:])
	ad := nlattr.NewDecoder(b[tcmsgLen:])
	var legacy, stats2 bool
	for ad.Next() {
		switch ad.Type() {
		case tcaKind:
			o.Kind = ad.String()
		case tcaOptions:
			o.Options = ad.Bytes()
		case tcaXStats:
			if o.XStats == nil {
				o.XStats = ad.Bytes()
			}
		case tcaStab:
			nad := nlattr.NewDecoder(ad.Bytes())
			for nad.Next() {
				if nad.Type() == 1 { // TCA_STAB_BASE
					s, err := decodeSizeSpec(nad.Bytes())
					if err == nil {
						o.Stab = &s
					}
				}
			}
			if err := nad.Err(); err != nil {
				return o, fmt.Errorf("decode TCA_STAB of %s %s: %w", o.Kind, o.Handle, err)
			}
		case tcaStats:
			// struct tc_stats, the legacy view; only used when the kernel
			// sends no TCA_STATS2 (it always does since 2.6.x).
			if v := ad.Bytes(); len(v) >= 36 && !stats2 {
				legacy = true
				o.Stats.Bytes = binary.NativeEndian.Uint64(v[0:])
				o.Stats.Packets = uint64(binary.NativeEndian.Uint32(v[8:]))
				o.Stats.Drops = binary.NativeEndian.Uint32(v[12:])
				o.Stats.Overlimits = binary.NativeEndian.Uint32(v[16:])
				o.Stats.RateBps = uint64(binary.NativeEndian.Uint32(v[20:]))
				o.Stats.RatePps = uint64(binary.NativeEndian.Uint32(v[24:]))
				o.Stats.BacklogPackets = binary.NativeEndian.Uint32(v[28:])
				o.Stats.BacklogBytes = binary.NativeEndian.Uint32(v[32:])
			}
		case tcaStats2:
			stats2 = true
			if legacy {
				o.Stats = Counters{}
			}
			nad := nlattr.NewDecoder(ad.Bytes())
			decodeStats2(nad, &o)
			if err := nad.Err(); err != nil {
				return o, fmt.Errorf("decode TCA_STATS2 of %s %s: %w", o.Kind, o.Handle, err)
			}
		}
	}
	if err := ad.Err(); err != nil {
		return o, fmt.Errorf("decode tc attributes of %s %s: %w", o.Kind, o.Handle, err)
	}
	return o, nil
}

func decodeStats2(ad *nlattr.Decoder, o *object) {
	for ad.Next() {
		v := ad.Bytes()
		switch ad.Type() {
		case tcaStatsBasic: // struct gnet_stats_basic {u64 bytes; u32 packets}
			if len(v) >= 12 {
				o.Stats.Bytes = binary.NativeEndian.Uint64(v[0:])
				if o.Stats.Packets == 0 {
					o.Stats.Packets = uint64(binary.NativeEndian.Uint32(v[8:]))
				}
			}
		case tcaStatsPkt64:
			if len(v) >= 8 {
				o.Stats.Packets = binary.NativeEndian.Uint64(v)
			}
		case tcaStatsRateEst: // {u32 bps; u32 pps}
			if len(v) >= 8 && o.Stats.RateBps == 0 {
				o.Stats.RateBps = uint64(binary.NativeEndian.Uint32(v[0:]))
				o.Stats.RatePps = uint64(binary.NativeEndian.Uint32(v[4:]))
			}
		case tcaStatsRateEst64: // {u64 bps; u64 pps}
			if len(v) >= 16 {
				o.Stats.RateBps = binary.NativeEndian.Uint64(v[0:])
				o.Stats.RatePps = binary.NativeEndian.Uint64(v[8:])
			}
		case tcaStatsQueue: // {qlen, backlog, drops, requeues, overlimits}
			if len(v) >= 20 {
				o.Stats.BacklogPackets = binary.NativeEndian.Uint32(v[0:])
				o.Stats.BacklogBytes = binary.NativeEndian.Uint32(v[4:])
				o.Stats.Drops = binary.NativeEndian.Uint32(v[8:])
				o.Stats.Requeues = binary.NativeEndian.Uint32(v[12:])
				o.Stats.Overlimits = binary.NativeEndian.Uint32(v[16:])
			}
		case tcaStatsApp:
			o.XStats = v
		}
	}
}

// attrMap decodes one level of netlink attributes into type -> payload.
// Later duplicates win; malformed input yields what decoded so far.
func attrMap(b []byte) map[uint16][]byte {
	m := make(map[uint16][]byte)
	ad := nlattr.NewDecoder(b)
	for ad.Next() {
		m[ad.Type()] = ad.Bytes()
	}
	return m
}

func u32At(b []byte, off int) uint32 {
	if len(b) < off+4 {
		return 0
	}
	return binary.NativeEndian.Uint32(b[off:])
}

func u64At(b []byte, off int) uint64 {
	if len(b) < off+8 {
		return 0
	}
	return binary.NativeEndian.Uint64(b[off:])
}

// scalar reads a u8/u16/u32/u64 attribute payload by its length.
func scalar(b []byte) uint64 {
	switch len(b) {
	case 1:
		return uint64(b[0])
	case 2:
		return uint64(binary.NativeEndian.Uint16(b))
	case 4:
		return uint64(binary.NativeEndian.Uint32(b))
	case 8:
		return binary.NativeEndian.Uint64(b)
	}
	return 0
}
