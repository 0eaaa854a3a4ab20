package lab

import (
	"encoding/binary"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/florianl/go-tc"
	"github.com/florianl/go-tc/core"
	"golang.org/x/sys/unix"

	"sqm/internal/plan"
)

// The modem of a direction that follows a capacity trace cannot be the
// fixed modem's netem with a rate, because netem's rate is applied when a
// packet is enqueued: each packet gets its departure time then, after the
// one ahead of it, at the rate of that moment. Changed in place, the new
// rate would reach only packets arriving afterwards, while the deep FIFO's
// hundreds of packets still leave at the old one (a drop from 40 to 10
// Mbit/s would take effect a full queue later), and a stall emulated with
// a tiny rate would give the packet arriving in it a departure time
// minutes away, with every later packet queued behind it long after the
// stall ends. (netem has no rate 0: that means no limit.)
//
// So the trace modem is a tbf root carrying the rate, whose child is the
// netem with the line's one-way delay and the deep FIFO (its limit, as in
// the fixed modem; no rate). tbf decides at dequeue time, from tokens it
// counts in time, so a rate change applies at once to the whole queue, as
// capacity does on a real link; a stall is a rate of 1 byte/s, under which
// no packet earns its tokens, and the queue is kept, not dropped. Two
// details of tbf shape the rest:
//
//   - every change refills the bucket (tbf_change sets tokens to the full
//     burst), so at each change a backlogged link sends up to one burst
//     more than the rate. The burst is therefore small, traceBurst of the
//     rate but never under two full-size frames (the kernel needs one to
//     pass a packet at all); it must not be smaller either, because tokens
//     beyond the bucket are lost, and under the VM's emulated CPU the
//     queue often runs a few ms late (with 2 ms, a 12 Mbit/s step carried
//     well under its rate). At the lab's 100 ms step that is at most 5 %
//     more than the trace for traces that change every step (mahimahi's),
//     nothing for steps. The stall's bucket is one frame, so a stall
//     starts one packet late;
//   - when tbf has to wait for tokens it arms a timer for when they will
//     be there at the current rate; a rate raised later does not move that
//     timer (under a stall it is minutes away), and only an enqueue or the
//     timer runs the queue again. After a rate goes up, the lab therefore
//     sends one small datagram out of that veth (kick), which makes the
//     kernel run the queue with the new rate.
const traceBurst = 5 * time.Millisecond

// stallRate is the tbf rate of a stall, bytes/s: a full-size frame would
// need 25 minutes of tokens.
const stallRate = 1

// traceModem is the trace-following modem of one direction.
type traceModem struct {
	dev     string
	ifindex uint32
	m       Modem // delay, FIFO and framing; RateBits is the current rate
	kick    *net.UDPConn
}

// clockOnce reads the kernel's psched clock for go-tc, which sends a rate
// table along with tbf's options (the kernel uses it only for rates of no
// link layer, which the lab never gives).
var clockOnce = sync.OnceValue(core.InitializeClock)

// tbf returns the tbf options for rate bits/s (0: a stall) on m's framing.
func (m Modem) tbf(bits uint64) (*tc.Tbf, error) {
	if m.Overhead < ethHeader {
		return nil, fmt.Errorf("modem: --overhead %d is below the %d-byte Ethernet header the veth already carries: a trace modem (tbf) can only add overhead", m.Overhead, ethHeader)
	}
	rs := tc.RateSpec{Linklayer: 1, Overhead: uint16(m.Overhead - ethHeader)} // TC_LINKLAYER_ETHERNET
	switch m.LinkLayer {
	case "", "ethernet":
	case "atm":
		rs.Linklayer = 2 // TC_LINKLAYER_ATM: 53-byte cells of 48, as the fixed modem's netem
	default:
		return nil, fmt.Errorf("modem: link layer %q cannot follow a trace (tbf knows ethernet and atm framing): use --linklayer ethernet or atm with --trace-down/--trace-up", m.LinkLayer)
	}
	bytesPerSec := bits / 8
	frame := uint32(1500 + ethHeader)
	burst := 2 * frame
	if bits == 0 {
		bytesPerSec, burst = stallRate, frame
	} else if b := uint64(float64(bytesPerSec) * traceBurst.Seconds()); b > uint64(burst) {
		burst = uint32(min(b, 1<<24))
	}
	if bytesPerSec > 1<<32-1 {
		return nil, fmt.Errorf("modem: trace rate %s is above what tbf's 32-bit rate carries", FormatRate(bits))
	}
	rs.Rate = uint32(bytesPerSec)
	return &tc.Tbf{
		// limit: tbf makes a byte FIFO of it as its child when it has
		// none; the netem grafted in its place right after holds the
		// lab's packet FIFO instead, and later changes leave it alone.
		Parms: &tc.TbfQopt{Rate: rs, Limit: m.Limit * frame},
		Burst: &burst,
	}, nil
}

// applyTraceModem builds tbf (handle 1:, the rate) with netem (10:, delay
// and FIFO) under it on ifindex, at m.RateBits.
func applyTraceModem(conn *tc.Tc, ifindex uint32, m Modem) error {
	if err := clockOnce(); err != nil {
		return fmt.Errorf("modem: read the kernel's packet scheduler clock: %w", err)
	}
	tb, err := m.tbf(m.RateBits)
	if err != nil {
		return err
	}
	root := &tc.Object{
		Msg:       tc.Msg{Ifindex: ifindex, Handle: core.BuildHandle(0x1, 0), Parent: tc.HandleRoot},
		Attribute: tc.Attribute{Kind: "tbf", Tbf: tb},
	}
	if err := conn.Qdisc().Replace(root); err != nil {
		return fmt.Errorf("modem: add tbf on ifindex %d: %w", ifindex, err)
	}
	ne, err := m.netemDelay()
	if err != nil {
		return err
	}
	if m.ICMPAhead {
		return applyICMPAhead(conn, ifindex, ne)
	}
	child := &tc.Object{
		Msg:       tc.Msg{Ifindex: ifindex, Handle: core.BuildHandle(0x10, 0), Parent: core.BuildHandle(0x1, 0x1)},
		Attribute: tc.Attribute{Kind: "netem", Netem: ne},
	}
	if err := conn.Qdisc().Replace(child); err != nil {
		return fmt.Errorf("modem: add netem under tbf on ifindex %d: %w", ifindex, err)
	}
	return nil
}

// applyICMPAhead puts a prio (10:) under the trace modem's tbf instead of
// the netem: ICMP (a u32 match on the IPv4 protocol) goes to band 10:1,
// everything else to 10:2, and prio serves 10:1 first. Each band is a
// netem like ne, with the line's delay and a FIFO of its limit, so ICMP
// keeps the base delay and shares the rate (tbf above both) but never
// waits behind the bloat.
func applyICMPAhead(conn *tc.Tc, ifindex uint32, ne *tc.Netem) error {
	prio := &tc.Prio{Bands: 2}
	for i := range prio.PrioMap {
		prio.PrioMap[i] = 1 // every priority to the second band, 10:2
	}
	objs := []*tc.Object{
		{Msg: tc.Msg{Ifindex: ifindex, Handle: core.BuildHandle(0x10, 0), Parent: core.BuildHandle(0x1, 0x1)},
			Attribute: tc.Attribute{Kind: "prio", Prio: prio}},
		{Msg: tc.Msg{Ifindex: ifindex, Handle: core.BuildHandle(0x20, 0), Parent: core.BuildHandle(0x10, 0x1)},
			Attribute: tc.Attribute{Kind: "netem", Netem: ne}},
		{Msg: tc.Msg{Ifindex: ifindex, Handle: core.BuildHandle(0x30, 0), Parent: core.BuildHandle(0x10, 0x2)},
			Attribute: tc.Attribute{Kind: "netem", Netem: ne}},
	}
	for _, o := range objs {
		if err := conn.Qdisc().Replace(o); err != nil {
			return fmt.Errorf("modem: add %s %s for --icmp-ahead on ifindex %d: %w", o.Kind, plan.Handle(o.Handle), ifindex, err)
		}
	}
	// The key is the IPv4 header's third 32-bit word (TTL, protocol,
	// checksum), compared in network byte order as the kernel holds it:
	// go-tc writes the fields in the host's order, hence NativeEndian.
	band := core.BuildHandle(0x10, 0x1)
	f := &tc.Object{
		Msg: tc.Msg{Ifindex: ifindex, Parent: core.BuildHandle(0x10, 0), Info: 1<<16 | uint32(htons(unix.ETH_P_IP))},
		Attribute: tc.Attribute{Kind: "u32", U32: &tc.U32{ClassID: &band, Sel: &tc.U32Sel{
			Flags: 1, // TC_U32_TERMINAL
			NKeys: 1,
			Keys: []tc.U32Key{{
				Mask: binary.NativeEndian.Uint32([]byte{0, 0xff, 0, 0}),
				Val:  binary.NativeEndian.Uint32([]byte{0, unix.IPPROTO_ICMP, 0, 0}),
				Off:  8,
			}},
		}}},
	}
	if err := conn.Filter().Add(f); err != nil {
		return fmt.Errorf("modem: add the ICMP filter for --icmp-ahead on ifindex %d: %w", ifindex, err)
	}
	return nil
}

// htons is v in network byte order, as a host-order uint16 holds it.
func htons(v uint16) uint16 {
	return binary.NativeEndian.Uint16(binary.BigEndian.AppendUint16(nil, v))
}

// netemDelay is the netem of a trace modem: the one-way delay and the
// FIFO, no rate (tbf above it has that).
func (m Modem) netemDelay() (*tc.Netem, error) {
	if m.Limit == 0 {
		return nil, fmt.Errorf("modem: buffer of 0 packets would drop everything: give --buffer 1 or more")
	}
	if m.Delay < 0 {
		return nil, fmt.Errorf("modem: negative delay %v: give a positive --rtt", m.Delay)
	}
	ns := int64(m.Delay / time.Nanosecond)
	return &tc.Netem{
		Qopt:      tc.NetemQopt{Latency: uint32(min(ns>>6, 1<<32-1)), Limit: m.Limit},
		Latency64: &ns,
	}, nil
}

// setRate changes the tbf of tm in place to bits/s (0: a stall), through
// conn in the isp namespace; the netem under it, with its queue, stays.
func (tm *traceModem) setRate(conn *tc.Tc, bits uint64) error {
	tb, err := tm.m.tbf(bits)
	if err != nil {
		return err
	}
	obj := &tc.Object{
		Msg:       tc.Msg{Ifindex: tm.ifindex, Handle: core.BuildHandle(0x1, 0), Parent: tc.HandleRoot},
		Attribute: tc.Attribute{Kind: "tbf", Tbf: tb},
	}
	if err := conn.Qdisc().Change(obj); err != nil {
		return fmt.Errorf("modem: change the rate of %s to %s: %w", tm.dev, FormatRate(bits), err)
	}
	up := bits > tm.m.RateBits
	tm.m.RateBits = bits
	if up && tm.kick != nil {
		// See the comment on traceBurst: any enqueue runs the queue. A
		// lost datagram (a full FIFO drops it) has done that too.
		_, _ = tm.kick.Write([]byte{0})
	}
	return nil
}
