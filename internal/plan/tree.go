package plan

import (
	"fmt"
	"time"
)

// Handle is a tc handle or class id: major in the upper 16 bits, minor in the
// lower. It marshals as tc writes it ("1:10", "ffff:", "root").
type Handle uint32

const (
	HandleRoot    Handle = 0xFFFFFFFF // TC_H_ROOT
	HandleIngress Handle = 0xFFFFFFF1 // TC_H_INGRESS (parent of the ingress qdisc)
	HandleNone    Handle = 0
)

// MakeHandle builds major:minor.
func MakeHandle(major, minor uint16) Handle { return Handle(uint32(major)<<16 | uint32(minor)) }

func (h Handle) Major() uint16 { return uint16(h >> 16) }
func (h Handle) Minor() uint16 { return uint16(h) }

func (h Handle) String() string {
	switch h {
	case HandleRoot:
		return "root"
	case HandleIngress:
		return "ingress"
	case HandleNone:
		return "none"
	}
	if h.Minor() == 0 {
		return fmt.Sprintf("%x:", h.Major())
	}
	return fmt.Sprintf("%x:%x", h.Major(), h.Minor())
}

func (h Handle) MarshalText() ([]byte, error) { return []byte(h.String()), nil }

// Plan is the complete desired state for one shaped interface.
//
// Creation order (RenderShell writes it, kernel code must apply it so):
//
//  1. Egress tree on Interface: Qdiscs[0] (the root), then Classes in
//     slice order (parents come first), then Qdiscs[1:] (leaves), then
//     Filters in slice order.
//  2. Ingress, shaped: create the IFB; build Shaper on it as in 1; add the
//     ingress qdisc (handle ffff:, parent ingress) on Interface; set the
//     IFB up; add the Hook filters last, so traffic is never redirected
//     to an IFB that is not yet shaped and up.
//  3. Ingress, policed (IFB empty, Shaper nil): add the ingress qdisc,
//     then the Hook filters.
//
// Removal is the reverse: the ingress qdisc (which drops its filters),
// then the IFB (which drops its tree), then the root qdisc.
type Plan struct {
	Interface string `json:"interface"`
	Section   string `json:"section,omitempty"`
	Script    string `json:"script"`
	Qdisc     string `json:"qdisc"`
	// Egress is the tree on the interface's root; nil when upload is 0
	// (sqm then leaves the interface's root qdisc alone).
	Egress *Tree `json:"egress,omitempty"`
	// Ingress handles received packets; nil when download is 0.
	Ingress *Ingress `json:"ingress,omitempty"`
	// Autorate is what the daemon's controller may do with the rates;
	// nil when the section's autorate option is off.
	Autorate *Autorate `json:"autorate,omitempty"`
	// Notes are things the user should know: fallbacks taken, differences
	// from sqm-scripts that apply to this plan.
	Notes []string `json:"notes,omitempty"`
}

// Tree is the shaping tree on one device's root.
type Tree struct {
	Device   string   `json:"device"`
	RateKbit uint64   `json:"rate_kbit"`
	Qdiscs   []Qdisc  `json:"qdiscs"` // creation order: root first
	Classes  []Class  `json:"classes,omitempty"`
	Filters  []Filter `json:"filters,omitempty"`
}

// Ingress is what sqm puts on the interface's ingress hook (an ingress
// qdisc, handle ffff:) and, when shaping rather than policing, the IFB device
// the hook redirects to.
type Ingress struct {
	// IFB is the name of the IFB device sqm creates; empty for the policer.
	IFB string `json:"ifb,omitempty"`
	// Hook holds the filters attached to the ingress qdisc: a mirred
	// redirect to the IFB, or the policer.
	Hook []Filter `json:"hook"`
	// Shaper is the tree on the IFB's root; nil for the policer.
	Shaper *Tree `json:"shaper,omitempty"`
	// RateKbit is the ingress rate (for the policer, where there is no tree).
	RateKbit uint64 `json:"rate_kbit"`
}

// Qdisc is one queueing discipline. Exactly one of the kind-specific option
// pointers matching Kind is set (none for "ingress").
type Qdisc struct {
	Handle Handle `json:"handle"`
	Parent Handle `json:"parent"`
	Kind   string `json:"kind"`
	Stab   *Stab  `json:"stab,omitempty"`

	HTB     *HTB     `json:"htb,omitempty"`
	TBF     *TBF     `json:"tbf,omitempty"`
	Cake    *Cake    `json:"cake,omitempty"`
	FqCodel *FqCodel `json:"fq_codel,omitempty"`
	Codel   *Codel   `json:"codel,omitempty"`
	Pie     *Pie     `json:"pie,omitempty"`
	FqPie   *FqPie   `json:"fq_pie,omitempty"`
	SFQ     *SFQ     `json:"sfq,omitempty"`
	Fifo    *Fifo    `json:"fifo,omitempty"` // pfifo (packets) and bfifo (bytes)
}

// Stab is a size table: the kernel adds Overhead to each packet, applies
// MPU, and for LinkLayer "atm" rounds up to 53-byte cells carrying 48 bytes.
type Stab struct {
	MTU       uint32 `json:"mtu"`
	TSize     uint32 `json:"tsize"`
	MPU       uint32 `json:"mpu"`
	Overhead  int32  `json:"overhead"`
	LinkLayer string `json:"linklayer"` // "ethernet" or "atm"
}

// PacketLen is the length the kernel charges for a packet of skbLen bytes
// under this size table (net/sched/sch_api.c __qdisc_calculate_pkt_len,
// with the table iproute2's tc_calc_size_table builds): overhead added,
// rounded up to the table's cell, MPU applied, ATM cells counted, and
// extrapolated past the table's end as the kernel does. The planner sizes
// buckets with it; kernel's TestStabPacketLenMatchesTable checks it
// against the table the kernel package sends.
func (s *Stab) PacketLen(skbLen int) uint32 {
	mtu, tsize := uint64(s.MTU), uint64(s.TSize)
	if mtu == 0 {
		mtu = defaultStabMTU
	}
	if tsize == 0 {
		tsize = defaultStabTSz
	}
	noTable := s.LinkLayer != "atm" && s.MPU == 0
	l := int64(skbLen) + int64(s.Overhead)
	if l < 1 {
		l = 1
	}
	if noTable {
		return uint32(min(l, 1<<32-1))
	}
	cellLog := uint(0)
	for mtu>>cellLog > tsize-1 {
		cellLog++
	}
	entry := func(i uint64) uint64 {
		sz := max((i+1)<<cellLog, uint64(s.MPU))
		if s.LinkLayer == "atm" {
			sz = (sz + 47) / 48 * 53
		}
		return sz
	}
	sizeLog := uint(0)
	for entry(tsize-1)>>sizeLog > 0xffff {
		sizeLog++
	}
	slot := uint64(l-1) >> cellLog
	var v uint64
	if slot < tsize {
		v = entry(slot) >> sizeLog
	} else {
		v = (entry(tsize-1)>>sizeLog)*(slot/tsize) + entry(slot%tsize)>>sizeLog
	}
	return uint32(min(v<<sizeLog, 1<<32-1))
}

// HTB is the root options of an htb qdisc.
type HTB struct {
	Default uint16 `json:"default"` // minor of the default class
}

// TBF is a token bucket filter root.
type TBF struct {
	RateBits uint64        `json:"rate_bits"`
	Burst    uint32        `json:"burst"`   // bytes
	Latency  time.Duration `json:"latency"` // the kernel gets limit = rate*latency + burst
	// LinkLayer is htb_private-style link-layer accounting on the rate table.
	LinkLayer *RateLinkLayer `json:"linklayer,omitempty"`
}

// RateLinkLayer is link-layer accounting carried inside a rate spec
// (linklayer_adaptation_mechanism htb_private).
type RateLinkLayer struct {
	LinkLayer string `json:"linklayer"` // "ethernet" or "atm"
	Overhead  int32  `json:"overhead"`
	MPU       uint32 `json:"mpu"`
	MTU       uint32 `json:"mtu"`
}

// Cake options. Pointers and zero values mean "not given": cake's default.
type Cake struct {
	BandwidthBits uint64        `json:"bandwidth_bits"`      // 0: unlimited
	Diffserv      string        `json:"diffserv,omitempty"`  // diffserv3|diffserv4|diffserv8|besteffort|precedence
	FlowMode      string        `json:"flow_mode,omitempty"` // flowblind|srchost|dsthost|hosts|flows|dual-srchost|dual-dsthost|triple-isolate
	NAT           *bool         `json:"nat,omitempty"`
	Wash          *bool         `json:"wash,omitempty"`
	Ingress       *bool         `json:"ingress,omitempty"`
	ACKFilter     string        `json:"ack_filter,omitempty"` // ack-filter|ack-filter-aggressive|no-ack-filter
	SplitGSO      *bool         `json:"split_gso,omitempty"`
	Autorate      *bool         `json:"autorate_ingress,omitempty"`
	RTT           time.Duration `json:"rtt,omitempty"`
	Overhead      *int32        `json:"overhead,omitempty"`
	MPU           *uint32       `json:"mpu,omitempty"`
	ATM           string        `json:"atm,omitempty"` // noatm|atm|ptm
	Raw           *bool         `json:"raw,omitempty"` // raw: no overhead compensation at all
	Memlimit      uint32        `json:"memlimit,omitempty"`
	FwMark        uint32        `json:"fwmark,omitempty"`
}

// FqCodel options; zero means the kernel default.
type FqCodel struct {
	Limit       uint32        `json:"limit,omitempty"`
	Flows       uint32        `json:"flows,omitempty"`
	Quantum     uint32        `json:"quantum,omitempty"`
	Target      time.Duration `json:"target,omitempty"`
	Interval    time.Duration `json:"interval,omitempty"`
	ECN         *bool         `json:"ecn,omitempty"`
	MemoryLimit uint32        `json:"memory_limit,omitempty"`
	CEThreshold time.Duration `json:"ce_threshold,omitempty"`
	DropBatch   uint32        `json:"drop_batch,omitempty"`
}

// Codel options; zero means the kernel default.
type Codel struct {
	Limit       uint32        `json:"limit,omitempty"`
	Target      time.Duration `json:"target,omitempty"`
	Interval    time.Duration `json:"interval,omitempty"`
	ECN         *bool         `json:"ecn,omitempty"`
	CEThreshold time.Duration `json:"ce_threshold,omitempty"`
}

// Pie options; zero means the kernel default.
type Pie struct {
	Limit    uint32        `json:"limit,omitempty"`
	Target   time.Duration `json:"target,omitempty"`
	TUpdate  time.Duration `json:"tupdate,omitempty"`
	Alpha    uint32        `json:"alpha,omitempty"`
	Beta     uint32        `json:"beta,omitempty"`
	ECN      *bool         `json:"ecn,omitempty"`
	Bytemode *bool         `json:"bytemode,omitempty"`
}

// FqPie options; zero means the kernel default.
type FqPie struct {
	Limit       uint32        `json:"limit,omitempty"`
	Flows       uint32        `json:"flows,omitempty"`
	Target      time.Duration `json:"target,omitempty"`
	TUpdate     time.Duration `json:"tupdate,omitempty"`
	Quantum     uint32        `json:"quantum,omitempty"`
	ECN         *bool         `json:"ecn,omitempty"`
	MemoryLimit uint32        `json:"memory_limit,omitempty"`
	Alpha       uint32        `json:"alpha,omitempty"`
	Beta        uint32        `json:"beta,omitempty"`
	ECNProb     uint32        `json:"ecn_prob,omitempty"` // percent
	Bytemode    *bool         `json:"bytemode,omitempty"`
}

// SFQ options; zero means the kernel default.
type SFQ struct {
	Limit   uint32 `json:"limit,omitempty"`
	Flows   uint32 `json:"flows,omitempty"`
	Quantum uint32 `json:"quantum,omitempty"`
	Perturb uint32 `json:"perturb,omitempty"` // seconds
	Divisor uint32 `json:"divisor,omitempty"`
	Depth   uint32 `json:"depth,omitempty"`
}

// Fifo is pfifo (Limit in packets) or bfifo (Limit in bytes).
type Fifo struct {
	Limit uint32 `json:"limit"`
}

// Class is one HTB class.
type Class struct {
	ClassID Handle    `json:"classid"`
	Parent  Handle    `json:"parent"`
	HTB     *HTBClass `json:"htb"`
}

// HTBClass is an HTB class's parameters.
type HTBClass struct {
	RateBits uint64 `json:"rate_bits"`
	CeilBits uint64 `json:"ceil_bits"`
	Burst    uint32 `json:"burst,omitempty"`  // bytes; 0: htb's default
	CBurst   uint32 `json:"cburst,omitempty"` // bytes; 0: htb's default
	Quantum  uint32 `json:"quantum,omitempty"`
	Prio     uint32 `json:"prio"`
	// LinkLayer is htb_private link-layer accounting.
	LinkLayer *RateLinkLayer `json:"linklayer,omitempty"`
}

// Filter is one tc filter. Protocol is tc's name for the ethertype ("all",
// "ip", "ipv6", "arp", "802.1Q", "ppp_ses").
type Filter struct {
	Parent   Handle `json:"parent"`
	Prio     uint16 `json:"prio"`
	Protocol string `json:"protocol"`
	Kind     string `json:"kind"` // "u32", "matchall" or "bpf"
	U32      *U32   `json:"u32,omitempty"`
	// CodelPolice is the eBPF policer a "bpf" filter runs (codel_police).
	CodelPolice *CodelPolice `json:"codel_police,omitempty"`
	FlowID      Handle       `json:"flowid,omitempty"` // class the match sends packets to
	Actions     []Action     `json:"actions,omitempty"`
	// Comment says what the filter is for, rendered as a shell comment.
	Comment string `json:"comment,omitempty"`
}

// U32 is a u32 classifier: all keys must match.
type U32 struct {
	Keys []U32Key `json:"keys"`
}

// U32Key matches the 32-bit big-endian word at Off bytes from the network
// header: (word & Mask) == Val. It renders as `match u32 VAL MASK at OFF`.
type U32Key struct {
	Val  uint32 `json:"val"`
	Mask uint32 `json:"mask"`
	Off  int32  `json:"off"`
}

// Action is one tc action attached to a filter; exactly one field is set.
type Action struct {
	Mirred *Mirred `json:"mirred,omitempty"`
	Police *Police `json:"police,omitempty"`
}

// Mirred redirects the packet to the egress of Device (an IFB).
type Mirred struct {
	Device string `json:"device"`
}

// Police drops what exceeds Rate beyond a bucket of Burst bytes.
type Police struct {
	RateBits uint64 `json:"rate_bits"`
	Burst    uint32 `json:"burst"` // bytes
	MTU      uint32 `json:"mtu"`   // largest packet the bucket accepts
}

// CodelPolice is the codel_police recipe's eBPF program's parameters:
// a virtual queue drained at RateBits whose delay CoDel watches (see
// internal/codelpolice and docs/codel-police.md).
type CodelPolice struct {
	RateBits uint64 `json:"rate_bits"`
	// Target and Interval are CoDel's: signal once the virtual delay has
	// stayed above Target for Interval, then at Interval/sqrt(count).
	Target   time.Duration `json:"target"`
	Interval time.Duration `json:"interval"`
	// Limit is the virtual delay past which every packet is dropped; the
	// program saves up to half of it as credit while arrivals are below
	// the rate.
	Limit time.Duration `json:"limit"`
	// MTU is the largest frame (bytes, link-layer header included): with
	// less than one frame of debt there is no standing queue to signal.
	MTU uint32 `json:"mtu"`
	// ECN marks ECN-capable packets CE instead of dropping them.
	ECN bool `json:"ecn"`
	// Flows defers a due signal past packets of flows that sent less than
	// the average flow over the last two intervals.
	Flows bool `json:"flows"`
}

// Bounds of CodelPolice's parameters: beyond them the program's fixed-point
// arithmetic overflows or the setting makes no sense for a link.
const (
	CodelPoliceMinRate = 64_000 // bit/s, the other recipes' minimum
	// CodelPoliceMaxRate: the program's 16.16 fixed-point ns per byte
	// still resolves the cost to 1 % at this rate.
	CodelPoliceMaxRate     = 500e9       // bit/s
	CodelPoliceMaxInterval = time.Second // the control law's interval*2^32 fits 64 bits up to ~4 s
	CodelPoliceMaxLimit    = 10 * time.Second
)

// Validate reports the first parameter out of range, naming it.
func (c *CodelPolice) Validate() error {
	switch {
	case c.RateBits < CodelPoliceMinRate || c.RateBits > CodelPoliceMaxRate:
		return fmt.Errorf("codel_police: rate %d bit/s is outside %d..%d", c.RateBits, uint64(CodelPoliceMinRate), uint64(CodelPoliceMaxRate))
	case c.Interval < time.Millisecond || c.Interval > CodelPoliceMaxInterval:
		return fmt.Errorf("codel_police: interval %s is outside 1ms..%s", c.Interval, CodelPoliceMaxInterval)
	case c.Target <= 0 || c.Target >= c.Interval:
		return fmt.Errorf("codel_police: target %s must be above 0 and below the interval %s", c.Target, c.Interval)
	case c.Limit <= c.Target || c.Limit > CodelPoliceMaxLimit:
		return fmt.Errorf("codel_police: limit %s must be above the target %s and at most %s", c.Limit, c.Target, CodelPoliceMaxLimit)
	case c.MTU < 68 || c.MTU > 65536+14:
		return fmt.Errorf("codel_police: mtu %d is outside 68..65550", c.MTU)
	}
	return nil
}
