package kernel

import (
	"encoding/binary"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	tc "github.com/florianl/go-tc"

	"sqm/internal/plan"
)

// opKind is what a step creates.
type opKind int

const (
	opQdisc opKind = iota
	opClass
	opFilter
)

// op is one netlink request of a plan, in kernel units, with the facts
// Matches compares against the kernel's dump.
type op struct {
	kind   opKind
	dev    string
	handle plan.Handle // qdisc handle or class id; 0 for filters
	parent plan.Handle
	tcKind string
	// obj is sent through go-tc; when rawOpts is set (or noOpts), the
	// request is encoded here instead (police actions, option-less
	// qdiscs go-tc refuses).
	obj     tc.Object
	useRaw  bool
	rawOpts []byte // TCA_OPTIONS payload for raw requests (nil: none)
	info    uint32 // filters: prio<<16 | protocol (network order)
	stab    []byte // raw TCA_STAB payload for raw requests
	facts   map[string]string
	fd      fdesc    // filters: what Matches compares (rendered on demand)
	hint    string   // what to do when the kernel refuses the kind
	acts    []string // filters: action kinds, for the hint (built on failure only)
	// bpf is the program a "bpf" filter loads when the op runs; l2len
	// the device's link-layer header length it is loaded for.
	bpf   *plan.CodelPolice
	l2len int
}

// resolver maps a device name to its ifindex (for mirred targets).
type resolver func(dev string) (int, error)

func us(d time.Duration) uint32 { return uint32(d / time.Microsecond) }

func u32p(v uint32) *uint32 { return &v }
func u64p(v uint64) *uint64 { return &v }

func boolU32(b *bool) *uint32 {
	if b == nil {
		return nil
	}
	if *b {
		return u32p(1)
	}
	return u32p(0)
}

// treeOps turns one shaping tree into its requests, root first.
func treeOps(t *plan.Tree, tick float64, res resolver) ([]op, error) {
	var ops []op
	for i := range t.Qdiscs {
		o, err := qdiscOp(t.Device, &t.Qdiscs[i], tick)
		if err != nil {
			return nil, fmt.Errorf("qdisc %s on %s: %w", t.Qdiscs[i].Handle, t.Device, err)
		}
		ops = append(ops, o)
		// Classes follow the root qdisc, before leaves attach to them.
		if i == 0 {
			for j := range t.Classes {
				c, err := classOp(t.Device, &t.Classes[j], tick)
				if err != nil {
					return nil, fmt.Errorf("class %s on %s: %w", t.Classes[j].ClassID, t.Device, err)
				}
				ops = append(ops, c)
			}
		}
	}
	for i := range t.Filters {
		f, err := filterOp(t.Device, &t.Filters[i], tick, res)
		if err != nil {
			return nil, fmt.Errorf("filter %d on %s: %w", i, t.Device, err)
		}
		ops = append(ops, f)
	}
	return ops, nil
}

// stabFor computes the size table of a plan stab.
func stabFor(s *plan.Stab) (*tc.Stab, map[string]string, []byte, error) {
	ll, err := linkLayerValue(s.LinkLayer)
	if err != nil {
		return nil, nil, nil, err
	}
	spec := sizeSpec{Overhead: s.Overhead, LinkLayer: ll, MPU: s.MPU, MTU: s.MTU, TSize: s.TSize}
	tab, err := calcSizeTable(&spec)
	if err != nil {
		return nil, nil, nil, err
	}
	base := tc.SizeSpec{CellLog: spec.CellLog, SizeLog: spec.SizeLog, CellAlign: spec.CellAlign,
		Overhead: spec.Overhead, LinkLayer: spec.LinkLayer, MPU: spec.MPU, MTU: spec.MTU, TSize: spec.TSize}
	st := &tc.Stab{Base: &base}
	// Raw TCA_STAB payload: BASE, then DATA when there is a table.
	raw := attr(1, spec.marshal())
	if tab != nil {
		d := tableBytes(tab)
		st.Data = &d
		raw = append(raw, attr(2, d)...)
	}
	return st, stabFacts(spec), raw, nil
}

func stabFacts(s sizeSpec) map[string]string {
	return map[string]string{
		"stab.overhead":  strconv.Itoa(int(s.Overhead)),
		"stab.linklayer": strconv.Itoa(int(s.LinkLayer)),
		"stab.mpu":       strconv.Itoa(int(s.MPU)),
		"stab.mtu":       strconv.Itoa(int(s.MTU)),
		"stab.tsize":     strconv.Itoa(int(s.TSize)),
		"stab.cell_log":  strconv.Itoa(int(s.CellLog)),
		"stab.size_log":  strconv.Itoa(int(s.SizeLog)),
	}
}

func setFact(f map[string]string, k string, v any) { f[k] = fmt.Sprint(v) }

// rateLL fills a ratespec's link-layer fields (htb_private accounting).
func rateLL(r *tc.RateSpec, ll *plan.RateLinkLayer, prefix string, facts map[string]string) error {
	if ll == nil {
		r.Linklayer = linkLayerEthernet
		setFact(facts, prefix+".linklayer", linkLayerEthernet)
		return nil
	}
	v, err := linkLayerValue(ll.LinkLayer)
	if err != nil {
		return err
	}
	if ll.Overhead < 0 || ll.Overhead > 0xffff || ll.MPU > 0xffff {
		return fmt.Errorf("linklayer overhead %d / mpu %d out of range for a rate spec (0..65535; use a stab for negative overhead)", ll.Overhead, ll.MPU)
	}
	r.Linklayer = uint8(v)
	r.Overhead = uint16(ll.Overhead)
	r.Mpu = uint16(ll.MPU)
	setFact(facts, prefix+".linklayer", v)
	setFact(facts, prefix+".overhead", ll.Overhead)
	setFact(facts, prefix+".mpu", ll.MPU)
	return nil
}

func qdiscOp(dev string, q *plan.Qdisc, tick float64) (op, error) {
	o := op{kind: opQdisc, dev: dev, handle: q.Handle, parent: q.Parent, tcKind: q.Kind,
		facts: map[string]string{}, hint: qdiscHint(q.Kind)}
	a := tc.Attribute{Kind: q.Kind}
	f := o.facts
	var err error
	switch q.Kind {
	case "htb":
		var def uint32
		if q.HTB != nil {
			def = uint32(q.HTB.Default)
		}
		a.Htb = &tc.Htb{Init: &tc.HtbGlob{Version: 3, Rate2Quantum: 10, Defcls: def}}
		setFact(f, "default", def)
	case "tbf":
		if q.TBF == nil || q.TBF.RateBits == 0 {
			return o, fmt.Errorf("tbf needs a rate")
		}
		rate := q.TBF.RateBits / 8
		p := &tc.TbfQopt{}
		p.Rate.Rate = sat32(rate)
		if err := rateLL(&p.Rate, q.TBF.LinkLayer, "rate", f); err != nil {
			return o, err
		}
		p.Buffer = xmitTicks(rate, q.TBF.Burst, tick)
		p.Limit = sat32(uint64(float64(rate)*q.TBF.Latency.Seconds()) + uint64(q.TBF.Burst))
		// Like tc, also send the burst in bytes (TCA_TBF_BURST): the
		// kernel then derives the bucket from it with its own rate
		// arithmetic, and the dump shows that value.
		a.Tbf = &tc.Tbf{Parms: p, Burst: u32p(q.TBF.Burst)}
		rc := newRateCfg(rate, p.Rate)
		p.Buffer = uint32(rc.l2tNS(q.TBF.Burst) >> 6)
		if rate >= 1<<32 {
			// go-tc's Tbf has no RATE64; tbf above 34 Gbit/s is not an sqm use.
			return o, fmt.Errorf("tbf rate %d bit/s above 34 Gbit/s is not supported", q.TBF.RateBits)
		}
		setFact(f, "rate", rate)
		setFact(f, "buffer", p.Buffer)
		setFact(f, "limit", p.Limit)
	case "pfifo", "bfifo":
		if q.Fifo == nil {
			o.useRaw = true
			break
		}
		fo := &tc.FifoOpt{Limit: q.Fifo.Limit}
		if q.Kind == "pfifo" {
			a.Pfifo = fo
		} else {
			a.Bfifo = fo
		}
		setFact(f, "limit", q.Fifo.Limit)
	case "fq_codel":
		fc := &tc.FqCodel{}
		if x := q.FqCodel; x != nil {
			set := func(dst **uint32, k string, v uint32) {
				if v != 0 {
					*dst = u32p(v)
					setFact(f, k, v)
				}
			}
			set(&fc.Limit, "limit", x.Limit)
			set(&fc.Flows, "flows", x.Flows)
			set(&fc.Quantum, "quantum", x.Quantum)
			set(&fc.Target, "target_us", us(x.Target))
			set(&fc.Interval, "interval_us", us(x.Interval))
			set(&fc.MemoryLimit, "memory_limit", x.MemoryLimit)
			set(&fc.CEThreshold, "ce_threshold_us", us(x.CEThreshold))
			set(&fc.DropBatchSize, "drop_batch", x.DropBatch)
			if fc.ECN = boolU32(x.ECN); fc.ECN != nil {
				setFact(f, "ecn", *fc.ECN)
			}
		}
		if len(f) == 0 {
			o.useRaw = true
		}
		a.FqCodel = fc
	case "codel":
		cd := &tc.Codel{}
		if x := q.Codel; x != nil {
			set := func(dst **uint32, k string, v uint32) {
				if v != 0 {
					*dst = u32p(v)
					setFact(f, k, v)
				}
			}
			set(&cd.Limit, "limit", x.Limit)
			set(&cd.Target, "target_us", us(x.Target))
			set(&cd.Interval, "interval_us", us(x.Interval))
			set(&cd.CEThreshold, "ce_threshold_us", us(x.CEThreshold))
			if cd.ECN = boolU32(x.ECN); cd.ECN != nil {
				setFact(f, "ecn", *cd.ECN)
			}
		}
		if len(f) == 0 {
			o.useRaw = true
		}
		a.Codel = cd
	case "pie":
		pi := &tc.Pie{}
		if x := q.Pie; x != nil {
			set := func(dst **uint32, k string, v uint32) {
				if v != 0 {
					*dst = u32p(v)
					setFact(f, k, v)
				}
			}
			set(&pi.Limit, "limit", x.Limit)
			set(&pi.Target, "target_us", us(x.Target))
			set(&pi.TUpdate, "tupdate_us", us(x.TUpdate))
			set(&pi.Alpha, "alpha", x.Alpha)
			set(&pi.Beta, "beta", x.Beta)
			if pi.ECN = boolU32(x.ECN); pi.ECN != nil {
				setFact(f, "ecn", *pi.ECN)
			}
			if pi.Bytemode = boolU32(x.Bytemode); pi.Bytemode != nil {
				setFact(f, "bytemode", *pi.Bytemode)
			}
		}
		if len(f) == 0 {
			o.useRaw = true
		}
		a.Pie = pi
	case "fq_pie":
		fp := &tc.FqPie{}
		if x := q.FqPie; x != nil {
			set := func(dst **uint32, k string, v uint32) {
				if v != 0 {
					*dst = u32p(v)
					setFact(f, k, v)
				}
			}
			set(&fp.Limit, "limit", x.Limit)
			set(&fp.Flows, "flows", x.Flows)
			set(&fp.Target, "target_us", us(x.Target))
			set(&fp.TUpdate, "tupdate_us", us(x.TUpdate))
			set(&fp.Quantum, "quantum", x.Quantum)
			set(&fp.MemoryLimit, "memory_limit", x.MemoryLimit)
			set(&fp.Alpha, "alpha", x.Alpha)
			set(&fp.Beta, "beta", x.Beta)
			set(&fp.EcnProb, "ecn_prob", x.ECNProb)
			if fp.Bytemode = boolU32(x.Bytemode); fp.Bytemode != nil {
				setFact(f, "bytemode", *fp.Bytemode)
			}
			if fp.Ecn = boolU32(x.ECN); fp.Ecn != nil {
				setFact(f, "ecn", *fp.Ecn)
			}
		}
		if len(f) == 0 {
			o.useRaw = true
		}
		a.FqPie = fp
	case "sfq":
		s := &tc.Sfq{}
		if x := q.SFQ; x != nil {
			s.V0 = tc.SfqQopt{Quantum: x.Quantum, PerturbPeriod: int32(x.Perturb), Limit: x.Limit, Divisor: x.Divisor, Flows: x.Flows}
			s.Depth = x.Depth
			for k, v := range map[string]uint32{"quantum": x.Quantum, "perturb": x.Perturb, "limit": x.Limit, "divisor": x.Divisor, "flows": x.Flows, "depth": x.Depth} {
				if v != 0 {
					setFact(f, k, v)
				}
			}
		}
		a.Sfq = s
	case "cake":
		a.Cake, err = cakeAttr(q.Cake, f)
		if err != nil {
			return o, err
		}
		if len(f) == 0 {
			o.useRaw = true
		}
	case "ingress", "clsact":
		// parameterless
	default:
		return o, fmt.Errorf("qdisc kind %q: %w", q.Kind, ErrNotSupported)
	}
	if q.Stab != nil {
		st, sf, raw, err := stabFor(q.Stab)
		if err != nil {
			return o, fmt.Errorf("stab: %w", err)
		}
		a.Stab = st
		o.stab = raw
		for k, v := range sf {
			f[k] = v
		}
	}
	o.obj = tc.Object{Msg: tc.Msg{Family: 0, Handle: uint32(q.Handle), Parent: uint32(q.Parent)}, Attribute: a}
	return o, nil
}

// Cake's enums as the kernel numbers them (linux/pkt_sched.h).
var (
	cakeDiffserv = map[string]uint32{"diffserv3": 0, "diffserv4": 1, "diffserv8": 2, "besteffort": 3, "precedence": 4}
	cakeFlowMode = map[string]uint32{"flowblind": 0, "srchost": 1, "dsthost": 2, "hosts": 3, "flows": 4,
		"dual-srchost": 5, "dual-dsthost": 6, "triple-isolate": 7}
	cakeATM       = map[string]uint32{"noatm": 0, "atm": 1, "ptm": 2}
	cakeACKFilter = map[string]uint32{"no-ack-filter": 0, "ack-filter": 1, "ack-filter-aggressive": 2}
)

func cakeAttr(x *plan.Cake, f map[string]string) (*tc.Cake, error) {
	c := &tc.Cake{}
	if x == nil {
		return c, nil
	}
	c.BaseRate = u64p(x.BandwidthBits / 8)
	setFact(f, "base_rate", x.BandwidthBits/8)
	enum := func(dst **uint32, k, v string, m map[string]uint32) error {
		if v == "" {
			return nil
		}
		n, ok := m[v]
		if !ok {
			return fmt.Errorf("cake %s %q unknown", k, v)
		}
		*dst = u32p(n)
		setFact(f, k, n)
		return nil
	}
	if err := enum(&c.DiffServMode, "diffserv", x.Diffserv, cakeDiffserv); err != nil {
		return nil, err
	}
	if err := enum(&c.FlowMode, "flow_mode", x.FlowMode, cakeFlowMode); err != nil {
		return nil, err
	}
	if err := enum(&c.Atm, "atm", x.ATM, cakeATM); err != nil {
		return nil, err
	}
	if err := enum(&c.AckFilter, "ack_filter", x.ACKFilter, cakeACKFilter); err != nil {
		return nil, err
	}
	flag := func(dst **uint32, k string, v *bool) {
		if *dst = boolU32(v); *dst != nil {
			setFact(f, k, **dst)
		}
	}
	flag(&c.Nat, "nat", x.NAT)
	flag(&c.Wash, "wash", x.Wash)
	flag(&c.Ingress, "ingress", x.Ingress)
	flag(&c.SplitGso, "split_gso", x.SplitGSO)
	flag(&c.Autorate, "autorate", x.Autorate)
	if x.RTT > 0 {
		c.Rtt = u32p(us(x.RTT))
		setFact(f, "rtt", *c.Rtt)
	}
	if x.Overhead != nil {
		c.Overhead = u32p(uint32(*x.Overhead))
		setFact(f, "overhead", *x.Overhead)
	}
	if x.MPU != nil {
		c.Mpu = u32p(*x.MPU)
		setFact(f, "mpu", *x.MPU)
	}
	if x.Raw != nil && *x.Raw {
		c.Raw = u32p(1)
		setFact(f, "raw", 1)
	}
	if x.Memlimit != 0 {
		c.Memory = u32p(x.Memlimit)
		setFact(f, "memory", x.Memlimit)
	}
	if x.FwMark != 0 {
		c.FwMark = u32p(x.FwMark)
		setFact(f, "fwmark", x.FwMark)
	}
	return c, nil
}

// htbDefaultMTU is what tc's htb assumes for the default burst.
const htbDefaultMTU = 1600

func classOp(dev string, c *plan.Class, tick float64) (op, error) {
	o := op{kind: opClass, dev: dev, handle: c.ClassID, parent: c.Parent, tcKind: "htb",
		facts: map[string]string{}, hint: qdiscHint("htb")}
	h := c.HTB
	if h == nil || h.RateBits == 0 {
		return o, fmt.Errorf("htb class needs a rate")
	}
	ceil := h.CeilBits
	if ceil == 0 {
		ceil = h.RateBits
	}
	rate, ceilB := h.RateBits/8, ceil/8
	p := &tc.HtbOpt{Quantum: h.Quantum, Prio: h.Prio}
	f := o.facts
	if err := rateLL(&p.Rate, h.LinkLayer, "rate", f); err != nil {
		return o, err
	}
	if err := rateLL(&p.Ceil, h.LinkLayer, "ceil", f); err != nil {
		return o, err
	}
	p.Rate.Rate, p.Ceil.Rate = sat32(rate), sat32(ceilB)
	// tc's defaults: one MTU plus what the rate sends in one timer tick
	// (1 ns with high-resolution timers).
	mtu := uint32(htbDefaultMTU)
	if h.LinkLayer != nil && h.LinkLayer.MTU != 0 {
		mtu = h.LinkLayer.MTU // tc's htb "mtu", rendered with htb_private
	}
	burst, cburst := h.Burst, h.CBurst
	if burst == 0 {
		burst = uint32(rate/1e9) + mtu
	}
	if cburst == 0 {
		cburst = uint32(ceilB/1e9) + mtu
	}
	p.Buffer = xmitTicks(rate, burst, tick)
	p.Cbuffer = xmitTicks(ceilB, cburst, tick)
	ht := &tc.Htb{Parms: p}
	if rate >= 1<<32 {
		ht.Rate64 = u64p(rate)
	}
	if ceilB >= 1<<32 {
		ht.Ceil64 = u64p(ceilB)
	}
	setFact(f, "rate", rate)
	setFact(f, "ceil", ceilB)
	setFact(f, "buffer", p.Buffer)
	setFact(f, "cbuffer", p.Cbuffer)
	setFact(f, "prio", h.Prio)
	if h.Quantum != 0 {
		setFact(f, "quantum", h.Quantum)
	}
	o.obj = tc.Object{Msg: tc.Msg{Handle: uint32(c.ClassID), Parent: uint32(c.Parent)}, Attribute: tc.Attribute{Kind: "htb", Htb: ht}}
	return o, nil
}

// Ethertypes of tc's protocol names.
var protocols = map[string]uint16{
	"all": 0x0003, "ip": 0x0800, "ipv6": 0x86DD, "arp": 0x0806,
	"802.1Q": 0x8100, "802.1ad": 0x88A8, "ppp_ses": 0x8864, "ppp_disc": 0x8863,
}

func htons(v uint16) uint16 {
	var b [2]byte
	binary.BigEndian.PutUint16(b[:], v)
	return binary.NativeEndian.Uint16(b[:])
}

// netU32 converts a host-order value to the in-memory form of a __be32.
func netU32(v uint32) uint32 {
	var b [4]byte
	binary.BigEndian.PutUint32(b[:], v)
	return binary.NativeEndian.Uint32(b[:])
}

func filterOp(dev string, fl *plan.Filter, tick float64, res resolver) (op, error) {
	o := op{kind: opFilter, dev: dev, parent: fl.Parent, tcKind: fl.Kind}
	proto, ok := protocols[fl.Protocol]
	if !ok {
		return o, fmt.Errorf("protocol %q unknown", fl.Protocol)
	}
	o.info = uint32(fl.Prio)<<16 | uint32(htons(proto))
	var actKinds []string
	var desc fdesc
	desc.prio, desc.proto, desc.kind = fl.Prio, proto, fl.Kind
	desc.flowid = fl.FlowID
	var acts []*tc.Action
	var rawActs []byte
	hasPolice := false
	for i, a := range fl.Actions {
		switch {
		case a.Mirred != nil:
			idx, err := res(a.Mirred.Device)
			if err != nil {
				return o, fmt.Errorf("mirred target: %w", err)
			}
			actKinds = append(actKinds, "mirred")
			desc.acts = append(desc.acts, fmt.Sprintf("mirred(egress redirect ifindex %d)", idx))
			parms := tc.MirredParam{Action: tcActStolen, Eaction: tcaEgressRedir, IfIndex: uint32(idx)}
			acts = append(acts, &tc.Action{Kind: "mirred", Mirred: &tc.Mirred{Parms: &parms}})
			rawActs = append(rawActs, actionAttr(uint16(i+1), "mirred", attr(2, mirredParms(parms)))...)
		case a.Police != nil:
			hasPolice = true
			actKinds = append(actKinds, "police")
			tbf, rtab, r64 := policeOptions(a.Police.RateBits, a.Police.Burst, a.Police.MTU, tick)
			opts := append(attr(tcaPoliceTbf, tbf), attr(tcaPoliceRate, rtab)...)
			if r64 != 0 {
				b := make([]byte, 8)
				binary.NativeEndian.PutUint64(b, r64)
				opts = append(opts, attr(tcaPoliceRate64, b)...)
			}
			desc.acts = append(desc.acts, policeDesc(tbf, r64))
			rawActs = append(rawActs, actionAttr(uint16(i+1), "police", opts)...)
		default:
			return o, fmt.Errorf("action %d: empty", i)
		}
	}
	o.acts = actKinds
	switch fl.Kind {
	case "u32":
		if fl.U32 == nil {
			return o, fmt.Errorf("u32 filter without keys")
		}
		keys, err := packKeys(fl.U32.Keys)
		if err != nil {
			return o, err
		}
		desc.keys = keys
		if hasPolice {
			o.useRaw = true
			o.rawOpts = u32Options(keys, fl.FlowID, rawActs)
			break
		}
		sel := &tc.U32Sel{Flags: 1 /* TC_U32_TERMINAL */, NKeys: uint8(len(keys))}
		for _, k := range keys {
			sel.Keys = append(sel.Keys, tc.U32Key{Mask: netU32(k.Mask), Val: netU32(k.Val & k.Mask), Off: uint32(k.Off)})
		}
		u := &tc.U32{Sel: sel}
		if fl.FlowID != 0 {
			u.ClassID = u32p(uint32(fl.FlowID))
		}
		if len(acts) > 0 {
			u.Actions = &acts
		}
		o.obj = tc.Object{Msg: tc.Msg{Parent: uint32(fl.Parent), Info: o.info}, Attribute: tc.Attribute{Kind: "u32", U32: u}}
	case "matchall":
		if hasPolice {
			o.useRaw = true
			var b []byte
			if fl.FlowID != 0 {
				b = append(b, attr(1, le32(uint32(fl.FlowID)))...)
			}
			o.rawOpts = append(b, nest(2, rawActs)...)
			break
		}
		m := &tc.Matchall{}
		if fl.FlowID != 0 {
			m.ClassID = u32p(uint32(fl.FlowID))
		}
		if len(acts) > 0 {
			m.Actions = &acts
		}
		o.obj = tc.Object{Msg: tc.Msg{Parent: uint32(fl.Parent), Info: o.info}, Attribute: tc.Attribute{Kind: "matchall", Matchall: m}}
	case "bpf":
		if err := bpfFilterOp(&o, &desc, fl); err != nil {
			return o, err
		}
	default:
		return o, fmt.Errorf("filter kind %q: %w", fl.Kind, ErrNotSupported)
	}
	o.fd = desc
	return o, nil
}

// packKeys is iproute2's pack_key: keys at the same offset are merged into
// one (values and masks or-ed), as tc does, so the kernel holds the same
// selector whether tc or sqm built it. Keys that contradict each other
// can never match and are an error.
func packKeys(in []plan.U32Key) ([]plan.U32Key, error) {
	out := make([]plan.U32Key, 0, len(in))
next:
	for _, k := range in {
		k.Val &= k.Mask
		for i := range out {
			if out[i].Off == k.Off {
				if (k.Val^out[i].Val)&(k.Mask&out[i].Mask) != 0 {
					return nil, fmt.Errorf("u32 keys at offset %d contradict each other (%08x/%08x and %08x/%08x)",
						k.Off, out[i].Val, out[i].Mask, k.Val, k.Mask)
				}
				out[i].Val |= k.Val
				out[i].Mask |= k.Mask
				continue next
			}
		}
		out = append(out, k)
	}
	if len(out) > 128 {
		return nil, fmt.Errorf("u32 filter with %d keys: at most 128", len(out))
	}
	return out, nil
}

// fdesc is a filter reduced to what sqm sets, rendered as one comparable
// line.
type fdesc struct {
	parent plan.Handle
	prio   uint16
	proto  uint16
	kind   string
	keys   []plan.U32Key
	flowid plan.Handle
	acts   []string
}

func (d fdesc) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "prio %d protocol 0x%04x %s", d.prio, d.proto, d.kind)
	keys := make([]string, 0, len(d.keys))
	for _, k := range d.keys {
		keys = append(keys, fmt.Sprintf("%08x/%08x@%d", k.Val&k.Mask, k.Mask, k.Off))
	}
	sort.Strings(keys)
	if len(keys) > 0 {
		fmt.Fprintf(&b, " match %s", strings.Join(keys, ","))
	}
	if d.flowid != 0 {
		fmt.Fprintf(&b, " flowid %s", d.flowid)
	}
	for _, a := range d.acts {
		b.WriteString(" " + a)
	}
	return b.String()
}

func policeDesc(tbf []byte, rate64 uint64) string {
	rs := decodeRateSpec(tbf[20:32])
	rate := uint64(rs.Rate)
	if rate64 != 0 {
		rate = rate64
	}
	return fmt.Sprintf("police(rate %d burst %d mtu %d action %d)", rate, u32At(tbf, 12), u32At(tbf, 16), int32(u32At(tbf, 4)))
}

// act_mirred constants (linux/tc_act/tc_mirred.h, pkt_cls.h).
const (
	tcActStolen    = 4
	tcaEgressRedir = 1
)

func mirredParms(p tc.MirredParam) []byte {
	b := make([]byte, 28)
	for i, v := range []uint32{p.Index, p.Capab, p.Action, p.RefCnt, p.BindCnt, p.Eaction, p.IfIndex} {
		binary.NativeEndian.PutUint32(b[4*i:], v)
	}
	return b
}
