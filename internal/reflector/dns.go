package reflector

import "encoding/binary"

// A DNS query is the UDP probe public resolvers answer: the built-in
// reflectors run no irtt or sqm server, and a UDP probe is what an ISP
// that prioritises or polices ICMP treats like its customers' traffic.
// The query asks for the root's A record, which every resolver answers
// from its cache with an empty answer (NOERROR, NODATA) of about 100
// bytes: round trip only, plus the resolver's cache lookup (microseconds).

const dnsQueryLen = 12 + 1 + 4

// appendDNSQuery appends a query for ". IN A" with id to b.
func appendDNSQuery(b []byte, id uint16) []byte {
	b = binary.BigEndian.AppendUint16(b, id)
	return append(b,
		0x01, 0x00, // a query, recursion desired
		0, 1, 0, 0, 0, 0, 0, 0, // one question
		0,    // the root name
		0, 1, // type A
		0, 1) // class IN
}

// parseDNSReply returns the id of a reply to such a query; ok is false
// for anything else (a query, or a reply to another question).
func parseDNSReply(b []byte) (id uint16, ok bool) {
	if len(b) < dnsQueryLen || b[2]&0x80 == 0 || binary.BigEndian.Uint16(b[4:]) != 1 {
		return 0, false
	}
	if b[12] != 0 || binary.BigEndian.Uint16(b[13:]) != 1 || binary.BigEndian.Uint16(b[15:]) != 1 {
		return 0, false
	}
	return binary.BigEndian.Uint16(b), true
}
