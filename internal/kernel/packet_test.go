package kernel

import (
	"encoding/binary"
	"net"
	"testing"

	"golang.org/x/sys/unix"

	"sqm/internal/plan"
)

// DSCP code points used by the classification proof (simple.qos tiers:
// EF -> 1:11 priority, CS1 -> 1:13 background, BE -> 1:12 best effort).
const (
	dscpEF  = 46
	dscpCS1 = 8
	dscpBE  = 0
)

// ipv4Packet is a minimal IPv4/UDP packet with the given DSCP.
func ipv4Packet(dscp uint8) []byte {
	p := make([]byte, 28)
	p[0] = 0x45
	p[1] = dscp << 2
	binary.BigEndian.PutUint16(p[2:], uint16(len(p)))
	p[8], p[9] = 64, unix.IPPROTO_UDP
	copy(p[12:], net.IPv4(10, 99, 0, 1).To4())
	copy(p[16:], net.IPv4(10, 99, 0, 2).To4())
	var sum uint32
	for i := 0; i < 20; i += 2 {
		sum += uint32(binary.BigEndian.Uint16(p[i:]))
	}
	for sum > 0xffff {
		sum = sum&0xffff + sum>>16
	}
	binary.BigEndian.PutUint16(p[10:], ^uint16(sum))
	binary.BigEndian.PutUint16(p[20:], 9) // src port
	binary.BigEndian.PutUint16(p[22:], 9) // dst port (discard)
	binary.BigEndian.PutUint16(p[24:], 8) // udp length
	return p
}

// ipv6Packet is a minimal IPv6/UDP packet with the given DSCP.
func ipv6Packet(dscp uint8) []byte {
	p := make([]byte, 48)
	binary.BigEndian.PutUint32(p[0:], 6<<28|uint32(dscp)<<22)
	binary.BigEndian.PutUint16(p[4:], 8)
	p[6], p[7] = unix.IPPROTO_UDP, 64
	copy(p[8:], net.ParseIP("fd00:99::1"))
	copy(p[24:], net.ParseIP("fd00:99::2"))
	binary.BigEndian.PutUint16(p[40:], 9)
	binary.BigEndian.PutUint16(p[42:], 9)
	binary.BigEndian.PutUint16(p[44:], 8)
	return p
}

// pppoe wraps an IP packet in a PPPoE session header and PPP protocol
// field (0x0021 IPv4, 0x0057 IPv6).
func pppoe(pppProto uint16, ip []byte) []byte {
	h := make([]byte, 8, 8+len(ip))
	h[0] = 0x11 // version 1, type 1
	h[1] = 0    // session data
	binary.BigEndian.PutUint16(h[2:], 0x1234)
	binary.BigEndian.PutUint16(h[4:], uint16(2+len(ip)))
	binary.BigEndian.PutUint16(h[6:], pppProto)
	return append(h, ip...)
}

// frame is an Ethernet frame with the given ethertype and payload.
func frame(dst, src net.HardwareAddr, ethertype uint16, payload []byte) []byte {
	f := make([]byte, 14, 14+len(payload))
	copy(f[0:], dst)
	copy(f[6:], src)
	binary.BigEndian.PutUint16(f[12:], ethertype)
	return append(f, payload...)
}

// sendFrames sends raw frames out of dev through its egress qdisc with an
// AF_PACKET socket (in the namespace ns runs on). The link-layer protocol
// given to the kernel becomes skb->protocol, which tc filters match on.
func sendFrames(t *testing.T, ns *testNS, dev string, frames [][]byte) {
	t.Helper()
	var err error
	ns.Do(func() {
		var ifi *net.Interface
		ifi, err = net.InterfaceByName(dev)
		if err != nil {
			return
		}
		var fd int
		fd, err = unix.Socket(unix.AF_PACKET, unix.SOCK_RAW, 0)
		if err != nil {
			return
		}
		defer unix.Close(fd)
		for _, f := range frames {
			sa := &unix.SockaddrLinklayer{Ifindex: ifi.Index, Protocol: htons(binary.BigEndian.Uint16(f[12:])), Halen: 6}
			copy(sa.Addr[:], f[0:6])
			if err = unix.Sendto(fd, f, 0, sa); err != nil {
				return
			}
		}
	})
	if err != nil {
		t.Fatalf("send frames on %s: %v", dev, err)
	}
}

// wanMACs returns the addresses of the test veth pair wan0 (source) and
// wan1 (destination), for frames sent out of wan0.
func wanMACs(ns *testNS) (src, dst net.HardwareAddr) {
	ns.Do(func() {
		a, _ := net.InterfaceByName("wan0")
		b, _ := net.InterfaceByName("wan1")
		src, dst = a.HardwareAddr, b.HardwareAddr
	})
	return src, dst
}

// dscpProof shapes wan0 with simple.qos and checks where EF, CS1 and BE
// packets land, for plain and PPPoE-encapsulated IPv4 and IPv6.
func dscpProof(t *testing.T, qdisc string) {
	ns, c := setupNS(t)
	q := queue("simple", qdisc)
	q.Download = 0
	p := build(t, q)
	if _, err := c.Apply(p, nil, ApplyOptions{}); err != nil {
		t.Fatal(err)
	}
	src, dst := wanMACs(ns)
	const n = 10
	tiers := []struct {
		dscp  uint8
		class plan.Handle
	}{
		{dscpEF, plan.MakeHandle(1, 0x11)},
		{dscpCS1, plan.MakeHandle(1, 0x13)},
		{dscpBE, plan.MakeHandle(1, 0x12)},
	}
	encaps := []struct {
		name string
		make func(dscp uint8) []byte
	}{
		{"ipv4", func(d uint8) []byte { return frame(dst, src, 0x0800, ipv4Packet(d)) }},
		{"ipv6", func(d uint8) []byte { return frame(dst, src, 0x86DD, ipv6Packet(d)) }},
		{"pppoe-ipv4", func(d uint8) []byte { return frame(dst, src, 0x8864, pppoe(0x0021, ipv4Packet(d))) }},
		{"pppoe-ipv6", func(d uint8) []byte { return frame(dst, src, 0x8864, pppoe(0x0057, ipv6Packet(d))) }},
	}
	for _, e := range encaps {
		for _, tier := range tiers {
			before := classPackets(t, c)
			var frames [][]byte
			for i := 0; i < n; i++ {
				frames = append(frames, e.make(tier.dscp))
			}
			sendFrames(t, ns, "wan0", frames)
			after := classPackets(t, c)
			for _, other := range tiers {
				got := after[other.class] - before[other.class]
				want := uint64(0)
				if other.class == tier.class {
					want = n
				}
				if got != want {
					t.Errorf("%s DSCP %d: class %s counted %d packets, want %d", e.name, tier.dscp, other.class, got, want)
				}
			}
		}
	}
}

// classPackets returns the packet counter of every class on wan0, once the
// shaper has sent all it holds (HTB counts a packet when it dequeues it).
func classPackets(t *testing.T, c *Conn) map[plan.Handle]uint64 {
	t.Helper()
	st := drained(t, c, "wan0")
	m := map[plan.Handle]uint64{}
	for _, cl := range st[0].Classes {
		m[cl.ClassID] = cl.Packets
	}
	return m
}

// TestDSCPClassificationHost runs the simple.qos classification proof on
// the host kernel (htb, u32 and pfifo are built in).
func TestDSCPClassificationHost(t *testing.T) {
	dscpProof(t, "pfifo")
}
