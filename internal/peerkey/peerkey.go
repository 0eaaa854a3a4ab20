// Package peerkey is the one place that says what unit a server facing
// strangers counts a peer in, so that every listener of sqm (the
// bufferbloat server, the RPM server, the router's page) limits the same
// thing and a client cannot slip past one of them by spreading over
// addresses another already treats as one.
package peerkey

import "net/netip"

// Of is the unit a peer's connections, sessions and streams are counted
// in: the address itself for IPv4, its /64 for IPv6. A /64 is what one
// link (one home, one LAN) gets, and any host on it can pick fresh
// addresses inside it at will (privacy addresses, or simply binding more),
// so counting IPv6 per address would limit nothing. A larger unit (/56,
// /48) would lump whole ISPs' customers together for those who hand out
// one /64 per customer. IPv4-mapped IPv6 addresses count as IPv4.
func Of(a netip.Addr) netip.Prefix {
	a = a.Unmap()
	if a.Is6() {
		p, _ := a.Prefix(64)
		return p
	}
	p, _ := a.Prefix(a.BitLen()) // invalid a gives the zero Prefix: one shared key
	return p
}

// OfAddrPort is Of for a "host:port" string as net.Conn.RemoteAddr gives
// it; one that does not parse shares the zero key with every other
// unknown peer, so it is limited rather than let through.
func OfAddrPort(s string) netip.Prefix {
	ap, err := netip.ParseAddrPort(s)
	if err != nil {
		return netip.Prefix{}
	}
	return Of(ap.Addr())
}
