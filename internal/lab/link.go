package lab

import (
	"fmt"
	"time"

	"sqm/internal/units"
)

// Link is the emulated broadband line the isp namespace plays: the modem's
// rates, the base round-trip time, the depth of its FIFO and the framing the
// line charges. The zero value is not useful; start from DefaultLink.
type Link struct {
	DownBits  uint64        `json:"down_bits"`      // towards the client, bit/s
	UpBits    uint64        `json:"up_bits"`        // towards the server, bit/s
	RTT       time.Duration `json:"rtt_ns"`         // base round trip, half each way
	Buffer    uint32        `json:"buffer_packets"` // netem FIFO length (the bloat)
	LinkLayer string        `json:"linklayer"`      // ethernet, atm or ptm
	// Overhead is the per-packet overhead in bytes added to each IP packet
	// (cake's meaning). -1 means the link layer's default (see Resolve).
	Overhead int `json:"overhead"`
	// ICMPAhead puts ICMP in its own queue ahead of the FIFO, both ways,
	// as an ISP that treats ICMP apart does: a controller that sees the
	// queue only through pings sees none. Trace runs only.
	ICMPAhead bool `json:"icmp_ahead,omitempty"`
}

// DefaultLink is the README §3 testbed: 20/5 Mbit/s, 20 ms, 1000 packets.
// With it, an unshaped RRUL run sees hundreds of ms of queueing delay.
func DefaultLink() Link {
	return Link{DownBits: 20_000_000, UpBits: 5_000_000, RTT: 20 * time.Millisecond,
		Buffer: 1000, LinkLayer: "ethernet", Overhead: -1}
}

// Default per-packet overheads when --overhead is not given. Ethernet 14 is
// the MAC header the veth already carries, so netem charges the frame as it
// is; atm 44 is sqm-scripts' usual ADSL advice (PPPoE over LLC/SNAP with
// the Ethernet header and FCS); ptm 30 is cake's "pppoe-ptm".
var defaultOverhead = map[string]int{"ethernet": ethHeader, "atm": 44, "ptm": 30}

// Resolve fills defaults and checks l, returning an error naming the flag
// to fix.
func (l Link) Resolve() (Link, error) {
	if l.LinkLayer == "" {
		l.LinkLayer = "ethernet"
	}
	def, ok := defaultOverhead[l.LinkLayer]
	if !ok {
		return l, fmt.Errorf("lab: --linklayer %q is not known: use ethernet, atm or ptm", l.LinkLayer)
	}
	if l.Overhead < 0 {
		l.Overhead = def
	}
	if l.Overhead > 256 {
		return l, fmt.Errorf("lab: --overhead %d is more than 256 bytes: give the framing overhead per packet", l.Overhead)
	}
	if l.DownBits < 64_000 || l.UpBits < 64_000 {
		return l, fmt.Errorf("lab: --down %s / --up %s: rates below 64kbit cannot carry a test; give e.g. --down 20mbit",
			FormatRate(l.DownBits), FormatRate(l.UpBits))
	}
	if l.DownBits > 10_000_000_000 || l.UpBits > 10_000_000_000 {
		return l, fmt.Errorf("lab: rates above 10gbit cannot be emulated by netem on veth; give a lower --down/--up")
	}
	if l.RTT < 0 || l.RTT > 10*time.Second {
		return l, fmt.Errorf("lab: --rtt %v is out of range: give 0 to 10s", l.RTT)
	}
	if l.Buffer == 0 {
		return l, fmt.Errorf("lab: --buffer 0 would drop every packet: give 1 or more packets")
	}
	return l, nil
}

// Modems returns the two netem directions of l (l must be resolved).
func (l Link) Modems() (down, up Modem) {
	m := Modem{Delay: l.RTT / 2, Limit: l.Buffer, LinkLayer: l.LinkLayer, Overhead: l.Overhead, ICMPAhead: l.ICMPAhead}
	down, up = m, m
	down.RateBits, up.RateBits = l.DownBits, l.UpBits
	return down, up
}

// tcpPayload is what a full-size TCP segment carries over a 1500-byte MTU
// with timestamps (MSS 1448).
const tcpPayload = 1448

// Efficiency is the share of the line rate that full-size TCP segments can
// carry as goodput (payload over what the line charges for the packet).
func (l Link) Efficiency() float64 {
	m, _ := l.Modems()
	return float64(tcpPayload) / float64(m.wireBytes(1500))
}

// FormatRate writes bits/s the way tc does ("20Mbit", "4500Kbit").
func FormatRate(bits uint64) string { return units.FormatRate(bits) }
