package bloat

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"sqm/internal/iperf3"
)

// The load side of a run against a stock iperf3 server (Options.IPerf3).
//
// Each load phase is one iperf3 test: a speedtest's download phase is a
// reverse test (-R) with Streams streams, its upload phase a normal one,
// and RRUL's load phase a bidirectional test (--bidir) with four streams
// each way. Idle phases hold no test, so the server is free between runs
// but also free for a stranger to take between a download and an upload
// phase; that is reported as a busy server, since it is one.
//
// Goodput is counted where the data arrives: downloads are the bytes we
// read during the phase, uploads the bytes the server says it received
// (its results message), never more than left our socket buffer during the
// phase. Both sides' counts are kept per stream (Stream.PeerBytes).
//
// An iperf3 server answers no latency probes of ours, so the probes are
// ICMP echo to the same host unless Options.IRTT names an irtt server.

// loadServer checks the choice of load server: exactly one of an sqm
// server, an iperf3 server and a netperf server.
func (o *Options) loadServer() error {
	var given []string
	for _, s := range []struct{ what, addr string }{{"an sqm server", o.Addr}, {"an iperf3 server", o.IPerf3}, {"a netperf server", o.NetPerf}} {
		if s.addr != "" {
			given = append(given, fmt.Sprintf("%s (%s)", s.what, s.addr))
		}
	}
	switch {
	case len(given) > 1:
		return fmt.Errorf("bloat: %s given for the load; choose one", strings.Join(given, " and "))
	case len(given) == 0:
		return errors.New("bloat: no server address; give HOST[:PORT] of a host running 'sqm server', or an iperf3 or netperf server")
	case o.IPerf3 != "" && o.Mode == ModeIdle:
		return errors.New("bloat: idle mode puts no load on the link; it needs no iperf3 server")
	case o.NetPerf != "" && o.Mode == ModeIdle:
		return errors.New("bloat: idle mode puts no load on the link; it needs no netperf server")
	case o.IPerf3 != "" && o.Mode == ModeSpeedtest && o.Streams > 128:
		return fmt.Errorf("bloat: %d streams; an iperf3 test takes at most 128", o.Streams)
	}
	if o.IPerf3 != "" {
		if _, _, err := iperf3HostPort(o.IPerf3); err != nil {
			return err
		}
	}
	if o.NetPerf != "" {
		if _, _, err := netperfHostPort(o.NetPerf); err != nil {
			return err
		}
	}
	return nil
}

// iperf3HostPort adds iperf3's default port to addr when it names none.
func iperf3HostPort(addr string) (host string, port uint16, err error) {
	return stockHostPort("iperf3", addr, iperf3.DefaultPort)
}

// stockHostPort splits the address of a stock server (iperf3, netperf),
// adding its default port when addr names none.
func stockHostPort(what, addr string, def int) (host string, port uint16, err error) {
	h, p, err := net.SplitHostPort(withPort(addr, def))
	if err != nil {
		return "", 0, fmt.Errorf("bloat: %s server %q: want HOST or HOST:PORT", what, addr)
	}
	n, err := strconv.ParseUint(p, 10, 16)
	if err != nil || n == 0 {
		return "", 0, fmt.Errorf("bloat: %s server %q: port %q is not 1..65535", what, addr, p)
	}
	if h == "" {
		return "", 0, fmt.Errorf("bloat: %s server %q: no host", what, addr)
	}
	return h, uint16(n), nil
}

// resolveStock finds a stock load server's address once, so every test
// of the run, and the ICMP probes, go to the same host.
func (c *client) resolveStock(ctx context.Context, what, addr string, def int) error {
	host, port, err := stockHostPort(what, addr, def)
	if err != nil {
		return err
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		var ips []netip.Addr
		err = c.o.Enter(func() error {
			var err error
			ips, err = net.DefaultResolver.LookupNetIP(ctx, "ip"+c.o.Network[3:], host)
			return err
		})
		if err != nil || len(ips) == 0 {
			return fmt.Errorf("bloat: %s server %s: cannot resolve %s: %v", what, addr, host, err)
		}
		ip = ips[0]
	}
	ip = ip.Unmap()
	if (c.o.Network == "tcp4" && !ip.Is4()) || (c.o.Network == "tcp6" && !ip.Is6()) {
		return fmt.Errorf("bloat: %s server %s: address %v does not fit %s", what, addr, ip, c.o.Network)
	}
	c.server = netip.AddrPortFrom(ip, port)
	// No session limit: a stock server ends a test on its own clock (an
	// iperf3 server 40 s after its announced time, netserver after the
	// test's length), and each phase asks for its own.
	c.end = time.Now().Add(c.total + time.Hour)
	return nil
}

// resolveIPerf3 resolves Options.IPerf3.
func (c *client) resolveIPerf3(ctx context.Context) error {
	return c.resolveStock(ctx, "iperf3", c.o.IPerf3, iperf3.DefaultPort)
}

// stockProbes drops the probe kinds that only an sqm server answers and
// makes sure one kind is left: a run without latency is not a bufferbloat
// test. what names the server (iperf3, netperf) and answers what it
// answers instead, for the error.
func (c *client) stockProbes(what, answers string) error {
	if c.o.IRTT == "" {
		kept := c.kinds[:0]
		for _, k := range c.kinds {
			if strings.HasPrefix(k.name, "udp-") && k.protocol == "sqm" {
				k.conn.Close()
				continue
			}
			kept = append(kept, k)
		}
		c.kinds = kept
	}
	if len(c.kinds) == 0 {
		return fmt.Errorf("bloat: no latency probes for the %s server %s: %s, and ICMP is unavailable (run as root or allow it with net.ipv4.ping_group_range), or give an irtt server", what, c.server.Addr(), answers)
	}
	return nil
}

// iperf3Phase runs one phase of the schedule: an iperf3 test if the phase
// has load, a wait otherwise.
func (c *client) iperf3Phase(ctx context.Context, p plannedPhase) error {
	end := c.start.Add(p.end)
	if p.down+p.up == 0 {
		select {
		case <-time.After(time.Until(end)):
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	cfg := iperf3.Config{Streams: max(p.down, p.up), Duration: p.end - p.start}
	switch {
	case p.down > 0 && p.up > 0:
		cfg.Direction = iperf3.Bidir
	case p.down > 0:
		cfg.Direction = iperf3.Download
	default:
		cfg.Direction = iperf3.Upload
	}
	// The server may still be ending the test before ours (one of this
	// run's phases, or a test the user ran just before): it then refuses
	// or says it is busy for a moment. A stranger's test outlasts the
	// 2 s, and is then reported as a busy server.
	cfg.Settle = 2 * time.Second
	// Streams as iperf3 creates them: the ones we send on first.
	type slot struct {
		dir, label string
		dscp       int
	}
	var slots []slot
	for i := 0; i < cfg.Streams*(1+btoi(cfg.Direction == iperf3.Bidir)); i++ {
		dir, idx := DirUp, i
		if cfg.Direction == iperf3.Download || i >= cfg.Streams {
			dir, idx = DirDown, i%cfg.Streams
		}
		label, dscp := "BE", DSCPCS0
		if c.o.Mode == ModeRRUL {
			label, dscp = rrulMarks[idx%4].label, rrulMarks[idx%4].dscp
		} else if cfg.Streams > 1 {
			label = fmt.Sprintf("BE%d", idx+1)
		}
		slots = append(slots, slot{dir, label, dscp})
	}
	addr := c.server.String()
	cfg.Dial = func(ctx context.Context, i int, send bool) (net.Conn, error) {
		dscp := DSCPCS0
		if i >= 0 && i < len(slots) {
			dscp = slots[i].dscp
		}
		return c.dial(ctx, addr, dscp)
	}
	t, err := iperf3.Start(ctx, cfg)
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("bloat: iperf3 server %s, %s phase: %w", addr, p.name, err)
	}
	defer t.Close()
	if len(t.Streams) != len(slots) {
		return fmt.Errorf("bloat: iperf3 opened %d streams, expected %d", len(t.Streams), len(slots))
	}
	if c.o.Mode == ModeRRUL && p.down > 0 {
		c.note("the iperf3 server sends all downloads with one DSCP (CS0): iperf3 has one marking per test, so the BK, CS5 and EF download streams are marked only on our side (their ACKs)")
	}
	streams := make([]*stream, len(t.Streams))
	for i, ts := range t.Streams {
		st := &stream{dir: slots[i].dir, label: slots[i].label, dscp: slots[i].dscp, conn: ts.Conn, done: make(chan struct{})}
		if st.dir == DirUp {
			st.base, _ = bytesAcked(st.conn)
		}
		st.startT = time.Since(c.start)
		streams[i] = st
		go st.pump()
	}
	// Downloads first in the result, as with an sqm server.
	var ordered []*stream
	for _, dir := range []string{DirDown, DirUp} {
		for _, st := range streams {
			if st.dir == dir {
				ordered = append(ordered, st)
			}
		}
	}
	c.mu.Lock()
	c.streams = append(c.streams, ordered...)
	for _, st := range ordered {
		st.series = make([]float64, len(c.ticks))
	}
	c.mu.Unlock()

	select {
	case <-time.After(time.Until(end)):
	case <-ctx.Done():
	case <-t.Done():
		err = fmt.Errorf("bloat: iperf3 server %s, %s phase: %w", addr, p.name, t.Err())
	}
	c.stopIPerf3(ctx, t, streams)
	if err != nil {
		return err
	}
	return ctx.Err()
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// stopIPerf3 ends a phase's test. Counts are frozen first, then the test
// ends (TEST_END): the server closes the streams when it reads that, and
// closing them from our side first would make it fail the test on a write
// error instead of sending its results.
func (c *client) stopIPerf3(ctx context.Context, t *iperf3.Test, streams []*stream) {
	at := time.Since(c.start)
	counted := make([]int64, len(streams))
	for i, st := range streams {
		st.mu.Lock()
		st.final = st.bytesLocked()
		st.total = st.final
		st.stopped = true
		st.endT = at
		st.mu.Unlock()
		counted[i] = st.final
	}
	sentInPhase := make([]int64, len(streams))
	for i, st := range streams {
		if st.dir != DirUp {
			continue
		}
		st.conn.SetWriteDeadline(time.Now()) // unblocks the writer
		<-st.done
		// Bytes still in the socket buffer were written, not sent, in the
		// phase: they must not count.
		left, _ := notSent(st.conn)
		sentInPhase[i] = st.sent.Load() - left
		counted[i] = sentInPhase[i]
	}
	var elapsed time.Duration
	if len(streams) > 0 {
		elapsed = at - streams[0].startT
	}
	res, err := t.End(context.WithoutCancel(ctx), elapsed, counted)
	for _, st := range streams {
		st.conn.Close()
		<-st.done
	}
	if err != nil {
		if ctx.Err() == nil {
			c.note("%v; upload goodput of this phase counts the bytes acknowledged here", err)
		}
		return
	}
	byID := map[int]int64{}
	for _, sr := range res.Streams {
		byID[sr.ID] = sr.Bytes
	}
	for i, st := range streams {
		n, ok := byID[t.Streams[i].ID]
		if !ok {
			continue
		}
		st.peer = n
		if st.dir == DirUp {
			st.total = min(n, sentInPhase[i])
		}
	}
}

// servers says which servers a run used, as URLs.
func (c *client) servers(probes []ProbeSummary) *Servers {
	s := &Servers{Load: "sqm://" + c.server.String()}
	switch {
	case c.o.IPerf3 != "":
		s.Load = "iperf3://" + c.server.String()
	case c.o.NetPerf != "":
		s.Load = "netperf://" + c.server.String()
	}
	seen := map[string]bool{}
	for _, p := range probes {
		u := ""
		switch {
		case p.Protocol != "" && p.Server != "":
			u = p.Protocol + "://" + p.Server
		case p.Kind == "icmp":
			u = "icmp://" + c.server.Addr().String()
		default:
			u = "sqm://" + c.server.String()
		}
		if !seen[u] {
			seen[u] = true
			s.Latency = append(s.Latency, u)
		}
	}
	return s
}
