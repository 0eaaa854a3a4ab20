package plan

import "strconv"

// dscpClass is one row of sqm-scripts' `diffserv` map (§3.2, §7.13): a
// TOS byte value (DSCP << 2), compared under mask 0xfc so ECN bits are
// ignored, and the class it goes to.
type dscpClass struct {
	tos   uint8
	hex   string // tos as written in comments
	name  string
	class uint16 // minor of 1:x
}

func dscpMap() []dscpClass {
	return []dscpClass{
		{0x00, "0x00", "CS0/BE", 0x12},
		{0x20, "0x20", "CS1", 0x13},
		{0x10, "0x10", "TOS low-delay", 0x11},
		{0xb8, "0xb8", "EF", 0x11},
		{0xc0, "0xc0", "CS6", 0x11},
		{0xe0, "0xe0", "CS7", 0x11},
		{0x90, "0x90", "AF42", 0x11},
	}
}

// encap is a way an IP packet can appear to tc: protocol is the skb
// protocol tc matches on, guard the keys that select the inner IP
// version, and off where the IP header starts relative to the network
// header tc's u32 offsets count from.
type encap struct {
	protocol string
	name     string
	v6       bool
	off      int32
	guard    []U32Key
}

// encaps are plain IPv4/IPv6, IP inside PPPoE session frames (seen when
// shaping the Ethernet device under a PPPoE link: the network header is
// the 6-byte PPPoE header, then the 2-byte PPP protocol, 0x0021 IPv4 or
// 0x0057 IPv6, in the low half of the word at offset 4; IP starts at 8),
// and IP inside an 802.1Q tag that is still in the packet data (not
// offloaded: the network header is the tag, whose low half-word at 0 is
// the inner ethertype; IP starts at 4).
func encaps() []encap {
	return []encap{
		{protocol: "ip", name: "IPv4"},
		{protocol: "ipv6", name: "IPv6", v6: true},
		{protocol: "ppp_ses", name: "PPPoE IPv4", off: 8, guard: []U32Key{{Val: 0x0021, Mask: 0xffff, Off: 4}}},
		{protocol: "ppp_ses", name: "PPPoE IPv6", v6: true, off: 8, guard: []U32Key{{Val: 0x0057, Mask: 0xffff, Off: 4}}},
		{protocol: "802.1Q", name: "VLAN IPv4", off: 4, guard: []U32Key{{Val: 0x0800, Mask: 0xffff, Off: 0}}},
		{protocol: "802.1Q", name: "VLAN IPv6", v6: true, off: 4, guard: []U32Key{{Val: 0x86dd, Mask: 0xffff, Off: 0}}},
	}
}

// dscpKey matches the DSCP (TOS byte under 0xfc): byte 1 of the IPv4
// header, or the traffic class in bits 27..20 of the IPv6 header's first
// word.
func (e encap) dscpKey(tos uint8) U32Key {
	if e.v6 {
		return U32Key{Val: uint32(tos) << 20, Mask: 0x0fc00000, Off: e.off}
	}
	return U32Key{Val: uint32(tos) << 16, Mask: 0x00fc0000, Off: e.off}
}

// icmpKey matches ICMP: IPv4 protocol 1 (byte 9) or IPv6 next header 58
// (byte 6; a packet with extension headers before ICMPv6 is not seen).
func (e encap) icmpKey() U32Key {
	if e.v6 {
		return U32Key{Val: 58 << 8, Mask: 0x0000ff00, Off: e.off + 4}
	}
	return U32Key{Val: 1 << 16, Mask: 0x00ff0000, Off: e.off + 8}
}

// dscpFilters is simple.qos's classifier as u32 filters on parent, used in
// both directions: ICMP/ICMPv6 to bulk (1:13) first, so it is bulk whatever
// its DSCP, as sqm-scripts intends; then the DSCP map for every
// encapsulation; then a catch-all to best effort (1:12) at prio 999. Every
// filter has its own prio, because the kernel keeps one u32 table per
// prio and protocol and refuses a second protocol on a used prio.
func dscpFilters(parent Handle) []Filter {
	encaps, dscpMap := encaps(), dscpMap()
	n := len(encaps)*(len(dscpMap)+1) + 1
	fs := make([]Filter, 0, n)
	// One allocation each for the selectors and their keys (at most two
	// keys a filter): Build runs this for both directions of every plan.
	sels := make([]U32, 0, n)
	keys := make([]U32Key, 0, 2*n)
	sel := func(ks ...U32Key) *U32 {
		start := len(keys)
		keys = append(keys, ks...)
		sels = append(sels, U32{Keys: keys[start:len(keys):len(keys)]})
		return &sels[len(sels)-1]
	}
	prio := uint16(1)
	add := func(e encap, k U32Key, class uint16, what string) {
		var u *U32
		if len(e.guard) > 0 {
			u = sel(e.guard[0], k)
		} else {
			u = sel(k)
		}
		fs = append(fs, Filter{
			Parent: parent, Prio: prio, Protocol: e.protocol, Kind: "u32",
			U32: u, FlowID: MakeHandle(1, class),
			Comment: e.name + " " + what + " -> 1:" + strconv.FormatUint(uint64(class), 16),
		})
		prio++
	}
	for _, e := range encaps {
		icmp := "ICMP"
		if e.v6 {
			icmp = "ICMPv6"
		}
		add(e, e.icmpKey(), 0x13, icmp)
	}
	for _, e := range encaps {
		for _, d := range dscpMap {
			add(e, e.dscpKey(d.tos), d.class, "DSCP "+d.name+" (tos "+d.hex+")")
		}
	}
	fs = append(fs, Filter{
		Parent: parent, Prio: 999, Protocol: "all", Kind: "u32",
		U32: sel(U32Key{}), FlowID: MakeHandle(1, 0x12),
		Comment: "everything else -> 1:12 (best effort)",
	})
	return fs
}
