package kernel

import (
	"encoding/binary"
	"fmt"

	"sqm/internal/codelpolice"
	"sqm/internal/nlattr"
	"sqm/internal/plan"
)

// Counters are the generic statistics the kernel keeps for every qdisc and
// class (TCA_STATS2). ECNMarks comes from the kind's xstats where it has
// one (fq_codel, cake).
type Counters struct {
	Bytes          uint64 `json:"bytes"`
	Packets        uint64 `json:"packets"`
	Drops          uint32 `json:"drops"`
	Overlimits     uint32 `json:"overlimits"`
	Requeues       uint32 `json:"requeues"`
	BacklogBytes   uint32 `json:"backlog_bytes"`
	BacklogPackets uint32 `json:"backlog_packets"`
	ECNMarks       uint64 `json:"ecn_marks"`
	// RateBps/RatePps are the kernel's rate estimator, zero unless one is
	// attached (sqm attaches none; the daemon differentiates counters).
	RateBps uint64 `json:"rate_bps,omitempty"`
	RatePps uint64 `json:"rate_pps,omitempty"`
}

// DeviceStatus is everything tc shows for one device.
type DeviceStatus struct {
	Device  string        `json:"device"`
	Ifindex int           `json:"ifindex"`
	Qdiscs  []QdiscStatus `json:"qdiscs"`
	Classes []ClassStatus `json:"classes,omitempty"`
	// Filters counts the classifier rules on the device's qdiscs and
	// classes (u32 hash-table headers excluded).
	Filters int `json:"filters"`
	// CodelPolice is what the codel_police program on the ingress hook
	// counted; nil without one.
	CodelPolice *codelpolice.Counters `json:"codel_police,omitempty"`
}

// QdiscStatus is one qdisc with its counters.
type QdiscStatus struct {
	_ [0]func() // not comparable: no equality code (docs/testing.md, "Package sizes")

	Kind   string      `json:"kind"`
	Handle plan.Handle `json:"handle"`
	Parent plan.Handle `json:"parent"`
	Counters
	FqCodel *FqCodelStats `json:"fq_codel,omitempty"`
	Cake    *CakeStats    `json:"cake,omitempty"`
}

// ClassStatus is one class with its counters.
type ClassStatus struct {
	_ [0]func() // not comparable: no equality code (docs/testing.md, "Package sizes")

	Kind    string      `json:"kind"`
	ClassID plan.Handle `json:"classid"`
	Parent  plan.Handle `json:"parent"`
	Counters
	HTB *HTBClassStats `json:"htb,omitempty"`
}

// FqCodelStats is struct tc_fq_codel_qd_stats.
type FqCodelStats struct {
	MaxPacket      uint32 `json:"maxpacket"`
	DropOverlimit  uint32 `json:"drop_overlimit"`
	ECNMark        uint32 `json:"ecn_mark"`
	NewFlowCount   uint32 `json:"new_flow_count"`
	NewFlowsLen    uint32 `json:"new_flows_len"`
	OldFlowsLen    uint32 `json:"old_flows_len"`
	CEMark         uint32 `json:"ce_mark"`
	MemoryUsage    uint32 `json:"memory_usage"`
	DropOvermemory uint32 `json:"drop_overmemory"`
}

// HTBClassStats is struct tc_htb_xstats. Tokens are in psched ticks (64 ns).
type HTBClassStats struct {
	Lends   uint32 `json:"lends"`
	Borrows uint32 `json:"borrows"`
	Giants  uint32 `json:"giants"`
	Tokens  int32  `json:"tokens"`
	CTokens int32  `json:"ctokens"`
}

// CakeStats is cake's TCA_CAKE_STATS_* nest.
type CakeStats struct {
	CapacityEstimate uint64    `json:"capacity_estimate_bps"` // bytes/s
	MemoryLimit      uint32    `json:"memory_limit"`
	MemoryUsed       uint32    `json:"memory_used"`
	AvgNetOff        uint32    `json:"avg_netoff"`
	MinNetLen        uint32    `json:"min_netlen"`
	MaxNetLen        uint32    `json:"max_netlen"`
	MinAdjLen        uint32    `json:"min_adjlen"`
	MaxAdjLen        uint32    `json:"max_adjlen"`
	Tins             []CakeTin `json:"tins"`
}

// CakeTin is one tin of TCA_CAKE_STATS_TIN_STATS. Delays are microseconds,
// ThresholdRate bytes/s.
type CakeTin struct {
	ThresholdRate     uint64 `json:"threshold_rate"`
	TargetUS          uint32 `json:"target_us"`
	IntervalUS        uint32 `json:"interval_us"`
	PeakDelayUS       uint32 `json:"peak_delay_us"`
	AvgDelayUS        uint32 `json:"avg_delay_us"`
	BaseDelayUS       uint32 `json:"base_delay_us"`
	SentPackets       uint32 `json:"sent_packets"`
	SentBytes         uint64 `json:"sent_bytes"`
	DroppedPackets    uint32 `json:"dropped_packets"`
	DroppedBytes      uint64 `json:"dropped_bytes"`
	ACKDropPackets    uint32 `json:"ack_drops"`
	ACKDropBytes      uint64 `json:"ack_drop_bytes"`
	ECNMarkedPackets  uint32 `json:"ecn_marks"`
	ECNMarkedBytes    uint64 `json:"ecn_marked_bytes"`
	BacklogPackets    uint32 `json:"backlog_packets"`
	BacklogBytes      uint32 `json:"backlog_bytes"`
	WayIndirectHits   uint32 `json:"way_indirect_hits"`
	WayMisses         uint32 `json:"way_misses"`
	WayCollisions     uint32 `json:"way_collisions"`
	SparseFlows       uint32 `json:"sparse_flows"`
	BulkFlows         uint32 `json:"bulk_flows"`
	UnresponsiveFlows uint32 `json:"unresponsive_flows"`
	MaxSkbLen         uint32 `json:"max_skblen"`
	FlowQuantum       uint32 `json:"flow_quantum"`
}

// Status returns every qdisc and class on the devices with their counters.
// A device that does not exist is an error wrapping ErrNoLink.
func (c *Conn) Status(devices ...string) ([]DeviceStatus, error) {
	out := make([]DeviceStatus, 0, len(devices))
	for _, dev := range devices {
		l, err := c.linkByName(dev)
		if err != nil {
			return nil, fmt.Errorf("status: %w", err)
		}
		t, err := c.readTree(l.Index)
		if err != nil {
			return nil, fmt.Errorf("status of %s: %w", dev, err)
		}
		ds := DeviceStatus{Device: dev, Ifindex: l.Index, Filters: len(t.filters)}
		if ds.CodelPolice, err = codelPoliceStatus(t); err != nil {
			return nil, fmt.Errorf("status of %s: %w", dev, err)
		}
		for _, q := range t.qdiscs {
			qs := QdiscStatus{Kind: q.Kind, Handle: q.Handle, Parent: q.Parent, Counters: q.Stats}
			switch q.Kind {
			case "fq_codel":
				qs.FqCodel = decodeFqCodelXStats(q.XStats)
				if qs.FqCodel != nil {
					qs.ECNMarks = uint64(qs.FqCodel.ECNMark)
				}
			case "cake":
				qs.Cake = decodeCakeXStats(q.XStats)
				if qs.Cake != nil {
					for _, tin := range qs.Cake.Tins {
						qs.ECNMarks += uint64(tin.ECNMarkedPackets)
					}
				}
			}
			ds.Qdiscs = append(ds.Qdiscs, qs)
		}
		for _, cl := range t.classes {
			cs := ClassStatus{Kind: cl.Kind, ClassID: cl.Handle, Parent: cl.Parent, Counters: cl.Stats}
			if cl.Kind == "htb" && len(cl.XStats) >= 20 {
				x := cl.XStats
				cs.HTB = &HTBClassStats{
					Lends: u32At(x, 0), Borrows: u32At(x, 4), Giants: u32At(x, 8),
					Tokens: int32(u32At(x, 12)), CTokens: int32(u32At(x, 16)),
				}
			}
			ds.Classes = append(ds.Classes, cs)
		}
		out = append(out, ds)
	}
	return out, nil
}

// decodeFqCodelXStats decodes struct tc_fq_codel_xstats of type qdisc.
func decodeFqCodelXStats(x []byte) *FqCodelStats {
	if len(x) < 4+24 || binary.NativeEndian.Uint32(x) != 0 { // TCA_FQ_CODEL_XSTATS_QDISC
		return nil
	}
	x = x[4:]
	return &FqCodelStats{
		MaxPacket: u32At(x, 0), DropOverlimit: u32At(x, 4), ECNMark: u32At(x, 8),
		NewFlowCount: u32At(x, 12), NewFlowsLen: u32At(x, 16), OldFlowsLen: u32At(x, 20),
		CEMark: u32At(x, 24), MemoryUsage: u32At(x, 28), DropOvermemory: u32At(x, 32),
	}
}

// Cake statistics attributes (linux/pkt_sched.h TCA_CAKE_STATS_*).
const (
	cakeStatsCapacityEstimate64 = 2
	cakeStatsMemoryLimit        = 3
	cakeStatsMemoryUsed         = 4
	cakeStatsAvgNetoff          = 5
	cakeStatsMinNetlen          = 6
	cakeStatsMaxNetlen          = 7
	cakeStatsMinAdjlen          = 8
	cakeStatsMaxAdjlen          = 9
	cakeStatsTinStats           = 10
)

// decodeCakeXStats decodes cake's nested statistics; nil if x is empty.
func decodeCakeXStats(x []byte) *CakeStats {
	if len(x) == 0 {
		return nil
	}
	ad := nlattr.NewDecoder(x)
	s := &CakeStats{}
	for ad.Next() {
		v := ad.Bytes()
		switch ad.Type() {
		case cakeStatsCapacityEstimate64:
			s.CapacityEstimate = scalar(v)
		case cakeStatsMemoryLimit:
			s.MemoryLimit = uint32(scalar(v))
		case cakeStatsMemoryUsed:
			s.MemoryUsed = uint32(scalar(v))
		case cakeStatsAvgNetoff:
			s.AvgNetOff = uint32(scalar(v))
		case cakeStatsMinNetlen:
			s.MinNetLen = uint32(scalar(v))
		case cakeStatsMaxNetlen:
			s.MaxNetLen = uint32(scalar(v))
		case cakeStatsMinAdjlen:
			s.MinAdjLen = uint32(scalar(v))
		case cakeStatsMaxAdjlen:
			s.MaxAdjLen = uint32(scalar(v))
		case cakeStatsTinStats:
			// One nest per tin, typed 1..n in tin order.
			tins := attrMap(v)
			for i := uint16(1); ; i++ {
				tb, ok := tins[i]
				if !ok {
					break
				}
				s.Tins = append(s.Tins, decodeCakeTin(attrMap(tb)))
			}
		}
	}
	if ad.Err() != nil {
		return nil
	}
	return s
}

// TCA_CAKE_TIN_STATS_* the autorate counters read (cakeTinSums); the
// rest are numbered in decodeCakeTin.
const (
	cakeTinECNMarkedPackets = 8
	cakeTinAvgDelayUS       = 19
)

func decodeCakeTin(a map[uint16][]byte) CakeTin {
	g := func(t uint16) uint64 { return scalar(a[t]) }
	return CakeTin{
		SentPackets:       uint32(g(2)),
		SentBytes:         g(3),
		DroppedPackets:    uint32(g(4)),
		DroppedBytes:      g(5),
		ACKDropPackets:    uint32(g(6)),
		ACKDropBytes:      g(7),
		ECNMarkedPackets:  uint32(g(cakeTinECNMarkedPackets)),
		ECNMarkedBytes:    g(9),
		BacklogPackets:    uint32(g(10)),
		BacklogBytes:      uint32(g(11)),
		ThresholdRate:     g(12),
		TargetUS:          uint32(g(13)),
		IntervalUS:        uint32(g(14)),
		WayIndirectHits:   uint32(g(15)),
		WayMisses:         uint32(g(16)),
		WayCollisions:     uint32(g(17)),
		PeakDelayUS:       uint32(g(18)),
		AvgDelayUS:        uint32(g(cakeTinAvgDelayUS)),
		BaseDelayUS:       uint32(g(20)),
		SparseFlows:       uint32(g(21)),
		BulkFlows:         uint32(g(22)),
		UnresponsiveFlows: uint32(g(23)),
		MaxSkbLen:         uint32(g(24)),
		FlowQuantum:       uint32(g(25)),
	}
}

// tree is a device's qdiscs, classes and filters.
type tree struct {
	qdiscs, classes, filters []object
}

// root returns the qdisc attached at the device root, or nil.
func (t *tree) root() *object {
	for i := range t.qdiscs {
		if t.qdiscs[i].Parent == plan.HandleRoot {
			return &t.qdiscs[i]
		}
	}
	return nil
}

// ingress returns the ingress or clsact qdisc, or nil.
func (t *tree) ingress() *object {
	for i := range t.qdiscs {
		if t.qdiscs[i].Parent == plan.HandleIngress {
			return &t.qdiscs[i]
		}
	}
	return nil
}

// readTree dumps a device: its qdiscs, their classes, and the filters on
// every qdisc and class.
func (c *Conn) readTree(ifindex int) (*tree, error) {
	t := &tree{}
	var err error
	if t.qdiscs, err = c.dump(dumpQdiscs, ifindex, 0); err != nil {
		return nil, err
	}
	all, err := c.dump(dumpClasses, ifindex, 0)
	if err != nil {
		return nil, err
	}
	for _, cl := range all {
		// Flow queues of fq_codel, cake, sfq and fq_pie are dumped as
		// classes; they come and go with traffic and are not sqm's.
		switch cl.Kind {
		case "fq_codel", "cake", "sfq", "fq_pie":
			continue
		}
		t.classes = append(t.classes, cl)
	}
	parents := make([]plan.Handle, 0, len(t.qdiscs)+len(t.classes))
	for _, q := range t.qdiscs {
		if q.Handle.Major() != 0 && q.Handle.Minor() == 0 {
			parents = append(parents, q.Handle)
		}
	}
	for _, cl := range t.classes {
		parents = append(parents, cl.Handle)
	}
	for _, p := range parents {
		fs, err := c.dump(dumpFilters, ifindex, p)
		if err != nil {
			return nil, err
		}
		for _, f := range fs {
			// The kernel dumps a u32 hash table (node 0 of a handle) as
			// its own entry; it is not a rule.
			if f.Kind == "u32" && f.Handle&0xfff == 0 {
				continue
			}
			if f.Kind == "" {
				continue
			}
			// cls_bpf dumps the classifier itself (no handle, no
			// options) before its programs; it is not a rule either.
			if f.Kind == "bpf" && f.Handle == 0 {
				continue
			}
			t.filters = append(t.filters, f)
		}
	}
	return t, nil
}
