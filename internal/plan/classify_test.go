//go:build linux

package plan

import (
	"encoding/binary"
	"fmt"
	"os/exec"
	"regexp"
	"strconv"
	"syscall"
	"testing"
	"time"

	"sqm/internal/netns"
	"sqm/internal/testutil"
)

// frame builds an Ethernet frame: ethertype, then payload.
func frame(ethertype uint16, payload []byte) []byte {
	b := []byte{0x02, 0, 0, 0, 0, 0x02, 0x02, 0, 0, 0, 0, 0x01, byte(ethertype >> 8), byte(ethertype)}
	b = append(b, payload...)
	for len(b) < 60 {
		b = append(b, 0)
	}
	return b
}

// ipv4 is a 20-byte IPv4 header (no options) with tos and protocol, plus
// 8 bytes of payload.
func ipv4(tos, proto byte) []byte {
	h := make([]byte, 28)
	h[0], h[1] = 0x45, tos
	binary.BigEndian.PutUint16(h[2:], 28)
	h[8], h[9] = 64, proto
	copy(h[12:], []byte{10, 0, 0, 1, 10, 0, 0, 2})
	return h
}

// ipv6 is a 40-byte IPv6 header with traffic class tc and next header nh,
// plus 8 bytes of payload.
func ipv6(tc, nh byte) []byte {
	h := make([]byte, 48)
	binary.BigEndian.PutUint32(h, 6<<28|uint32(tc)<<20)
	binary.BigEndian.PutUint16(h[4:], 8)
	h[6], h[7] = nh, 64
	h[23], h[39] = 1, 2
	return h
}

// pppoe wraps an IP packet in a PPPoE session header and PPP protocol.
func pppoe(pppProto uint16, ip []byte) []byte {
	h := []byte{0x11, 0x00, 0x00, 0x01, 0, 0, byte(pppProto >> 8), byte(pppProto)}
	binary.BigEndian.PutUint16(h[4:], uint16(len(ip)+2))
	return append(h, ip...)
}

// vlan is an 802.1Q tag (VLAN 7) in the packet data, then the inner type.
func vlan(inner uint16, ip []byte) []byte {
	return append([]byte{0x00, 0x07, byte(inner >> 8), byte(inner)}, ip...)
}

var classCounter = regexp.MustCompile(`class htb (\S+) [^\n]*\n\s*Sent \d+ bytes (\d+) pkt`)

func classPackets(t *testing.T, ns, dev string) map[string]int {
	t.Helper()
	out, err := exec.Command("tc", "-n", ns, "-s", "class", "show", "dev", dev).CombinedOutput()
	if err != nil {
		t.Fatalf("tc class show: %v\n%s", err, out)
	}
	m := map[string]int{}
	for _, s := range classCounter.FindAllStringSubmatch(string(out), -1) {
		m[s[1]], _ = strconv.Atoi(s[2])
	}
	return m
}

// TestClassifierHostKernel sends hand-made frames through the simple.qos
// filter set on the host kernel and checks which HTB class counts each
// one: on egress (frames sent on eth0 with a packet socket) and on ingress
// (frames sent on the veth peer, redirected to the IFB). This is the u32
// classifier doing its job, not just tc accepting the filters.
func TestClassifierHostKernel(t *testing.T) {
	testutil.RequireRoot(t)
	ns, err := netns.NewUnique("sqmplan")
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Close()
	// No IPv6 on the links: router solicitations, MLD and DAD would be
	// counted along with the test's frames.
	for _, k := range []string{"net.ipv6.conf.all.disable_ipv6", "net.ipv6.conf.default.disable_ipv6"} {
		if err := ns.SetSysctl(k, "1"); err != nil {
			t.Fatal(err)
		}
	}
	if err := ns.Veth("eth0", ns, "peer0"); err != nil {
		t.Fatal(err)
	}
	if err := ns.Up("eth0", "peer0"); err != nil {
		t.Fatal(err)
	}
	q := baseQueue()
	q.Qdisc, q.SquashIngress = "pfifo", false
	p := mustBuild(t, q, 1500)
	if out, err := exec.Command("ip", "netns", "exec", ns.Name(), "sh", "-e", "-c", RenderShell(p)).CombinedOutput(); err != nil {
		t.Fatalf("apply: %v\n%s", err, out)
	}

	type sock struct {
		fd, ifindex int
	}
	open := func(dev string) sock {
		var s sock
		err := ns.Do(func() error {
			ifi, err := ns.Index(dev)
			if err != nil {
				return err
			}
			fd, err := syscall.Socket(syscall.AF_PACKET, syscall.SOCK_RAW, 0)
			if err != nil {
				return fmt.Errorf("packet socket: %w", err)
			}
			s = sock{fd, int(ifi)}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { syscall.Close(s.fd) })
		return s
	}
	eth0, peer0 := open("eth0"), open("peer0")

	const (
		ip4   = 0x0800
		ip6   = 0x86dd
		ses   = 0x8864
		q8021 = 0x8100
		arp   = 0x0806
	)
	for _, tt := range []struct {
		name    string
		frame   []byte
		egress  string // class on egress
		ingress string // class on ingress ("" = same as egress)
	}{
		{"IPv4 BE", frame(ip4, ipv4(0x00, 17)), "1:12", ""},
		{"IPv4 CS1", frame(ip4, ipv4(0x20, 17)), "1:13", ""},
		{"IPv4 EF", frame(ip4, ipv4(0xb8, 17)), "1:11", ""},
		{"IPv4 EF with ECN CE", frame(ip4, ipv4(0xbb, 17)), "1:11", ""},
		{"IPv4 AF42", frame(ip4, ipv4(0x90, 6)), "1:11", ""},
		{"IPv4 CS6", frame(ip4, ipv4(0xc0, 6)), "1:11", ""},
		{"IPv4 CS7", frame(ip4, ipv4(0xe0, 6)), "1:11", ""},
		{"IPv4 TOS low-delay", frame(ip4, ipv4(0x10, 6)), "1:11", ""},
		{"IPv4 AF11 (unmapped)", frame(ip4, ipv4(0x28, 17)), "1:12", ""},
		// Issue 23 item 10: ICMP is classified by its DSCP first, as in
		// sqm-scripts (ping -Q 0xb8 is priority); only ICMP whose DSCP
		// the map does not name goes to bulk.
		{"IPv4 ICMP marked EF", frame(ip4, ipv4(0xb8, 1)), "1:11", ""},
		{"IPv4 ICMP unmarked", frame(ip4, ipv4(0x00, 1)), "1:12", ""},
		{"IPv4 ICMP CS1", frame(ip4, ipv4(0x20, 1)), "1:13", ""},
		{"IPv4 ICMP AF11 (unmapped)", frame(ip4, ipv4(0x28, 1)), "1:13", ""},
		{"IPv6 BE", frame(ip6, ipv6(0x00, 17)), "1:12", ""},
		{"IPv6 CS1", frame(ip6, ipv6(0x20, 17)), "1:13", ""},
		{"IPv6 EF", frame(ip6, ipv6(0xb8, 6)), "1:11", ""},
		{"IPv6 AF41 (unmapped)", frame(ip6, ipv6(0x88, 6)), "1:12", ""},
		{"ICMPv6", frame(ip6, ipv6(0x00, 58)), "1:12", ""},
		{"ICMPv6 marked EF", frame(ip6, ipv6(0xb8, 58)), "1:11", ""},
		{"ICMPv6 AF41 (unmapped)", frame(ip6, ipv6(0x88, 58)), "1:13", ""},
		{"IPv6 UDP is not ICMP", frame(ip6, ipv6(0x00, 1)), "1:12", ""},
		{"PPPoE IPv4 EF", frame(ses, pppoe(0x0021, ipv4(0xb8, 17))), "1:11", ""},
		{"PPPoE IPv4 CS1", frame(ses, pppoe(0x0021, ipv4(0x20, 17))), "1:13", ""},
		{"PPPoE IPv4 ICMP", frame(ses, pppoe(0x0021, ipv4(0x00, 1))), "1:12", ""},
		{"PPPoE IPv4 ICMP marked EF", frame(ses, pppoe(0x0021, ipv4(0xb8, 1))), "1:11", ""},
		{"PPPoE IPv4 ICMP AF11 (unmapped)", frame(ses, pppoe(0x0021, ipv4(0x28, 1))), "1:13", ""},
		{"PPPoE IPv6 EF", frame(ses, pppoe(0x0057, ipv6(0xb8, 6))), "1:11", ""},
		{"PPPoE IPv6 CS1", frame(ses, pppoe(0x0057, ipv6(0x20, 6))), "1:13", ""},
		{"PPPoE ICMPv6", frame(ses, pppoe(0x0057, ipv6(0x00, 58))), "1:12", ""},
		{"PPPoE ICMPv6 AF41 (unmapped)", frame(ses, pppoe(0x0057, ipv6(0x88, 58))), "1:13", ""},
		{"PPPoE LCP", frame(ses, pppoe(0xc021, ipv4(0xb8, 17))), "1:12", ""},
		// The kernel moves the VLAN tag to metadata before tc sees the
		// packet (receive untags; packet sockets skip the tag) but tc still
		// reports protocol 802.1Q: the "tag in metadata" filters match.
		{"VLAN IPv4 EF", frame(q8021, vlan(ip4, ipv4(0xb8, 17))), "1:11", ""},
		{"VLAN IPv4 CS1", frame(q8021, vlan(ip4, ipv4(0x20, 17))), "1:13", ""},
		{"VLAN IPv4 ICMP marked EF", frame(q8021, vlan(ip4, ipv4(0xb8, 1))), "1:11", ""},
		{"VLAN IPv4 ICMP AF11 (unmapped)", frame(q8021, vlan(ip4, ipv4(0x28, 1))), "1:13", ""},
		{"VLAN IPv6 EF", frame(q8021, vlan(ip6, ipv6(0xb8, 17))), "1:11", ""},
		{"VLAN IPv6 AF41 (unmapped)", frame(q8021, vlan(ip6, ipv6(0x88, 17))), "1:12", ""},
		{"VLAN ICMPv6 marked EF", frame(q8021, vlan(ip6, ipv6(0xb8, 58))), "1:11", ""},
		{"VLAN ICMPv6 AF41 (unmapped)", frame(q8021, vlan(ip6, ipv6(0x88, 58))), "1:13", ""},
		{"VLAN PPPoE IPv4 EF", frame(q8021, vlan(ses, pppoe(0x0021, ipv4(0xb8, 17)))), "1:11", ""},
		{"VLAN PPPoE IPv4 CS1", frame(q8021, vlan(ses, pppoe(0x0021, ipv4(0x20, 17)))), "1:13", ""},
		{"VLAN PPPoE IPv6 EF", frame(q8021, vlan(ses, pppoe(0x0057, ipv6(0xb8, 6)))), "1:11", ""},
		{"VLAN PPPoE ICMPv6", frame(q8021, vlan(ses, pppoe(0x0057, ipv6(0x00, 58)))), "1:12", ""},
		{"VLAN PPPoE ICMPv6 AF41 (unmapped)", frame(q8021, vlan(ses, pppoe(0x0057, ipv6(0x88, 58)))), "1:13", ""},
		{"VLAN PPPoE LCP", frame(q8021, vlan(ses, pppoe(0xc021, ipv4(0xb8, 17)))), "1:12", ""},
		{"VLAN ARP", frame(q8021, vlan(arp, make([]byte, 28))), "1:12", ""},
		{"ARP", frame(arp, make([]byte, 28)), "1:12", ""},
	} {
		for _, dir := range []struct {
			name string
			s    sock
			dev  string
			want string
		}{
			{"egress", eth0, "eth0", tt.egress},
			{"ingress", peer0, p.Ingress.IFB, tt.ingress},
		} {
			if dir.want == "" {
				dir.want = tt.egress
			}
			before := classPackets(t, ns.Name(), dir.dev)
			addr := &syscall.SockaddrLinklayer{Ifindex: dir.s.ifindex, Halen: 6, Addr: [8]byte{0x02, 0, 0, 0, 0, 0x02}}
			if err := syscall.Sendto(dir.s.fd, tt.frame, 0, addr); err != nil {
				t.Fatalf("%s %s: send: %v", tt.name, dir.name, err)
			}
			var got []string
			for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
				after := classPackets(t, ns.Name(), dir.dev)
				got = got[:0]
				for _, c := range []string{"1:11", "1:12", "1:13"} {
					for range after[c] - before[c] {
						got = append(got, c)
					}
				}
				if len(got) > 0 {
					break
				}
			}
			if len(got) != 1 || got[0] != dir.want {
				t.Errorf("%s on %s: counted in %v, want [%s]", tt.name, dir.name, got, dir.want)
			}
		}
	}
}

// TestPingEFHostKernel is issue 23 item 10 with a real ping: 20 echo
// requests marked EF (ping -Q 0xb8) leave through simple.qos's egress
// tree and their replies (Linux echoes the TOS) come back through the
// IFB; sqm-scripts puts them in the priority class 1:11, and so must sqm.
// Before the fix all 20 landed in bulk, 1:13, both ways.
func TestPingEFHostKernel(t *testing.T) {
	testutil.RequireRoot(t)
	if _, err := exec.LookPath("ping"); err != nil {
		t.Skip("needs ping (iputils-ping; scripts/setup.sh installs it)")
	}
	router, host := netns.NewT(t, "sqmpr"), netns.NewT(t, "sqmph")
	for _, ns := range []*netns.NS{router, host} {
		for _, k := range []string{"net.ipv6.conf.all.disable_ipv6", "net.ipv6.conf.default.disable_ipv6"} {
			if err := ns.SetSysctl(k, "1"); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := router.Veth("eth0", host, "peer0"); err != nil {
		t.Fatal(err)
	}
	for _, step := range []error{router.AddAddr("eth0", "10.93.0.1/24"), host.AddAddr("peer0", "10.93.0.2/24"), router.Up("lo", "eth0"), host.Up("lo", "peer0")} {
		if step != nil {
			t.Fatal(step)
		}
	}
	q := baseQueue()
	q.Qdisc, q.SquashIngress = "pfifo", false
	p := mustBuild(t, q, 1500)
	if out, err := exec.Command("ip", "netns", "exec", router.Name(), "sh", "-e", "-c", RenderShell(p)).CombinedOutput(); err != nil {
		t.Fatalf("apply: %v\n%s", err, out)
	}
	egress0, ingress0 := classPackets(t, router.Name(), "eth0"), classPackets(t, router.Name(), p.Ingress.IFB)
	const n = 20
	if out, err := router.Output(exec.Command("ping", "-n", "-q", "-Q", "0xb8", "-c", fmt.Sprint(n), "-i", "0.01", "-W", "2", "10.93.0.2")); err != nil {
		t.Fatalf("ping: %v\n%s", err, out)
	}
	egress, ingress := classPackets(t, router.Name(), "eth0"), classPackets(t, router.Name(), p.Ingress.IFB)
	for _, c := range []struct {
		dir           string
		before, after map[string]int
	}{{"egress (requests)", egress0, egress}, {"ingress (replies)", ingress0, ingress}} {
		prio, bulk := c.after["1:11"]-c.before["1:11"], c.after["1:13"]-c.before["1:13"]
		// ARP may add a packet or two to 1:12; the pings are EF, all of them.
		if prio != n || bulk != 0 {
			t.Errorf("%s: %d packets in 1:11 and %d in 1:13; want all %d EF pings in 1:11 (sqm-scripts' class), none in bulk", c.dir, prio, bulk, n)
		}
	}
}
