package reflector

import (
	"context"
	"net"
	"net/netip"
	"os/exec"
	"strconv"
	"sync"
	"testing"
	"time"

	"sqm/internal/bloat"
	"sqm/internal/netns"
	"sqm/internal/testutil"
)

// collect runs p until it has want samples of every target (or 5 s),
// and returns them per target.
func collect(t *testing.T, p *Prober, n, want int) [][]Sample {
	t.Helper()
	got := make([][]Sample, n)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	done := 0
	err := p.Run(ctx, func(s *Sample) {
		if s.Target < 0 || s.Target >= n {
			t.Errorf("sample for target %d of %d", s.Target, n)
			return
		}
		got[s.Target] = append(got[s.Target], *s)
		if len(got[s.Target]) == want {
			if done++; done == n {
				cancel()
			}
		}
	})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	for i, g := range got {
		if len(g) < want {
			t.Fatalf("target %d: %d samples in 5 s, want %d: %+v", i, len(g), want, g)
		}
	}
	return got
}

// checkReplies: every sample answered, of the kind, in a loopback's
// time, with one-way delays iff oneWay, each below the round trip plus
// the clock's resolution (both ends share one clock here).
func checkReplies(t *testing.T, name string, ss []Sample, kind Kind, oneWay bool, res time.Duration) {
	t.Helper()
	last := -1
	for _, s := range ss {
		switch {
		case s.Lost:
			t.Errorf("%s: probe %d lost on loopback", name, s.Seq)
		case s.Kind != kind:
			t.Errorf("%s: kind %v, want %v", name, s.Kind, kind)
		case s.RTT <= 0 || s.RTT > 100*time.Millisecond:
			t.Errorf("%s: RTT %v on loopback", name, s.RTT)
		case s.OneWay != oneWay:
			t.Errorf("%s: one-way %v, want %v (%+v)", name, s.OneWay, oneWay, s)
		case oneWay && (s.Up < -res || s.Down < -res || s.Up > s.RTT+res || s.Down > s.RTT+res):
			t.Errorf("%s: up %v down %v outside 0..RTT %v (+- %v)", name, s.Up, s.Down, s.RTT, res)
		case int(s.Seq) <= last:
			t.Errorf("%s: seq %d after %d", name, s.Seq, last)
		}
		last = int(s.Seq)
	}
}

// TestLoopbackICMP: echo over IPv4 and IPv6 and timestamps over IPv4,
// answered by the kernel on loopback, through raw sockets (root).
func TestLoopbackICMP(t *testing.T) {
	testutil.RequireRoot(t)
	ns := netns.NewT(t, "refl")
	if err := ns.Up("lo"); err != nil {
		t.Fatal(err)
	}
	targets := []Target{
		{Addr: netip.MustParseAddr("127.0.0.1"), Kind: ICMPEcho},
		{Addr: netip.MustParseAddr("127.0.0.1"), Kind: ICMPTimestamp},
		{Addr: netip.MustParseAddr("::1"), Kind: ICMPEcho},
	}
	p, err := New(Config{Targets: targets, Interval: 20 * time.Millisecond, Enter: ns.Do, Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	got := collect(t, p, len(targets), tsRepeats+5)
	checkReplies(t, "echo4", got[0], ICMPEcho, false, 0)
	// One-way delays after the probation; Linux stamps receive and
	// transmit alike, in milliseconds: each delay is up to 1 ms off.
	checkReplies(t, "timestamp (probation)", got[1][:tsRepeats-1], ICMPTimestamp, false, 0)
	checkReplies(t, "timestamp", got[1][tsRepeats-1:], ICMPTimestamp, true, time.Millisecond)
	checkReplies(t, "echo6", got[2], ICMPEcho, false, 0)
}

// TestDatagramICMP: the unprivileged path, datagram ICMP sockets, which
// a namespace allows once its ping_group_range holds our group; a
// timestamp target falls back to echo there.
func TestDatagramICMP(t *testing.T) {
	testutil.RequireRoot(t)
	ns := netns.NewT(t, "refl")
	if err := ns.Up("lo"); err != nil {
		t.Fatal(err)
	}
	if err := ns.SetSysctl("net.ipv4.ping_group_range", "0 2147483647"); err != nil {
		t.Fatal(err)
	}
	targets := []Target{
		{Addr: netip.MustParseAddr("127.0.0.1"), Kind: ICMPTimestamp},
		{Addr: netip.MustParseAddr("::1"), Kind: ICMPEcho},
	}
	p, err := New(Config{Targets: targets, Interval: 20 * time.Millisecond, Enter: ns.Do, Logf: t.Logf, sockets: "dgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	got := collect(t, p, len(targets), 10)
	checkReplies(t, "echo4", got[0], ICMPEcho, false, 0)
	checkReplies(t, "echo6", got[1], ICMPEcho, false, 0)
}

// TestNoICMPSocket: without root or ping_group_range New says how to
// get one.
func TestNoICMPSocket(t *testing.T) {
	testutil.RequireRoot(t)
	ns := netns.NewT(t, "refl")
	if err := ns.SetSysctl("net.ipv4.ping_group_range", "1 0"); err != nil {
		t.Fatal(err)
	}
	_, err := New(Config{Targets: Targets([]netip.Addr{netip.MustParseAddr("127.0.0.1")}), Enter: ns.Do, sockets: "dgram"})
	if err == nil || !contains(err.Error(), "ping_group_range") {
		t.Fatalf("New = %v, want an error naming ping_group_range", err)
	}
}

// TestLoopbackUDP: sqm server's echo (the real server) and irtt (the
// real irtt server, if installed) over IPv4 and IPv6 loopback.
func TestLoopbackUDP(t *testing.T) {
	var targets []Target
	for _, a := range []string{"127.0.0.1", "::1"} {
		ln, err := net.Listen("tcp", net.JoinHostPort(a, "0"))
		if err != nil {
			t.Skipf("no loopback %s: %v", a, err)
		}
		pc, err := net.ListenPacket("udp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		wg.Go(func() { bloat.NewServer(bloat.Limits{}, t.Logf).Serve(ctx, ln, pc) })
		t.Cleanup(func() { cancel(); wg.Wait() })
		ap := netip.MustParseAddrPort(ln.Addr().String())
		targets = append(targets, Target{Addr: ap.Addr(), Port: ap.Port(), Kind: UDPSQM})
	}
	irttPort := 0
	if _, err := exec.LookPath("irtt"); err == nil {
		irttPort = freeUDPPort(t)
		srv := exec.Command("irtt", "server", "-b", "127.0.0.1:"+strconv.Itoa(irttPort))
		if err := srv.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { srv.Process.Kill(); srv.Wait() })
		targets = append(targets, Target{Addr: netip.MustParseAddr("127.0.0.1"), Port: uint16(irttPort), Kind: UDPIRTT})
	} else {
		t.Log("irtt not installed (scripts/setup.sh installs it): irtt not tested")
	}
	p, err := New(Config{Targets: targets, Interval: 20 * time.Millisecond, Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	got := collect(t, p, len(targets), 10)
	checkReplies(t, "sqm4", got[0], UDPSQM, true, 0)
	checkReplies(t, "sqm6", got[1], UDPSQM, true, 0)
	if irttPort != 0 {
		checkReplies(t, "irtt", got[2], UDPIRTT, true, 0)
	}
}

func freeUDPPort(t *testing.T) int {
	c, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	return c.LocalAddr().(*net.UDPAddr).Port
}

func contains(s, sub string) bool {
	return len(s) >= len(sub) && (s == sub || len(sub) == 0 || indexOf(s, sub) >= 0)
}

func indexOf(s, sub string) int {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return i
		}
	}
	return -1
}
