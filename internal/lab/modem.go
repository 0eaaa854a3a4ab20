package lab

import (
	"fmt"
	"math"
	"time"

	"github.com/florianl/go-tc"
	"github.com/florianl/go-tc/core"
)

// ethHeader is what netem counts on a veth beyond the IP packet: the
// 14-byte Ethernet header is part of skb->len there.
const ethHeader = 14

// Modem is one direction of the emulated bloated link, as the isp namespace
// applies it with netem on the veth that sends that way.
type Modem struct {
	RateBits uint64        // line rate, bit/s
	Delay    time.Duration // one-way propagation delay (half the base RTT)
	Limit    uint32        // FIFO length in packets: the bloat
	// LinkLayer and Overhead describe the framing the line charges, in cake's
	// terms: Overhead bytes are added to each IP packet, then for "atm" the
	// result is carried in 53-byte cells of 48 payload bytes, for "ptm" in
	// 65-byte blocks of 64 (the 64b/65b encoding of VDSL2).
	LinkLayer string
	Overhead  int
	// ICMPAhead gives ICMP its own queue, served before the FIFO (a trace
	// modem only; see applyTraceModem): pings no longer see the bloat.
	ICMPAhead bool
}

// netem returns the netem options for m. Why netem's own knobs rather than a
// size table: netem's rate emulation has a per-packet overhead and a cell
// model (packetoverhead, cellsize, celloverhead; tc-netem(8) "rate"), which
// is exactly a link that charges framing; the kernel computes the
// serialization time of each packet as
//
//	cells(len+packetoverhead, cellsize) * (cellsize+celloverhead) / rate
//
// so ATM is cellsize 48 + celloverhead 5 (53-byte cells), PTM is cellsize
// 64 + celloverhead 1 (64b/65b). packetoverhead is the link's overhead minus
// the Ethernet header netem already counts, matching cake, which strips the
// MAC header when an overhead is given.
func (m Modem) netem() (*tc.Netem, error) {
	if m.RateBits < 8 {
		return nil, fmt.Errorf("modem: rate %d bit/s is too low: give at least 8 bit/s", m.RateBits)
	}
	if m.Limit == 0 {
		return nil, fmt.Errorf("modem: buffer of 0 packets would drop everything: give --buffer 1 or more")
	}
	if m.Delay < 0 {
		return nil, fmt.Errorf("modem: negative delay %v: give a positive --rtt", m.Delay)
	}
	ns := int64(m.Delay / time.Nanosecond)
	bytesPerSec := m.RateBits / 8
	rate := &tc.NetemRate{}
	if bytesPerSec >= math.MaxUint32 {
		rate.Rate = math.MaxUint32
	} else {
		rate.Rate = uint32(bytesPerSec)
	}
	switch m.LinkLayer {
	case "", "ethernet":
		rate.PacketOverhead = int32(m.Overhead - ethHeader)
	case "atm":
		rate.PacketOverhead = int32(m.Overhead - ethHeader)
		rate.CellSize = 48
		rate.CellOverhead = 5
	case "ptm":
		rate.PacketOverhead = int32(m.Overhead - ethHeader)
		rate.CellSize = 64
		rate.CellOverhead = 1
	default:
		return nil, fmt.Errorf("modem: unknown link layer %q: use ethernet, atm or ptm", m.LinkLayer)
	}
	n := &tc.Netem{
		Qopt: tc.NetemQopt{
			// The legacy field is in psched ticks (64 ns); Latency64 (ns)
			// overrides it on kernels since 4.15. Both are sent, as tc does.
			Latency: uint32(min(ns>>6, math.MaxUint32)),
			Limit:   m.Limit,
		},
		Rate:      rate,
		Latency64: &ns,
	}
	if bytesPerSec >= math.MaxUint32 {
		n.Rate64 = &bytesPerSec
	}
	return n, nil
}

// applyModem puts m as the root qdisc of the interface ifindex, through the
// netlink socket conn (opened in the isp namespace).
func applyModem(conn *tc.Tc, ifindex uint32, m Modem) error {
	if m.ICMPAhead {
		// netem's rate is per qdisc: two bands would be two links.
		return fmt.Errorf("modem: ICMP ahead of the FIFO needs the trace modem, whose tbf carries the rate of both queues: give --trace-down or --trace-up")
	}
	opts, err := m.netem()
	if err != nil {
		return err
	}
	obj := &tc.Object{
		Msg: tc.Msg{
			Family:  0, // AF_UNSPEC
			Ifindex: ifindex,
			Handle:  core.BuildHandle(0x1, 0),
			Parent:  tc.HandleRoot,
		},
		Attribute: tc.Attribute{Kind: "netem", Netem: opts},
	}
	if err := conn.Qdisc().Replace(obj); err != nil {
		return fmt.Errorf("modem: add netem on ifindex %d: %w", ifindex, err)
	}
	return nil
}

// wireBytes is how many bytes the emulated line spends on an IP packet of
// ipLen bytes: what netem charges, in the same model (used to say what
// goodput the link can carry at most).
func (m Modem) wireBytes(ipLen int) int {
	l := ipLen + m.Overhead
	switch m.LinkLayer {
	case "atm":
		return (l + 47) / 48 * 53
	case "ptm":
		return (l + 63) / 64 * 65
	}
	return l
}
