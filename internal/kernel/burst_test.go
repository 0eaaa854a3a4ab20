package kernel

import (
	"errors"
	"net"
	"testing"

	"golang.org/x/sys/unix"

	"sqm/internal/plan"
)

// TestTBFPassesFullFrames sends full-size frames through simplest_tbf
// with ATM framing and a 100-byte overhead (tc_stab). tbf drops every
// packet whose size-table length exceeds its burst; sqm-scripts' burst,
// ceil((MTU+48)/48)*53 = 1749, is below the 1802 bytes (34 cells) such a
// frame counts, so all of them were dropped (issue 10 item 8). The
// "sqm-scripts burst" case keeps this test honest: the same frames with
// the old burst must be dropped on this kernel.
func TestTBFPassesFullFrames(t *testing.T) {
	for _, tt := range []struct {
		name      string
		burst     uint32 // 0: the planner's
		wantDrops bool
	}{
		{"planned burst", 0, false},
		{"sqm-scripts burst", 1749, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ns, c := setupNS(t)
			q := queue("simplest_tbf", "pfifo")
			q.Download, q.LinkLayer, q.LLAM, q.Overhead = 0, "atm", "tc_stab", 100
			p := build(t, q)
			if tt.burst != 0 {
				p.Egress.Qdiscs[0].TBF.Burst = tt.burst
			}
			if _, err := c.Apply(p, nil, ApplyOptions{}); err != nil {
				t.Fatal(err)
			}
			src, dst := wanMACs(ns)
			const n = 5
			full := frame(dst, src, 0x0800, make([]byte, 1500)) // 1514 bytes
			var frames [][]byte
			for i := 0; i < n; i++ {
				frames = append(frames, full)
			}
			// A frame tbf drops comes back from sendto as ENOBUFS; the
			// qdisc's drop counter is what is checked.
			ns.Do(func() {
				ifi, err := net.InterfaceByName("wan0")
				if err != nil {
					t.Error(err)
					return
				}
				fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW, 0)
				if err != nil {
					t.Error(err)
					return
				}
				defer unix.Close(fd)
				for _, f := range frames {
					sa := &unix.SockaddrLinklayer{Ifindex: ifi.Index, Protocol: htons(0x0800), Halen: 6}
					copy(sa.Addr[:], f[0:6])
					if err := unix.Sendto(fd, f, 0, sa); err != nil && !errors.Is(err, unix.ENOBUFS) {
						t.Error(err)
					}
				}
			})
			st, err := c.Status("wan0")
			if err != nil {
				t.Fatal(err)
			}
			var drops uint32
			for _, qs := range st[0].Qdiscs {
				if qs.Handle == plan.MakeHandle(1, 0) {
					drops = qs.Drops
				}
			}
			if got := drops == n; got != tt.wantDrops || (!tt.wantDrops && drops != 0) {
				t.Errorf("burst %d: tbf dropped %d of %d full-size frames; want %v", p.Egress.Qdiscs[0].TBF.Burst, drops, n, map[bool]string{true: "all", false: "none"}[tt.wantDrops])
			}
		})
	}
}
