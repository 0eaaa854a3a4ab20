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

// dscpMap is static data, read only (a function building it on each
// call costs code and an equality function).
var dscpMap = []dscpClass{
	{0x00, "0x00", "CS0/BE", 0x12},
	{0x20, "0x20", "CS1", 0x13},
	{0x10, "0x10", "TOS low-delay", 0x11},
	{0xb8, "0xb8", "EF", 0x11},
	{0xc0, "0xc0", "CS6", 0x11},
	{0xe0, "0xe0", "CS7", 0x11},
	{0x90, "0x90", "AF42", 0x11},
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

// encaps are the ways simple.qos finds the IP header, in filter order:
//
//   - plain IPv4 and IPv6;
//   - PPPoE session frames (protocol ppp_ses), seen when shaping the
//     Ethernet device under a PPPoE link: the network header is the 6-byte
//     PPPoE header, the PPP protocol (0x0021 IPv4, 0x0057 IPv6) is the low
//     half of the word at 4, the IP header starts at 8;
//   - 802.1Q with the tag still in the packet data: the network header is
//     the tag, the inner ethertype the low half of the word at 0, the IP
//     header at 4 (its version nibble is checked too);
//   - 802.1Q with the tag in skb metadata, which is what Linux does almost
//     always (receive untags before tc, VLAN devices and bridges tag on
//     transmit after the qdisc, packet sockets move the network header past
//     the tag since 6.x): tc still reports protocol 802.1Q, but the network
//     header is the inner packet, so IP is told from PPPoE by the IP
//     version nibble or the PPPoE version/type byte 0x11. The test
//     TestClassifierHostKernel found this: in-data offsets never matched.
//
// The in-data entries come first and carry the stricter guards (ethertype
// and version), so a packet of the other kind cannot pass them by chance.
func encaps() []encap {
	ver4 := U32Key{Val: 0x40000000, Mask: 0xf0000000}
	ver6 := U32Key{Val: 0x60000000, Mask: 0xf0000000}
	at := func(k U32Key, off int32) U32Key { k.Off = off; return k }
	pppoeV1 := U32Key{Val: 0x11000000, Mask: 0xff000000} // PPPoE version 1, type 1
	return []encap{
		{protocol: "ip", name: "IPv4"},
		{protocol: "ipv6", name: "IPv6", v6: true},
		{protocol: "ppp_ses", name: "PPPoE IPv4", off: 8, guard: []U32Key{{Val: 0x0021, Mask: 0xffff, Off: 4}}},
		{protocol: "ppp_ses", name: "PPPoE IPv6", v6: true, off: 8, guard: []U32Key{{Val: 0x0057, Mask: 0xffff, Off: 4}}},
		{protocol: "802.1Q", name: "VLAN (tag in data) IPv4", off: 4, guard: []U32Key{{Val: 0x0800, Mask: 0xffff}, at(ver4, 4)}},
		{protocol: "802.1Q", name: "VLAN (tag in data) IPv6", v6: true, off: 4, guard: []U32Key{{Val: 0x86dd, Mask: 0xffff}, at(ver6, 4)}},
		{protocol: "802.1Q", name: "VLAN IPv4", guard: []U32Key{ver4}},
		{protocol: "802.1Q", name: "VLAN IPv6", v6: true, guard: []U32Key{ver6}},
		{protocol: "802.1Q", name: "VLAN PPPoE IPv4", off: 8, guard: []U32Key{pppoeV1, {Val: 0x0021, Mask: 0xffff, Off: 4}}},
		{protocol: "802.1Q", name: "VLAN PPPoE IPv6", v6: true, off: 8, guard: []U32Key{pppoeV1, {Val: 0x0057, Mask: 0xffff, Off: 4}}},
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
// both directions: the DSCP map for every encapsulation first, then
// ICMP/ICMPv6 to bulk (1:13) for ICMP whose DSCP the map does not name,
// then a catch-all to best effort (1:12) at prio 999. The DSCP filters
// come first as in sqm-scripts, whose fw-mark filters (the DSCP marks)
// sit before its ICMP rule: a ping marked EF (ping -Q 0xb8) is priority
// there and here, not bulk. Every filter has its own prio, because the
// kernel keeps one u32 table per prio and protocol and refuses a second
// protocol on a used prio.
func dscpFilters(parent Handle) []Filter {
	encaps := encaps()
	n := len(encaps)*(len(dscpMap)+1) + 1
	fs := make([]Filter, 0, n)
	// One allocation each for the selectors and their keys (at most three
	// keys a filter): Build runs this for both directions of every plan.
	sels := make([]U32, 0, n)
	keys := make([]U32Key, 0, 3*n)
	sel := func(guard []U32Key, k U32Key) *U32 {
		start := len(keys)
		keys = append(append(keys, guard...), k)
		sels = append(sels, U32{Keys: keys[start:len(keys):len(keys)]})
		return &sels[len(sels)-1]
	}
	prio := uint16(1)
	add := func(e encap, k U32Key, class uint16, what string) {
		u := sel(e.guard, k)
		fs = append(fs, Filter{
			Parent: parent, Prio: prio, Protocol: e.protocol, Kind: "u32",
			U32: u, FlowID: MakeHandle(1, class),
			Comment: e.name + " " + what + " -> 1:" + strconv.FormatUint(uint64(class), 16),
		})
		prio++
	}
	for _, e := range encaps {
		for _, d := range dscpMap {
			add(e, e.dscpKey(d.tos), d.class, "DSCP "+d.name+" (tos "+d.hex+")")
		}
	}
	for _, e := range encaps {
		icmp := "ICMP"
		if e.v6 {
			icmp = "ICMPv6"
		}
		add(e, e.icmpKey(), 0x13, icmp)
	}
	fs = append(fs, Filter{
		Parent: parent, Prio: 999, Protocol: "all", Kind: "u32",
		U32: sel(nil, U32Key{}), FlowID: MakeHandle(1, 0x12),
		Comment: "everything else -> 1:12 (best effort)",
	})
	return fs
}
