package reflector

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"sqm/internal/bloat"
	"sqm/internal/netns"
	"sqm/internal/testutil"
)

// poll polls p every quarter of its interval until ctx ends: as the
// daemon's loop does at each tick, only more often, so that the tests'
// timings are the prober's own.
func poll(ctx context.Context, p *Prober, emit func(*Sample)) error {
	tk := time.NewTicker(p.cfg.Interval / 4)
	defer tk.Stop()
	for {
		if err := p.Poll(emit); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tk.C:
		}
	}
}

// collect polls p until it has want samples of every target (or 10 s:
// an irtt server still starting costs the first open request, 1 s),
// and returns them per target.
func collect(t *testing.T, p *Prober, n, want int) [][]Sample {
	t.Helper()
	got := make([][]Sample, n)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	done := 0
	err := poll(ctx, p, func(s *Sample) {
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
		t.Fatalf("Poll: %v", err)
	}
	for i, g := range got {
		if len(g) < want {
			t.Fatalf("target %d: %d samples in 10 s, want %d: %+v", i, len(g), want, g)
		}
	}
	return got
}

// checkReplies: every sample answered, of the kind, with one-way delays
// iff oneWay, each below the round trip plus
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
		case s.RTT <= 0 || s.RTT >= 2*time.Second:
			// Positive and within the default timeout: a loopback round
			// trip has no tighter bound when it includes a user-space
			// responder's turnaround (the fake resolver's) on a loaded
			// machine, so none is asserted.
			t.Errorf("%s: RTT %v, a reply within the 2 s timeout", name, s.RTT)
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
	_, err := New(Config{Targets: Targets([]netip.Addr{netip.MustParseAddr("127.0.0.1")}, ProbeICMP), Enter: ns.Do, sockets: "dgram"})
	if err == nil || !strings.Contains(err.Error(), "ping_group_range") {
		t.Fatalf("New = %v, want an error naming ping_group_range", err)
	}
}

// TestLoopbackUDP: sqm server's echo (the real server) and irtt (the
// real irtt server, if installed) over IPv4 and IPv6 loopback.
func TestLoopbackUDP(t *testing.T) {
	var targets []Target
	for _, a := range []string{"127.0.0.1", "::1"} {
		targets = append(targets, sqmServer(t, a))
	}
	dns := fakeResolver(t)
	targets = append(targets, Target{Addr: dns.Addr(), Port: dns.Port(), Kind: UDPDNS})
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
	checkReplies(t, "dns", got[2], UDPDNS, false, 0)
	if irttPort != 0 {
		checkReplies(t, "irtt", got[3], UDPIRTT, true, 0)
	}
}

// fakeResolver answers DNS queries on loopback as a resolver answers
// ". IN A" from its cache: the question back with an empty answer.
func fakeResolver(t *testing.T) netip.AddrPort {
	c, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	go func() {
		b := make([]byte, 512)
		for {
			n, from, err := c.ReadFrom(b)
			if err != nil {
				return
			}
			if n < 12 {
				continue
			}
			b[2] |= 0x80 // a reply
			b[3] |= 0x80 // recursion available
			c.WriteTo(b[:n], from)
		}
	}()
	return netip.MustParseAddrPort(c.LocalAddr().String())
}

// sqmServer starts a `sqm server` on loopback address a and returns it
// as a target.
func sqmServer(t *testing.T, a string) Target {
	t.Helper()
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
	return Target{Addr: ap.Addr(), Port: ap.Port(), Kind: UDPSQM}
}

func freeUDPPort(t *testing.T) int {
	c, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	return c.LocalAddr().(*net.UDPAddr).Port
}

// TestStopsAnswering: a reflector that stops answering (the namespace's
// kernel told to ignore echo requests) gives losses, one per probe, each
// after the timeout, and replies again once it answers again; a closed
// UDP port gives only losses. The namespace is the test's own.
func TestStopsAnswering(t *testing.T) {
	testutil.RequireRoot(t)
	ns := netns.NewT(t, "refl")
	if err := ns.Up("lo"); err != nil {
		t.Fatal(err)
	}
	targets := []Target{
		{Addr: netip.MustParseAddr("127.0.0.1"), Kind: ICMPEcho},
		{Addr: netip.MustParseAddr("127.0.0.1"), Port: 9, Kind: UDPSQM}, // discard: nobody listens
	}
	const timeout = 100 * time.Millisecond
	p, err := New(Config{Targets: targets, Interval: 20 * time.Millisecond, Timeout: timeout, Enter: ns.Do, Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// Phases of target 0: answered until 5 replies, then silent until 5
	// losses, then answered again until 5 replies.
	var phase, count, udp int
	var seen []string
	var lastLost time.Time
	err = poll(ctx, p, func(s *Sample) {
		if s.Target == 1 {
			if !s.Lost {
				t.Errorf("a reply from a closed port: %+v", s)
			}
			udp++
			return
		}
		if s.Lost {
			if d := time.Since(s.Sent); d < timeout {
				t.Errorf("probe %d reported lost after %v, before the timeout", s.Seq, d)
			}
			lastLost = time.Now()
		}
		want := phase != 1
		if !s.Lost != want {
			// The probes in flight when the sysctl flips may go either way.
			seen = append(seen, fmt.Sprintf("phase %d: lost=%v", phase, s.Lost))
			return
		}
		if count++; count < 5 {
			return
		}
		count = 0
		switch phase {
		case 0:
			if err := ns.SetSysctl("net.ipv4.icmp_echo_ignore_all", "1"); err != nil {
				t.Error(err)
			}
		case 1:
			if err := ns.SetSysctl("net.ipv4.icmp_echo_ignore_all", "0"); err != nil {
				t.Error(err)
			}
		case 2:
			cancel()
		}
		phase++
	})
	if err != nil {
		t.Fatal(err)
	}
	if phase != 3 {
		t.Fatalf("reached phase %d of 3 in 10 s (samples off phase: %v)", phase, seen)
	}
	// At most the probes in flight at each flip (timeout / interval + 1)
	// go the other way.
	if len(seen) > 2*(int(timeout/(20*time.Millisecond))+1) {
		t.Errorf("%d samples contradict their phase: %v", len(seen), seen)
	}
	if udp < 5 || lastLost.IsZero() {
		t.Errorf("%d losses from the closed port, last ICMP loss %v", udp, lastLost)
	}
}

// TestIRTTReopen: an irtt server restarted forgets the session, so it
// ignores the probes; after irttMisses lost in a row the prober opens a
// new one and replies come again.
func TestIRTTReopen(t *testing.T) {
	if _, err := exec.LookPath("irtt"); err != nil {
		t.Skip("irtt not installed (scripts/setup.sh installs it)")
	}
	port := freeUDPPort(t)
	var srv *exec.Cmd
	start := func() {
		srv = exec.Command("irtt", "server", "-b", "127.0.0.1:"+strconv.Itoa(port))
		if err := srv.Start(); err != nil {
			t.Fatal(err)
		}
	}
	start()
	t.Cleanup(func() { srv.Process.Kill(); srv.Wait() })
	var opens atomic.Int32
	logf := func(f string, args ...any) {
		t.Logf(f, args...)
		if strings.Contains(fmt.Sprintf(f, args...), "session open") {
			opens.Add(1)
		}
	}
	p, err := New(Config{Targets: []Target{{Addr: netip.MustParseAddr("127.0.0.1"), Port: uint16(port), Kind: UDPIRTT}},
		Interval: 20 * time.Millisecond, Timeout: 100 * time.Millisecond, Logf: logf})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var replies, lost, after int
	restarted := false
	poll(ctx, p, func(s *Sample) {
		switch {
		case s.Lost:
			lost++
		case restarted:
			if after++; after == 10 {
				cancel()
			}
		default:
			if replies++; replies == 10 {
				srv.Process.Kill()
				srv.Wait()
				start()
				restarted = true
			}
		}
	})
	if after < 10 || opens.Load() < 2 {
		t.Fatalf("%d replies before the restart, %d after, %d lost, %d sessions opened", replies, after, lost, opens.Load())
	}
	// Lost: the misses that trigger the reopen, plus those in flight.
	if max := irttMisses + int(100*time.Millisecond/(20*time.Millisecond)) + 1; lost < irttMisses || lost > max {
		t.Errorf("%d probes lost across the restart, want %d..%d", lost, irttMisses, max)
	}
}

// TestIRTTGrantedInterval: an irtt server with a minimum interval of
// 50 ms grants that to a prober asking for 20 ms, and the prober follows
// it (probing faster, its excess probes would be dropped as losses).
func TestIRTTGrantedInterval(t *testing.T) {
	if _, err := exec.LookPath("irtt"); err != nil {
		t.Skip("irtt not installed (scripts/setup.sh installs it)")
	}
	port := freeUDPPort(t)
	srv := exec.Command("irtt", "server", "-b", "127.0.0.1:"+strconv.Itoa(port), "-i", "50ms")
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Process.Kill(); srv.Wait() })
	p, err := New(Config{Targets: []Target{{Addr: netip.MustParseAddr("127.0.0.1"), Port: uint16(port), Kind: UDPIRTT}},
		Interval: 20 * time.Millisecond, Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	got := collect(t, p, 1, 22)[0]
	checkReplies(t, "irtt", got, UDPIRTT, true, 0)
	// Past the first two (scheduled before the grant), the mean gap is
	// the granted 50 ms, not the 20 ms asked (a late send shortens the
	// next gap, never the mean).
	ss := got[2:]
	if mean := ss[len(ss)-1].Sent.Sub(ss[0].Sent) / time.Duration(len(ss)-1); mean < 45*time.Millisecond {
		t.Errorf("mean gap %v between probes, want the granted 50 ms", mean)
	}
}

// TestReplace: a target replaced mid-run probes the new reflector from
// its next probe on; the old one's replies in flight are forgotten, so no
// sample of the old kind follows the first of the new.
func TestReplace(t *testing.T) {
	dns := fakeResolver(t)
	sqm := sqmServer(t, "127.0.0.1")
	p, err := New(Config{Targets: []Target{{Addr: dns.Addr(), Port: dns.Port(), Kind: UDPDNS}},
		Interval: 20 * time.Millisecond, Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if err := p.Replace(1, sqm); err == nil {
		t.Error("Replace of a target that does not exist accepted")
	}
	if err := p.Replace(0, Target{Addr: netip.MustParseAddr("::1"), Kind: UDPDNS}); err == nil {
		t.Error("Replace with a target needing a socket the prober lacks (UDPv6) accepted")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var before, after int
	poll(ctx, p, func(s *Sample) {
		switch {
		case s.Lost:
			t.Errorf("lost on loopback: %+v", s)
		case s.Kind == UDPDNS && after > 0:
			t.Errorf("a sample of the old target after the new one's first: %+v", s)
		case s.Kind == UDPDNS:
			if before++; before == 5 {
				if err := p.Replace(0, sqm); err != nil {
					t.Error(err)
				}
			}
		case s.Kind == UDPSQM:
			if after++; after == 10 {
				cancel()
			}
		}
	})
	if after < 10 {
		t.Fatalf("%d samples before the replacement, %d after", before, after)
	}
	if i, ok := p.byUDP[netip.AddrPortFrom(sqm.Addr, sqm.Port)]; !ok || i != 0 {
		t.Errorf("replies from the new reflector not routed to target 0: %v", p.byUDP)
	}
	if _, ok := p.byUDP[dns]; ok {
		t.Errorf("replies from the old reflector still routed: %v", p.byUDP)
	}
}

// TestSetInterval: two ICMP echo targets probed every 20 ms; after the
// fifth sample SetInterval(150 ms) spaces each target's probes 150 ms
// apart (TestApplyIntervalFaster covers the way back).
func TestSetInterval(t *testing.T) {
	testutil.RequireRoot(t)
	ns := netns.NewT(t, "reflint")
	if err := ns.Up("lo"); err != nil {
		t.Fatal(err)
	}
	lo := netip.MustParseAddr("127.0.0.1")
	p, err := New(Config{Targets: []Target{{Addr: lo, Kind: ICMPEcho}, {Addr: lo, Kind: ICMPEcho}}, Interval: 20 * time.Millisecond, Enter: ns.Do, Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	var slow time.Time   // when SetInterval was called
	var sent []time.Time // target 0's probes
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err = poll(ctx, p, func(s *Sample) {
		if s.Target != 0 {
			return
		}
		sent = append(sent, s.Sent)
		switch len(sent) {
		case 5:
			slow = time.Now()
			p.SetInterval(150 * time.Millisecond)
		case 11:
			cancel()
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(sent) < 11 {
		t.Fatalf("%d samples of target 0 in 10 s, want 11", len(sent))
	}
	// From the first probe sent after it, gaps of 150 ms: the schedule
	// adds the interval to the last due time, so a late wakeup shortens
	// the next gap and the mean stays; 120 ms leaves room for a late
	// first one on a loaded machine, far above the 20 ms before.
	var after []time.Time
	for _, s := range sent {
		if s.After(slow) {
			after = append(after, s)
		}
	}
	if n := len(after); n < 4 {
		t.Fatalf("only %d probes sent after SetInterval: %v", n, sent)
	} else if mean := after[n-1].Sub(after[0]) / time.Duration(n-1); mean < 120*time.Millisecond {
		t.Errorf("mean gap %v after SetInterval(150ms), want 150 ms", mean)
	}
}

// TestApplyIntervalFaster: going back to a shorter interval, every
// target is probed at once, not at the end of the long wait; going slower
// leaves the next probe where it was and only lengthens the ones after.
func TestApplyIntervalFaster(t *testing.T) {
	lo := netip.MustParseAddr("127.0.0.1")
	p, err := newProber(Config{Targets: []Target{{Addr: lo, Kind: ICMPEcho}, {Addr: lo, Kind: ICMPEcho}}, Interval: 100 * time.Millisecond, Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	for i := range p.targets {
		p.setTarget(i, p.cfg.Targets[i])
		p.targets[i].next = now.Add(50 * time.Millisecond)
	}
	p.want = 2 * time.Second
	p.applyInterval(now)
	for i, ts := range p.targets {
		if ts.interval != 2*time.Second || !ts.next.Equal(now.Add(50*time.Millisecond)) {
			t.Errorf("slower: target %d interval %v next +%v, want 2s and +50ms", i, ts.interval, ts.next.Sub(now))
		}
		p.targets[i].next = now.Add(1900 * time.Millisecond)
	}
	p.want = 100 * time.Millisecond
	p.applyInterval(now)
	for i, ts := range p.targets {
		if ts.interval != 100*time.Millisecond || !ts.next.Equal(now) {
			t.Errorf("faster: target %d interval %v next +%v, want 100ms and now", i, ts.interval, ts.next.Sub(now))
		}
	}
}

// TestPollEveryInterval: a caller that polls once an interval (the
// daemon's loop at each idle tick) gets one probe per target at every
// poll, however its polls fall against the probes' schedule: a probe due
// a little after a poll goes out at that poll, not a whole interval
// later. One that polls twice an interval gets one per target at every
// other poll: the poll between, under half an interval before the probes
// are due, does not send them early.
func TestPollEveryInterval(t *testing.T) {
	lo := netip.MustParseAddr("127.0.0.1")
	// Long enough that a poll must be 22 ms late to send early.
	const every = 120 * time.Millisecond
	for _, tt := range []struct {
		name string
		tick time.Duration
		// lead: the ticker starts this long before the first poll, which
		// sets the probes' schedule (negative: after it).
		lead time.Duration
		want []uint32 // probes sent per poll, repeating
	}{
		// Every tick comes an eighth of an interval before the probes
		// are due.
		{"once", every, every / 8, []uint32{2}},
		// The ticks between come 7/16 of an interval before they are due.
		{"twice", every / 2, -every / 16, []uint32{2, 0}},
	} {
		p, err := newProber(Config{Targets: []Target{{Addr: lo, Kind: ICMPEcho}, {Addr: lo, Port: 9, Kind: UDPSQM}}, Interval: every, Timeout: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		for i, tg := range p.cfg.Targets {
			p.setTarget(i, tg) // no sockets: the sends fail, the schedule is what is tested
		}
		poll := func(n int) {
			t.Helper()
			before := p.next
			if err := p.Poll(func(*Sample) {}); err != nil {
				t.Fatal(err)
			}
			if sent, want := p.next-before, tt.want[n%len(tt.want)]; sent != want {
				t.Fatalf("%s: poll %d sent %d probes, want %d", tt.name, n+1, sent, want)
			}
		}
		var tk *time.Ticker
		if tt.lead > 0 {
			tk = time.NewTicker(tt.tick)
			time.Sleep(tt.lead)
			poll(0)
		} else {
			poll(0)
			time.Sleep(-tt.lead)
			tk = time.NewTicker(tt.tick)
		}
		for n := 1; n < 15; n++ {
			<-tk.C
			poll(n)
		}
		tk.Stop()
	}
}

// TestReadLate: a reply read long after it came (an idle loop polls
// every few seconds) keeps the round trip its kernel stamp gives, not the
// time until the read. With the bound at the timeout alone it read as
// the whole wait.
func TestReadLate(t *testing.T) {
	testutil.RequireRoot(t)
	ns := netns.NewT(t, "refllate")
	if err := ns.Up("lo"); err != nil {
		t.Fatal(err)
	}
	p, err := New(Config{Targets: []Target{{Addr: netip.MustParseAddr("127.0.0.1"), Kind: ICMPEcho}},
		Interval: 10 * time.Second, Timeout: 100 * time.Millisecond, Enter: ns.Do, Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	var got []Sample
	emit := func(s *Sample) { got = append(got, *s) }
	if err := p.Poll(emit); err != nil { // sends the probe
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond) // five timeouts
	if err := p.Poll(emit); err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Lost || got[0].RTT <= 0 || got[0].RTT > 50*time.Millisecond {
		t.Fatalf("samples %+v; want one reply with a loopback round trip (under 50 ms), not the 500 ms until it was read", got)
	}
}
