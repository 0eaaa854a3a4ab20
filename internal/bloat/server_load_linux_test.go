//go:build linux

package bloat

import (
	"context"
	"fmt"
	"net"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"sqm/internal/netns"
	"sqm/internal/testutil"
)

// Sizes of the flood in TestNetnsServerUnderFlood: one attacker host keeps
// floodIdle silent and floodPartial half-sent connections open, redials
// each the server closes after floodRedial, and stops at floodBudget dials
// in all, so the test is bounded in count as well as in time.
const (
	floodIdle    = 300
	floodPartial = 300
	floodRedial  = time.Second
	floodBudget  = 10000
	floodRateMb  = 10 // htb rate of each legitimate client's link
)

// loadLink joins server namespace s to a new namespace over a veth, with
// 10.81.n.1/24 on the server's side and .2 on the other, shaped with htb
// at rateMb both ways when rateMb > 0.
func loadLink(t *testing.T, s *netns.NS, n, rateMb int) *netns.NS {
	t.Helper()
	c := netns.NewT(t, "sqmfl")
	ends := []netns.End{
		{NS: s, Dev: fmt.Sprintf("vfs%d", n), Addrs: []string{fmt.Sprintf("10.81.%d.1/24", n)}},
		{NS: c, Dev: "vfc", Addrs: []string{fmt.Sprintf("10.81.%d.2/24", n)}},
	}
	if err := netns.Link(ends[0], ends[1]); err != nil {
		t.Fatal(err)
	}
	for _, e := range ends {
		if rateMb > 0 {
			if err := e.NS.HTB(e.Dev, rateMb*1000); err != nil {
				t.Fatal(err)
			}
		}
	}
	return c
}

// flood is the attacker's tally.
type flood struct {
	dials, dialErrs atomic.Int64
	peak            atomic.Int64 // most attacker connections open at once
	open            atomic.Int64
	sessions        atomic.Int64 // sessions the attacker was granted
	sessionsRefused atomic.Int64
}

// run keeps the flood going from inside namespace x until stop is closed.
// Sockets are made on the thread Do puts in x, so all dials happen in this
// one goroutine; readers that notice the server closing a connection run
// anywhere.
func (f *flood) run(t *testing.T, x *netns.NS, addr string, started chan<- struct{}, stop <-chan struct{}) error {
	partial := []byte("\x00\x40{\"type\":\"hel") // says 64 bytes, sends 13
	return x.Do(func() error {
		var wg sync.WaitGroup
		defer wg.Wait()
		var conns []net.Conn
		var connsMu sync.Mutex
		defer func() {
			connsMu.Lock()
			for _, c := range conns {
				c.Close()
			}
			connsMu.Unlock()
		}()
		dead := make(chan int, floodIdle+floodPartial)
		dial := func(slot int) {
			if f.dials.Load() >= floodBudget {
				return
			}
			f.dials.Add(1)
			c, err := net.DialTimeout("tcp4", addr, 5*time.Second)
			if err != nil {
				f.dialErrs.Add(1)
				go func() { time.Sleep(floodRedial); dead <- slot }()
				return
			}
			if slot >= floodIdle {
				c.Write(partial)
			}
			connsMu.Lock()
			conns = append(conns, c)
			connsMu.Unlock()
			if n := f.open.Add(1); n > f.peak.Load() {
				f.peak.Store(n)
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				c.Read(make([]byte, 64)) // returns when the server closes it (or at stop)
				c.Close()
				f.open.Add(-1)
				select {
				case <-stop:
				case <-time.After(floodRedial):
					dead <- slot
				}
			}()
		}
		// Two attempts at holding sessions: one slot is the attacker's
		// share; the second waits out its handshake for a slot of its
		// address and is refused.
		var sessErr atomic.Value
		for range 2 {
			c, err := net.DialTimeout("tcp4", addr, 5*time.Second)
			if err != nil {
				return err
			}
			connsMu.Lock()
			conns = append(conns, c)
			connsMu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				writeMessage(c, &message{Type: msgHello, Version: ProtocolVersion, DurationMs: 60000})
				if m, err := readMessage(c); err != nil || m.Type != msgChallenge {
					sessErr.Store(fmt.Errorf("attacker session: challenge %+v, %v", m, err))
					return
				}
				writeMessage(c, &message{Type: msgAuth})
				m, err := readMessage(c)
				switch {
				case err != nil:
					sessErr.Store(fmt.Errorf("attacker session: %v", err))
				case m.Type == msgWelcome:
					f.sessions.Add(1)
				default:
					f.sessionsRefused.Add(1)
				}
			}()
		}
		defer func() {
			if err, _ := sessErr.Load().(error); err != nil {
				t.Error(err)
			}
		}()
		for slot := range floodIdle + floodPartial {
			dial(slot)
		}
		close(started)
		for {
			select {
			case <-stop:
				return nil
			case slot := <-dead:
				dial(slot)
			}
		}
	})
}

// TestNetnsServerUnderFlood is the load test of issue 11: one host keeps
// hundreds of idle and half-open connections open (and redials those the
// server closes) while three legitimate RRUL tests run from three other
// hosts over 10 Mbit/s links. The tests must complete with goodput near
// the link rate and every phase and probe kind present; the attacker gets
// its one session slot and its share of handshakes, nothing more.
func TestNetnsServerUnderFlood(t *testing.T) {
	testutil.RequireRoot(t)
	if _, err := exec.LookPath("tc"); err != nil {
		t.Skip("needs tc (iproute2) for the htb rate limits")
	}
	s := netns.NewT(t, "sqmfs")
	var clients [3]*netns.NS
	for i := range clients {
		clients[i] = loadLink(t, s, i+1, floodRateMb)
	}
	// The goodput floor is about the server, so the senders' congestion
	// control must not decide it. A new namespace takes the machine's
	// default, BBR on this one, which bounds a flow's data in flight by
	// the smallest RTT it has seen: microseconds on the empty veth. Once
	// RRUL's uploads fill the client's 1000-packet fifo, the download's
	// ACKs queue behind them (RTT 0.56 s) and a download stream past
	// BBR's startup carries its 20-30 packets per RTT, 0.4-0.7 Mbit/s
	// (ss -ti, loaded machine), four of them about 2 Mbit/s: the 1.38
	// Mbit/s download this test once failed with. Loss-based Reno fills
	// the fifo both ways, and a namespace may always pick it (it is in
	// every tcp_allowed_congestion_control).
	for _, n := range append([]*netns.NS{s}, clients[:]...) {
		if err := n.SetSysctl("net.ipv4.tcp_congestion_control", "reno"); err != nil {
			t.Fatal(err)
		}
	}
	x := loadLink(t, s, 9, 0)

	var ln net.Listener
	var pc net.PacketConn
	if err := s.Do(func() error {
		var err error
		if ln, err = net.Listen("tcp4", "0.0.0.0:0"); err != nil {
			return err
		}
		pc, err = net.ListenPacket("udp4", ln.Addr().String())
		return err
	}); err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	var logLines atomic.Int64
	srv := NewServer(Limits{}, func(f string, a ...any) {
		logLines.Add(1)
		t.Logf(f, a...)
	})
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ctx, ln, pc) }()
	defer func() {
		cancel()
		if err := <-served; err != nil {
			t.Errorf("Serve: %v", err)
		}
	}()

	var f flood
	started, stop := make(chan struct{}), make(chan struct{})
	attacked := make(chan error, 1)
	go func() { attacked <- f.run(t, x, fmt.Sprintf("10.81.9.1:%d", port), started, stop) }()
	select {
	case <-started:
	case err := <-attacked:
		t.Fatalf("attacker: %v", err)
	}
	t.Logf("flood under way: %d dials, %d attacker connections open", f.dials.Load(), f.open.Load())

	start := time.Now()
	results := make([]*Result, len(clients))
	errs := make([]error, len(clients))
	var wg sync.WaitGroup
	for i, c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i], errs[i] = Run(context.Background(), Options{
				Addr: fmt.Sprintf("10.81.%d.1:%d", i+1, port), Mode: ModeRRUL,
				Duration: 4 * time.Second, Idle: time.Second, Interval: 100 * time.Millisecond,
				Enter: c.Do,
			})
		}()
	}
	wg.Wait()
	took := time.Since(start)
	close(stop)
	if err := <-attacked; err != nil {
		t.Errorf("attacker: %v", err)
	}

	ref := srv.refusals()
	t.Logf("attacker: %d dials (%d failed), at most %d connections open at once, %d session granted, %d refused",
		f.dials.Load(), f.dialErrs.Load(), f.peak.Load(), f.sessions.Load(), f.sessionsRefused.Load())
	t.Logf("server: refusals by reason %v; %d log lines; legitimate tests took %v", ref, logLines.Load(), took.Round(time.Millisecond))
	for i, res := range results {
		if errs[i] != nil {
			t.Errorf("client %d: %v", i+1, errs[i])
			continue
		}
		t.Logf("client %d: down %.2f up %.2f Mbit/s, idle median %.2f ms, loaded median %.2f ms, %d probe kinds",
			i+1, res.DownloadMbps, res.UploadMbps, res.Idle.MedianMs, res.Loaded.MedianMs, len(res.Probes))
		// htb counts Ethernet frames: TCP goodput tops out near 9.5 of
		// 10 Mbit/s. Four flows slow-starting into a 1000-packet fifo for
		// 4 s make the rest vary: with Reno, the flood and load 7-13 on
		// this shared 2-core machine, 8.0..9.7 (BBR: 4.5..10.4). A
		// test denied its streams gets an error or next to nothing, far
		// below 0.3 of the rate; above 1.05 the count would be wrong.
		for name, v := range map[string]float64{"download": res.DownloadMbps, "upload": res.UploadMbps} {
			if v < 0.3*floodRateMb || v > 1.05*floodRateMb {
				t.Errorf("client %d: %s goodput %.2f Mbit/s through a %d Mbit/s htb, want %.1f..%.1f",
					i+1, name, v, floodRateMb, 0.3*floodRateMb, 1.05*floodRateMb)
			}
		}
		var phases []string
		for _, p := range res.Phases {
			phases = append(phases, p.Name)
		}
		if got := strings.Join(phases, ","); got != "idle-before,load,idle-after" {
			t.Errorf("client %d: phases %s, want idle-before,load,idle-after", i+1, got)
		}
		if len(res.Probes) < 3 {
			t.Errorf("client %d: %d probe kinds, want the 3 UDP ones at least", i+1, len(res.Probes))
		}
		for _, pk := range res.Probes {
			if pk.Idle.Count == 0 || pk.Loaded.Count == 0 {
				t.Errorf("client %d: probe %s: idle %d loaded %d answers", i+1, pk.Kind, pk.Idle.Count, pk.Loaded.Count)
			}
		}
		if len(res.Streams) != 8 {
			t.Errorf("client %d: %d streams, want RRUL's 8", i+1, len(res.Streams))
		}
	}
	if n := f.dials.Load(); n < floodIdle+floodPartial {
		t.Errorf("attacker made only %d dials, want at least %d", n, floodIdle+floodPartial)
	}
	if f.sessions.Load() != 1 || f.sessionsRefused.Load() != 1 || ref[refusedSessionsPerAddr] != 1 {
		t.Errorf("attacker sessions: %d granted, %d refused (server counted %d); want 1 and 1",
			f.sessions.Load(), f.sessionsRefused.Load(), ref[refusedSessionsPerAddr])
	}
	if min := int64(floodIdle + floodPartial - defaultMaxHandshakesPerAddr); int64(ref[refusedHandshakesPerAddr]) < min {
		t.Errorf("%d connections refused over the per-address limit, want at least %d", ref[refusedHandshakesPerAddr], min)
	}
	if ref[refusedHandshakes] != 0 {
		t.Errorf("%d refusals for a full pool: one host filled the shared pool", ref[refusedHandshakes])
	}
}
