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

// netperfProbes keeps the probes a netperf run can have: ICMP echo to the
// server, and the irtt server's if one was given.
func (c *client) netperfProbes(ctx context.Context) error {
	return c.stockProbes("netperf", "a netserver answers only netperf's own tests")
}
