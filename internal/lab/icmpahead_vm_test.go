package lab

import (
	"net"
	"os/exec"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/florianl/go-tc"

	"sqm/internal/netns"
	"sqm/internal/testutil"
)

// TestVMICMPAhead builds a trace modem with ICMPAhead (1 Mbit/s, 10 ms,
// a 1000-packet FIFO) on a veth between two namespaces, fills its FIFO
// with UDP and pings across it: the pings must come back at about the
// line's delay while the FIFO holds seconds, and the kernel's counters
// must show the ICMP in its own band (netem 20:) and the UDP in the other
// (30:). Without the filter (or with its key in the wrong byte order) the
// pings wait behind the FIFO: a second or more.
func TestVMICMPAhead(t *testing.T) {
	testutil.RequireVM(t)
	a, b := netns.NewT(t, "sqmiaA"), netns.NewT(t, "sqmiaB")
	if err := netns.Link(netns.End{NS: a, Dev: "viA", Addrs: []string{"10.81.0.1/24"}}, netns.End{NS: b, Dev: "viB", Addrs: []string{"10.81.0.2/24"}}); err != nil {
		t.Fatal(err)
	}
	m := Modem{RateBits: 1_000_000, Delay: 10 * time.Millisecond, Limit: 1000, LinkLayer: "ethernet", Overhead: ethHeader, ICMPAhead: true}
	var ifindex uint32
	err := a.Do(func() error {
		ifi, err := net.InterfaceByName("viA")
		if err != nil {
			return err
		}
		ifindex = uint32(ifi.Index)
		conn, err := tc.Open(&tc.Config{})
		if err != nil {
			return err
		}
		defer conn.Close()
		return applyTraceModem(conn, ifindex, m)
	})
	if err != nil {
		t.Fatal(err)
	}
	// One ping first, while the FIFO is empty: the neighbour entry, so
	// that the datagrams below are not held (and dropped) waiting for ARP.
	if out, err := a.Output(exec.Command("ping", "-n", "-c", "1", "-W", "5", "10.81.0.2")); err != nil {
		t.Fatalf("ping before the load: %v\n%s", err, out)
	}
	// A socket that takes the datagrams in B: with nothing on the port, B
	// answers the first to arrive with a port unreachable, and a connected
	// UDP socket's next write then fails (ECONNREFUSED) if the VM is slow
	// enough for the writes below to outlast one round trip.
	err = b.Do(func() error {
		sink, err := net.ListenPacket("udp4", "10.81.0.2:9")
		if err != nil {
			return err
		}
		t.Cleanup(func() { sink.Close() })
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// 300 datagrams of 1400 bytes at once, 3.4 s of the line's rate, from
	// five sockets: a datagram is charged to its socket's send buffer
	// (212992 bytes by default) until it leaves the qdisc, so one socket
	// would block after about 90.
	err = a.Do(func() error {
		buf := make([]byte, 1400)
		for range 5 {
			c, err := net.Dial("udp4", "10.81.0.2:9")
			if err != nil {
				return err
			}
			defer c.Close()
			for range 60 {
				if _, err := c.Write(buf); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	out, err := a.Output(exec.Command("ping", "-n", "-c", "5", "-i", "0.2", "-W", "5", "10.81.0.2"))
	t.Logf("ping across the full FIFO:\n%s", out)
	if err != nil {
		t.Fatalf("ping: %v", err)
	}
	rtts := regexp.MustCompile(`time=([0-9.]+) ms`).FindAllSubmatch(out, -1)
	if len(rtts) < 4 {
		t.Fatalf("%d ping replies, want at least 4 of 5", len(rtts))
	}
	for _, r := range rtts {
		// 10 ms of line delay, a 1400-byte frame's 11 ms ahead of it at
		// most (the one tbf is sending), and the VM's scheduling.
		if ms, _ := strconv.ParseFloat(string(r[1]), 64); ms > 100 {
			t.Errorf("ping RTT %.1f ms behind a FIFO of seconds: want about the line's 10 ms (ICMP ahead of the FIFO)", ms)
		}
	}
	counts := map[uint32]uint32{}
	var backlog uint32
	err = a.Do(func() error {
		conn, err := tc.Open(&tc.Config{})
		if err != nil {
			return err
		}
		defer conn.Close()
		qs, err := conn.Qdisc().Get()
		if err != nil {
			return err
		}
		for _, q := range qs {
			if q.Ifindex != ifindex || q.Stats == nil {
				continue
			}
			counts[q.Handle>>16] = q.Stats.Packets
			if q.Handle>>16 == 0x30 {
				backlog = q.Stats.Qlen
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("packets sent: ICMP band (20:) %d, FIFO band (30:) %d; FIFO backlog %d", counts[0x20], counts[0x30], backlog)
	if counts[0x20] < 6 || counts[0x20] > 10 {
		t.Errorf("the ICMP band sent %d packets, want the 6 pings (and nothing else)", counts[0x20])
	}
	if backlog < 100 {
		t.Errorf("the FIFO band holds %d packets after the pings, want most of the 300 datagrams still queued", backlog)
	}
}
