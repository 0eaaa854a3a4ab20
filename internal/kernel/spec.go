package kernel

import (
	"encoding/binary"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"sqm/internal/nlattr"
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
	// rawOpts is the TCA_OPTIONS payload (nil: none), stab the TCA_STAB
	// payload (nil: none). tcLayout says how request lays them out: as
	// go-tc did for the requests it sent before sqm encoded everything
	// itself (options first and without NLA_F_NESTED, actions inside out),
	// so those stay byte for byte what the VM tests proved
	// (testdata/requests-*); otherwise as sqm's own encoder always did.
	tcLayout bool
	rawOpts  []byte
	info     uint32 // filters: prio<<16 | protocol (network order)
	stab     []byte
	facts    map[string]string
	fd       fdesc    // filters: what Matches compares (rendered on demand)
	hint     string   // what to do when the kernel refuses the kind
	acts     []string // filters: action kinds, for the hint (built on failure only)
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

// stabFor computes the TCA_STAB payload of a plan stab: BASE, then DATA
// when there is a table.
func stabFor(s *plan.Stab) (map[string]string, []byte, error) {
	ll, err := linkLayerValue(s.LinkLayer)
	if err != nil {
		return nil, nil, err
	}
	spec := sizeSpec{Overhead: s.Overhead, LinkLayer: ll, MPU: s.MPU, MTU: s.MTU, TSize: s.TSize}
	tab, err := calcSizeTable(&spec)
	if err != nil {
		return nil, nil, err
	}
	raw := nlattr.Attr(1, spec.marshal())
	if tab != nil {
		raw = append(raw, nlattr.Attr(2, tableBytes(tab))...)
	}
	return stabFacts(spec), raw, nil
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

// setFact records one fact; f is nil where no one compares them (a rate
// change, which must not allocate).
func setFact(f map[string]string, k string, v any) {
	if f != nil {
		f[k] = fmt.Sprint(v)
	}
}

// rateLL fills a ratespec's link-layer fields (htb_private accounting).
func rateLL(r *rateSpec, ll *plan.RateLinkLayer, prefix string, facts map[string]string) error {
	if ll == nil {
		r.LinkLayer = linkLayerEthernet
		if facts != nil { // a rate change builds no facts (and no key strings)
			setFact(facts, prefix+".linklayer", linkLayerEthernet)
		}
		return nil
	}
	v, err := linkLayerValue(ll.LinkLayer)
	if err != nil {
		return err
	}
	if ll.Overhead < 0 || ll.Overhead > 0xffff || ll.MPU > 0xffff {
		return fmt.Errorf("linklayer overhead %d / mpu %d out of range for a rate spec (0..65535; use a stab for negative overhead)", ll.Overhead, ll.MPU)
	}
	r.LinkLayer = uint8(v)
	r.Overhead = uint16(ll.Overhead)
	r.MPU = uint16(ll.MPU)
	if facts != nil {
		setFact(facts, prefix+".linklayer", v)
		setFact(facts, prefix+".overhead", ll.Overhead)
		setFact(facts, prefix+".mpu", ll.MPU)
	}
	return nil
}

// attrs builds a list of netlink attributes.
type attrs []byte

func (a *attrs) bytes(typ uint16, b []byte) { *a = append(*a, nlattr.Attr(typ, b)...) }
func (a *attrs) u32(typ uint16, v uint32)   { a.bytes(typ, le32(v)) }
func (a *attrs) u64(typ uint16, v uint64) {
	b := make([]byte, 8)
	binary.NativeEndian.PutUint64(b, v)
	a.bytes(typ, b)
}

// u32Opt is one optional u32 attribute of a qdisc's options.
type u32Opt struct {
	typ  uint16
	fact string
	v    uint32
	set  bool // sent even when v is 0 (a flag that is off)
}

// u32Opts encodes the options that are set (in the order given, which is
// ascending attribute type as go-tc sent them) and records their facts.
func u32Opts(f map[string]string, opts []u32Opt) []byte {
	var a attrs
	for _, o := range opts {
		if o.v != 0 || o.set {
			a.u32(o.typ, o.v)
			setFact(f, o.fact, o.v)
		}
	}
	return a
}

// flagOpt is a boolean option: sent (0 or 1) only when the plan sets it.
func flagOpt(typ uint16, fact string, b *bool) u32Opt {
	if b == nil {
		return u32Opt{typ: typ, fact: fact}
	}
	o := u32Opt{typ: typ, fact: fact, set: true}
	if *b {
		o.v = 1
	}
	return o
}

// Qdisc option attributes (linux/pkt_sched.h).
const (
	tcaHtbParms  = 1
	tcaHtbInit   = 2
	tcaHtbRate64 = 6
	tcaHtbCeil64 = 7
	tcaTbfParms  = 1
	tcaTbfRtab   = 2
	tcaTbfBurst  = 6
)

func qdiscOp(dev string, q *plan.Qdisc, tick float64) (op, error) {
	o := op{kind: opQdisc, dev: dev, handle: q.Handle, parent: q.Parent, tcKind: q.Kind,
		facts: map[string]string{}, hint: qdiscHint(q.Kind), tcLayout: true}
	f := o.facts
	var err error
	switch q.Kind {
	case "htb":
		var def uint32
		if q.HTB != nil {
			def = uint32(q.HTB.Default)
		}
		// struct tc_htb_glob: version, rate2quantum, defcls, debug, direct_pkts.
		g := make([]byte, 20)
		binary.NativeEndian.PutUint32(g[0:], 3)
		binary.NativeEndian.PutUint32(g[4:], 10)
		binary.NativeEndian.PutUint32(g[8:], def)
		o.rawOpts = nlattr.Attr(tcaHtbInit, g)
		setFact(f, "default", def)
	case "tbf":
		if q.TBF == nil || q.TBF.RateBits == 0 {
			return o, fmt.Errorf("tbf needs a rate")
		}
		rate := q.TBF.RateBits / 8
		if rate >= 1<<32 {
			// tbf above 34 Gbit/s (TCA_TBF_RATE64) is not an sqm use.
			return o, fmt.Errorf("tbf rate %d bit/s above 34 Gbit/s is not supported", q.TBF.RateBits)
		}
		var rs rateSpec
		rs.Rate = sat32(rate)
		if err := rateLL(&rs, q.TBF.LinkLayer, "rate", f); err != nil {
			return o, err
		}
		limit := sat32(uint64(float64(rate)*q.TBF.Latency.Seconds()) + uint64(q.TBF.Burst))
		// Like tc, also send the burst in bytes (TCA_TBF_BURST): the
		// kernel then derives the bucket from it with its own rate
		// arithmetic, and the dump shows that value.
		buffer := uint32(newRateCfg(rate, rs).l2tNS(q.TBF.Burst) >> 6)
		// struct tc_tbf_qopt: rate, peakrate, limit, buffer, mtu.
		qopt := make([]byte, 36)
		rs.put(qopt[0:12])
		binary.NativeEndian.PutUint32(qopt[24:], limit)
		binary.NativeEndian.PutUint32(qopt[28:], buffer)
		var a attrs
		a.bytes(tcaTbfRtab, tbfRateTable(rate, tick))
		a.bytes(tcaTbfParms, qopt)
		a.u32(tcaTbfBurst, q.TBF.Burst)
		o.rawOpts = a
		setFact(f, "rate", rate)
		setFact(f, "buffer", buffer)
		setFact(f, "limit", limit)
	case "pfifo", "bfifo":
		if q.Fifo == nil {
			o.tcLayout = false
			break
		}
		o.rawOpts = le32(q.Fifo.Limit) // struct tc_fifo_qopt
		setFact(f, "limit", q.Fifo.Limit)
	case "fq_codel":
		if x := q.FqCodel; x != nil {
			o.rawOpts = u32Opts(f, []u32Opt{
				{typ: 1, fact: "target_us", v: us(x.Target)},
				{typ: 2, fact: "limit", v: x.Limit},
				{typ: 3, fact: "interval_us", v: us(x.Interval)},
				flagOpt(4, "ecn", x.ECN),
				{typ: 5, fact: "flows", v: x.Flows},
				{typ: 6, fact: "quantum", v: x.Quantum},
				{typ: 7, fact: "ce_threshold_us", v: us(x.CEThreshold)},
				{typ: 8, fact: "drop_batch", v: x.DropBatch},
				{typ: 9, fact: "memory_limit", v: x.MemoryLimit},
			})
		}
	case "codel":
		if x := q.Codel; x != nil {
			o.rawOpts = u32Opts(f, []u32Opt{
				{typ: 1, fact: "target_us", v: us(x.Target)},
				{typ: 2, fact: "limit", v: x.Limit},
				{typ: 3, fact: "interval_us", v: us(x.Interval)},
				flagOpt(4, "ecn", x.ECN),
				{typ: 5, fact: "ce_threshold_us", v: us(x.CEThreshold)},
			})
		}
	case "pie":
		if x := q.Pie; x != nil {
			o.rawOpts = u32Opts(f, []u32Opt{
				{typ: 1, fact: "target_us", v: us(x.Target)},
				{typ: 2, fact: "limit", v: x.Limit},
				{typ: 3, fact: "tupdate_us", v: us(x.TUpdate)},
				{typ: 4, fact: "alpha", v: x.Alpha},
				{typ: 5, fact: "beta", v: x.Beta},
				flagOpt(6, "ecn", x.ECN),
				flagOpt(7, "bytemode", x.Bytemode),
			})
		}
	case "fq_pie":
		// fq_pie parses its options strictly and refuses them without
		// NLA_F_NESTED, which go-tc did not set ("NLA_F_NESTED is
		// missing"): sqm's own layout nests them.
		o.tcLayout = false
		if x := q.FqPie; x != nil {
			o.rawOpts = u32Opts(f, []u32Opt{
				{typ: 1, fact: "limit", v: x.Limit},
				{typ: 2, fact: "flows", v: x.Flows},
				{typ: 3, fact: "target_us", v: us(x.Target)},
				{typ: 4, fact: "tupdate_us", v: us(x.TUpdate)},
				{typ: 5, fact: "alpha", v: x.Alpha},
				{typ: 6, fact: "beta", v: x.Beta},
				{typ: 7, fact: "quantum", v: x.Quantum},
				{typ: 8, fact: "memory_limit", v: x.MemoryLimit},
				{typ: 9, fact: "ecn_prob", v: x.ECNProb},
				flagOpt(10, "ecn", x.ECN),
				flagOpt(11, "bytemode", x.Bytemode),
			})
		}
	case "sfq":
		// struct tc_sfq_qopt_v1 (72 bytes), as tc sends it: tc_sfq_qopt
		// (quantum, perturb_period, limit, divisor, flows), then depth and
		// the unused RED fields. The kernel reads depth only from a whole
		// v1 struct: go-tc sent 48 bytes, so depth was not applied.
		b := make([]byte, 72)
		if x := q.SFQ; x != nil {
			for i, v := range []uint32{x.Quantum, x.Perturb, x.Limit, x.Divisor, x.Flows, x.Depth} {
				binary.NativeEndian.PutUint32(b[4*i:], v)
			}
			for k, v := range map[string]uint32{"quantum": x.Quantum, "perturb": x.Perturb, "limit": x.Limit, "divisor": x.Divisor, "flows": x.Flows, "depth": x.Depth} {
				if v != 0 {
					setFact(f, k, v)
				}
			}
			if x.Limit != 0 && x.Flows > x.Limit {
				// sfq_change caps the flows at the limit (and dumps that).
				setFact(f, "flows", x.Limit)
			}
		}
		o.rawOpts = b
	case "cake":
		o.rawOpts, err = cakeOptions(q.Cake, f)
		if err != nil {
			return o, err
		}
	case "ingress", "clsact":
		// parameterless
		o.tcLayout = false
	default:
		return o, fmt.Errorf("qdisc kind %q: %w", q.Kind, ErrNotSupported)
	}
	if o.rawOpts == nil {
		// go-tc sent an empty TCA_OPTIONS for a kind without options;
		// sqm's own layout leaves it out.
		o.tcLayout = false
	}
	if q.Stab != nil {
		sf, raw, err := stabFor(q.Stab)
		if err != nil {
			return o, fmt.Errorf("stab: %w", err)
		}
		o.stab = raw
		for k, v := range sf {
			f[k] = v
		}
	}
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

// cakeOptions is cake's TCA_OPTIONS (TCA_CAKE_*, ascending), nil for none.
func cakeOptions(x *plan.Cake, f map[string]string) ([]byte, error) {
	if x == nil {
		return nil, nil
	}
	var a attrs
	a.u64(2, x.BandwidthBits/8) // BASE_RATE64
	setFact(f, "base_rate", x.BandwidthBits/8)
	enum := func(k, v string, m map[string]uint32) (u32Opt, error) {
		o := u32Opt{fact: k}
		if v == "" {
			return o, nil
		}
		n, ok := m[v]
		if !ok {
			return o, fmt.Errorf("cake %s %q unknown", k, v)
		}
		o.v, o.set = n, true
		return o, nil
	}
	diffserv, err := enum("diffserv", x.Diffserv, cakeDiffserv)
	if err != nil {
		return nil, err
	}
	atm, err := enum("atm", x.ATM, cakeATM)
	if err != nil {
		return nil, err
	}
	flowMode, err := enum("flow_mode", x.FlowMode, cakeFlowMode)
	if err != nil {
		return nil, err
	}
	ack, err := enum("ack_filter", x.ACKFilter, cakeACKFilter)
	if err != nil {
		return nil, err
	}
	diffserv.typ, atm.typ, flowMode.typ, ack.typ = 3, 4, 5, 16
	overhead := u32Opt{typ: 6, fact: "overhead"}
	if x.Overhead != nil {
		overhead.v, overhead.set = uint32(*x.Overhead), true
	}
	mpu := u32Opt{typ: 14, fact: "mpu"}
	if x.MPU != nil {
		mpu.v, mpu.set = *x.MPU, true
	}
	raw := u32Opt{typ: 12, fact: "raw"}
	if x.Raw != nil && *x.Raw {
		raw.v = 1
	}
	a = append(a, u32Opts(f, []u32Opt{
		diffserv, atm, flowMode, overhead,
		{typ: 7, fact: "rtt", v: us(x.RTT)},
		flagOpt(9, "autorate", x.Autorate),
		{typ: 10, fact: "memory", v: x.Memlimit},
		flagOpt(11, "nat", x.NAT),
		raw,
		flagOpt(13, "wash", x.Wash),
		mpu,
		flagOpt(15, "ingress", x.Ingress),
		ack,
		flagOpt(17, "split_gso", x.SplitGSO),
		{typ: 18, fact: "fwmark", v: x.FwMark},
	})...)
	if x.Overhead != nil {
		setFact(f, "overhead", *x.Overhead) // signed, as the dump decodes it
	}
	return a, nil
}

// htbDefaultMTU is what tc's htb assumes for the default burst.
const htbDefaultMTU = 1600

func classOp(dev string, c *plan.Class, tick float64) (op, error) {
	o := op{kind: opClass, dev: dev, handle: c.ClassID, parent: c.Parent, tcKind: "htb",
		facts: map[string]string{}, hint: qdiscHint("htb"), tcLayout: true}
	var p [htbOptLen]byte
	rate, ceil, err := htbParms(p[:], c.HTB, tick, o.facts)
	if err != nil {
		return o, err
	}
	var a attrs
	a.bytes(tcaHtbParms, p[:])
	if rate >= 1<<32 {
		a.u64(tcaHtbRate64, rate)
	}
	if ceil >= 1<<32 {
		a.u64(tcaHtbCeil64, ceil)
	}
	o.rawOpts = a
	return o, nil
}

// htbOptLen is the size of struct tc_htb_opt.
const htbOptLen = 44

// htbParms encodes h as struct tc_htb_opt (rate, ceil, buffer, cbuffer,
// quantum, level, prio) into p and returns the rate and ceil in bytes/s
// (the caller adds TCA_HTB_RATE64/CEIL64 above 32 bits). It records what
// Matches compares in f, unless f is nil: classOp and SetRate share it,
// so a changed class is encoded exactly as a created one.
func htbParms(p []byte, h *plan.HTBClass, tick float64, f map[string]string) (rate, ceilB uint64, err error) {
	if h == nil || h.RateBits == 0 {
		return 0, 0, fmt.Errorf("htb class needs a rate")
	}
	ceil := h.CeilBits
	if ceil == 0 {
		ceil = h.RateBits
	}
	rate, ceilB = h.RateBits/8, ceil/8
	var rs, cs rateSpec
	if err := rateLL(&rs, h.LinkLayer, "rate", f); err != nil {
		return 0, 0, err
	}
	if err := rateLL(&cs, h.LinkLayer, "ceil", f); err != nil {
		return 0, 0, err
	}
	rs.Rate, cs.Rate = sat32(rate), sat32(ceilB)
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
	buffer, cbuffer := xmitTicks(rate, burst, tick), xmitTicks(ceilB, cburst, tick)
	clear(p[:htbOptLen])
	rs.put(p[0:12])
	cs.put(p[12:24])
	binary.NativeEndian.PutUint32(p[24:], buffer)
	binary.NativeEndian.PutUint32(p[28:], cbuffer)
	binary.NativeEndian.PutUint32(p[32:], h.Quantum)
	binary.NativeEndian.PutUint32(p[40:], h.Prio)
	if f != nil {
		setFact(f, "rate", rate)
		setFact(f, "ceil", ceilB)
		setFact(f, "buffer", buffer)
		setFact(f, "cbuffer", cbuffer)
		setFact(f, "prio", h.Prio)
		if h.Quantum != 0 {
			setFact(f, "quantum", h.Quantum)
		}
	}
	return rate, ceilB, nil
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
	var tcActs attrs // the action list as go-tc laid it out
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
			parms := mirredParms(uint32(idx))
			tcActs.bytes(uint16(i+1), append(nlattr.Nest(2, nlattr.Attr(2, parms)), nlattr.Attr(1, cstr("mirred"))...))
			rawActs = append(rawActs, actionAttr(uint16(i+1), "mirred", nlattr.Attr(2, parms))...)
		case a.Police != nil:
			hasPolice = true
			actKinds = append(actKinds, "police")
			tbf, rtab, r64 := policeOptions(a.Police.RateBits, a.Police.Burst, a.Police.MTU, tick)
			opts := append(nlattr.Attr(tcaPoliceTbf, tbf), nlattr.Attr(tcaPoliceRate, rtab)...)
			if r64 != 0 {
				b := make([]byte, 8)
				binary.NativeEndian.PutUint64(b, r64)
				opts = append(opts, nlattr.Attr(tcaPoliceRate64, b)...)
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
			o.rawOpts = u32Options(keys, fl.FlowID, rawActs)
			break
		}
		o.tcLayout = true
		var a attrs
		a.bytes(tcaU32Sel, u32Sel(keys))
		if fl.FlowID != 0 {
			a.u32(tcaU32ClassID, uint32(fl.FlowID))
		}
		if len(tcActs) > 0 {
			a.bytes(tcaU32Act, tcActs)
		}
		o.rawOpts = a
	case "matchall":
		if hasPolice {
			var b []byte
			if fl.FlowID != 0 {
				b = append(b, nlattr.Attr(1, le32(uint32(fl.FlowID)))...)
			}
			o.rawOpts = append(b, nlattr.Nest(2, rawActs)...)
			break
		}
		o.tcLayout = true
		var a attrs
		if fl.FlowID != 0 {
			a.u32(1, uint32(fl.FlowID)) // TCA_MATCHALL_CLASSID
		}
		if len(tcActs) > 0 {
			a.bytes(2, tcActs) // TCA_MATCHALL_ACT
		}
		o.rawOpts = a
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
	slices.Sort(keys)
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

// mirredParms is struct tc_mirred (index, capab, action, refcnt, bindcnt,
// eaction, ifindex) for an egress redirect to ifindex.
func mirredParms(ifindex uint32) []byte {
	b := make([]byte, 28)
	binary.NativeEndian.PutUint32(b[8:], tcActStolen)
	binary.NativeEndian.PutUint32(b[20:], tcaEgressRedir)
	binary.NativeEndian.PutUint32(b[24:], ifindex)
	return b
}
