package bloat

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"sqm/internal/netperf"
)

// The load side of a run against a stock netperf server, netserver
// (Options.NetPerf), the way flent's RRUL and betterspeedtest load one:
// each stream is its own netperf test on its own control connection, a
// TCP_STREAM for an upload and a TCP_MAERTS for a download, both ends
// marking the data connection with the stream's DSCP (netperf -Y), so
// RRUL's download markings are the server's, as with flent.
//
// Goodput is counted where the data arrives, as with the other servers:
// downloads are the bytes read here during the phase; uploads the bytes
// the server's results say it received, never more than left our socket
// buffer during the phase (acknowledged bytes if the results do not come
// in time).
//
// A download test is asked to run a second longer than its phase, so the
// server is still sending when the phase ends (netserver's clock starts
// before the data connection opens); the client then closes it, and
// netserver ends that test with a send error instead of results, which a
// download does not need. An upload ends as netperf ends it: the client
// shuts down its side and the server answers with its results.

// netperfHostPort adds netserver's default port to addr when it names none.
func netperfHostPort(addr string) (string, uint16, error) {
	return stockHostPort("netperf", addr, netperf.DefaultPort)
}

// resolveNetPerf resolves Options.NetPerf and sets up the netperf client.
func (c *client) resolveNetPerf(ctx context.Context) error {
	if err := c.resolveStock(ctx, "netperf", c.o.NetPerf, netperf.DefaultPort); err != nil {
		return err
	}
	c.np = &netperf.Client{Server: c.server, Passphrase: c.o.Secret,
		DialTCP: func(ctx context.Context, addr netip.AddrPort, dscp int) (net.Conn, error) {
			return c.dial(ctx, addr.String(), dscp)
		}}
	return nil
}

// netperfPhase runs one phase of the schedule: a netperf test per stream
// if the phase has load, a wait otherwise.
func (c *client) netperfPhase(ctx context.Context, p plannedPhase) error {
	end := c.start.Add(p.end)
	if p.down+p.up == 0 {
		select {
		case <-time.After(time.Until(end)):
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	n := p.down + p.up
	opened := make([]*stream, n)
	tests := make([]*netperf.Stream, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		dir, idx := DirDown, i
		if i >= p.down {
			dir, idx = DirUp, i-p.down
		}
		label, dscp := "BE", DSCPCS0
		if c.o.Mode == ModeRRUL {
			label, dscp = rrulMarks[idx%4].label, rrulMarks[idx%4].dscp
		} else if n > 1 {
			label = fmt.Sprintf("BE%d", idx+1)
		}
		length := p.end - p.start
		if dir == DirDown {
			length += time.Second
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			t, err := c.np.Stream(ctx, dir == DirUp, length, dscp)
			if err != nil {
				errs[i] = err
				return
			}
			// Stock netserver leaves the response's length 0; a server that
			// limits tests may say there how long it grants.
			if got := time.Duration(t.Response.TestLength) * time.Second; got > 0 && got < p.end-p.start {
				c.note("the netperf server grants %v per test, shorter than the %v phase: its streams end early", got, p.end-p.start)
			}
			st := &stream{dir: dir, label: label, dscp: dscp, conn: t.Conn, done: make(chan struct{})}
			if dir == DirUp {
				st.base, _ = bytesAcked(st.conn)
			}
			st.startT = time.Since(c.start)
			go st.pump()
			opened[i], tests[i] = st, t
		}()
	}
	wg.Wait()
	var active []*stream
	var activeTests []*netperf.Stream
	for i, st := range opened {
		if st != nil {
			active = append(active, st)
			activeTests = append(activeTests, tests[i])
		}
	}
	if ctx.Err() != nil {
		c.stopNetPerf(ctx, active, activeTests, true)
		return ctx.Err()
	}
	if len(active) == 0 {
		return fmt.Errorf("bloat: %s phase: %w", p.name, errs[0])
	}
	for i, err := range errs {
		if err != nil {
			c.note("%s phase: %d of %d netperf tests could not start (the first: %v)", p.name, n-len(active), n, errs[i])
			break
		}
	}
	c.mu.Lock()
	c.streams = append(c.streams, active...)
	for _, st := range active {
		st.series = make([]float64, len(c.ticks))
	}
	c.mu.Unlock()

	select {
	case <-time.After(time.Until(end)):
	case <-ctx.Done():
	}
	c.stopNetPerf(ctx, active, activeTests, ctx.Err() != nil)
	return ctx.Err()
}

// stopNetPerf ends a phase's tests: counts are frozen first, downloads
// closed, uploads finished concurrently so their queues drain in parallel
// (see stopAll for the drain's bound).
func (c *client) stopNetPerf(ctx context.Context, streams []*stream, tests []*netperf.Stream, cancelled bool) {
	at := time.Since(c.start)
	var early []string
	for _, st := range streams {
		select {
		case <-st.done:
			early = append(early, st.dir+" "+st.label)
		default:
		}
		st.mu.Lock()
		st.final = st.bytesLocked()
		st.total = st.final
		st.stopped = true
		st.endT = at
		st.mu.Unlock()
	}
	if len(early) > 0 && !cancelled {
		c.note("the netperf server ended %d of %d streams (%v) before the phase did: it may limit tests' length; their goodput counts until then over the whole phase", len(early), len(streams), early)
	}
	drain := min(time.Second+2*c.maxRTT(), maxUploadDrain)
	drainEnd := time.Now().Add(drain)
	var wg sync.WaitGroup
	var lost atomic.Int32
	var firstErr atomic.Value
	ups := 0
	for i, st := range streams {
		t := tests[i]
		if st.dir != DirUp {
			t.Close()
			<-st.done
			continue
		}
		ups++
		wg.Add(1)
		go func() {
			defer wg.Done()
			st.conn.SetWriteDeadline(time.Now()) // unblocks the writer
			<-st.done
			// Bytes still in the socket buffer were written, not sent, in
			// the phase: they must not count.
			left, _ := notSent(st.conn)
			sentInPhase := st.sent.Load() - left
			if cancelled {
				t.Close()
				return
			}
			res, err := t.Finish(drainEnd)
			if err != nil {
				lost.Add(1)
				firstErr.CompareAndSwap(nil, err)
				return
			}
			st.peer = int64(res.BytesReceived)
			if n := min(st.peer, sentInPhase); n > st.total {
				st.total = n
			}
		}()
	}
	wg.Wait()
	if n := lost.Load(); n > 0 {
		err, _ := firstErr.Load().(error)
		var ne net.Error
		why := fmt.Sprintf("%v", err)
		if errors.As(err, &ne) && ne.Timeout() {
			why = fmt.Sprintf("they did not arrive within %v", drain.Round(time.Millisecond))
		}
		c.note("the netperf server's results for %d of %d upload streams are missing (%s); their goodput counts acknowledged bytes only", n, ups, why)
	}
}

// netperfProbes sets up the latency probes of a netperf run: ICMP echo to
// the server, and, unless an irtt server takes the UDP probes, one
// netperf UDP_RR test per UDP probe kind (flent's RRUL measures UDP
// latency with UDP_RR too), each marked on both ends with its kind's DSCP.
// A kind whose UDP_RR the server refuses or does not answer is left out
// with a note: such a server still carries the load, and ICMP still
// measures it.
func (c *client) netperfProbes(ctx context.Context) error {
	if c.o.IRTT != "" {
		return c.stockProbes("netperf", "a netserver answers only netperf's own tests")
	}
	type want struct {
		name string
		dscp int
		at   int // index in c.kinds
	}
	var ws []want
	for i, k := range c.kinds {
		if k.protocol == "sqm" {
			ws = append(ws, want{k.name, k.dscp, i})
		}
	}
	made := make([]*kind, len(ws))
	errs := make([]error, len(ws))
	var wg sync.WaitGroup
	for i, w := range ws {
		wg.Add(1)
		go func() {
			defer wg.Done()
			made[i], errs[i] = c.netperfRRKind(ctx, w.name, w.dscp)
		}()
	}
	wg.Wait()
	for i, w := range ws {
		c.kinds[w.at].conn.Close()
		c.kinds[w.at] = made[i]
		if errs[i] != nil {
			c.note("%s probes: no netperf UDP_RR (%v); latency from the other probes", w.name, errs[i])
		}
	}
	kept := c.kinds[:0]
	for _, k := range c.kinds {
		if k != nil {
			kept = append(kept, k)
		}
	}
	c.kinds = kept
	if len(c.kinds) == 0 {
		return fmt.Errorf("bloat: no latency probes for the netperf server %s: its UDP_RR did not answer, and ICMP is unavailable (run as root or allow it with net.ipv4.ping_group_range), or give an irtt server", c.server.Addr())
	}
	return nil
}

// rrSockets is how many sockets a UDP_RR probe kind sends from, in turn:
// netserver's answers carry nothing of the request, so a probe is known
// by the socket its answer arrives on, and a socket's earlier probe must
// be answered (or lost) by the time its turn comes again: 16 probes at the
// default 200 ms leave 3.2 s, more than any queue the test is for.
const rrSockets = 16

// rrCheckWait bounds the wait for the answer to the datagram that checks
// a UDP_RR test works before the run.
const rrCheckWait = 2 * time.Second

// netperfRRKind opens one UDP_RR probe kind: the test, its sockets, and a
// reader per socket that turns each answer into the reply to that
// socket's outstanding probe.
func (c *client) netperfRRKind(ctx context.Context, name string, dscp int) (*kind, error) {
	rr, err := c.np.UDPRR(ctx, c.total+maxLateReplyWait+5*time.Second, dscp, 1)
	if err != nil {
		return nil, err
	}
	network := "udp" + c.o.Network[3:]
	mc := &rrConn{rr: rr, replies: make(chan reply, rrSockets)}
	for range rrSockets {
		var conn *net.UDPConn
		err := c.o.Enter(func() error {
			var err error
			conn, err = net.DialUDP(network, nil, net.UDPAddrFromAddrPort(rr.Data))
			return err
		})
		if err != nil {
			mc.Close()
			return nil, fmt.Errorf("open a socket to its UDP_RR port %v: %w", rr.Data, err)
		}
		if dscp != 0 {
			if err := setDSCP(conn, dscp); err != nil {
				c.note("cannot mark %s probes with DSCP %d: %v", name, dscp, err)
			}
		}
		enableRxTimestamps(conn)
		mc.conns = append(mc.conns, conn)
	}
	// One datagram first, outside the run: a server whose data ports a
	// firewall closes for UDP accepts the test and never answers.
	probe := []byte{0x5a}
	mc.conns[0].SetReadDeadline(time.Now().Add(rrCheckWait))
	mc.conns[0].Write(probe)
	var b [64]byte
	if _, err := mc.conns[0].Read(b[:]); err != nil {
		mc.Close()
		return nil, fmt.Errorf("its UDP_RR test at %v did not answer within %v (is UDP to its data ports filtered?)", rr.Data, rrCheckWait)
	}
	mc.conns[0].SetReadDeadline(time.Time{})

	k := &kind{name: name, dscp: dscp, conn: mc, downDSCP: -1, upDSCP: -1,
		server: c.server.String(), protocol: "netperf"}
	// outstanding[i] is 1 + the probe sent last from socket i, 0 if none.
	var outstanding [rrSockets]uint64
	k.send = func(seq uint64, t time.Duration) error {
		i := seq % rrSockets
		k.mu.Lock()
		outstanding[i] = seq + 1
		k.mu.Unlock()
		_, err := mc.conns[i].Write(probe)
		return err
	}
	for i, conn := range mc.conns {
		mc.wg.Add(1)
		go func() {
			defer mc.wg.Done()
			buf := make([]byte, 64)
			oob := make([]byte, 128)
			for {
				_, _, at, tos, err := readStamped(conn, buf, oob)
				if errors.Is(err, net.ErrClosed) {
					return
				}
				if err != nil {
					time.Sleep(time.Millisecond) // e.g. ICMP port unreachable
					continue
				}
				k.mu.Lock()
				o := outstanding[i]
				outstanding[i] = 0
				if o != 0 {
					k.downDSCP = tos
				}
				k.mu.Unlock()
				if o != 0 {
					mc.replies <- reply{at: at, seq: o - 1, ok: true}
				}
			}
		}()
	}
	k.read = func([]byte) (reply, error) {
		r, ok := <-mc.replies
		if !ok {
			return reply{}, net.ErrClosed
		}
		return r, nil
	}
	return k, nil
}

// rrConn is a UDP_RR probe kind's sockets and test; closing it ends the
// test, closes the sockets and, once their readers are done, the replies.
type rrConn struct {
	rr      *netperf.RR
	conns   []*net.UDPConn
	replies chan reply
	wg      sync.WaitGroup
	once    sync.Once
}

func (m *rrConn) Close() error {
	m.once.Do(func() {
		var first net.Conn
		if len(m.conns) > 0 {
			first = m.conns[0]
		}
		m.rr.End(first)
		for _, c := range m.conns {
			c.Close()
		}
		m.wg.Wait()
		close(m.replies)
	})
	return nil
}
