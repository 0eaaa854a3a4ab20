package bloat

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"net"
	"net/netip"
	"slices"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"sqm/internal/stats"
)

// Options configure a test run. Zero values take the defaults noted.
type Options struct {
	// Addr is the server, "host" or "host:port" (port DefaultPort if absent).
	Addr string
	Mode Mode // default ModeRRUL
	// Duration is the length of each load phase (default 60 s); in idle mode
	// the whole run (default 10 s).
	Duration time.Duration
	// Idle is the idle lead before the load and the tail after it (default
	// 5 s, flent's DELAY). Negative means none.
	Idle time.Duration
	// Interval between probes of one kind, and the throughput sampling step
	// (default 200 ms, flent's STEP_SIZE).
	Interval time.Duration
	// Streams per direction in speedtest mode (default 5).
	Streams int
	// Only, in speedtest mode, runs just that direction's phase (DirDown
	// or DirUp): sqm tune measures one direction per shaper rate.
	Only string
	// Network is "tcp" (default), "tcp4" or "tcp6" (-4/-6).
	Network string
	Secret  string
	// NoICMP disables the ICMP echo probe.
	NoICMP bool
	// IRTT, if set, is an irtt server ("host" or "host:port", port 2112 if
	// absent) that receives the UDP latency probes instead of the load
	// server, and the ICMP echo probes too; see probes.go.
	IRTT string
	// IRTTKey is the irtt server's HMAC key, for a server started with
	// --hmac; empty for none.
	IRTTKey []byte
	// IPerf3, if set, is a stock iperf3 server ("host" or "host:port",
	// port 5201 if absent) that carries the load instead of an 'sqm
	// server' (Addr must then be empty); see iperf3load.go.
	IPerf3 string
	// Enter, if set, wraps the creation of every socket the client opens
	// (control, load streams, probes): it must call fn on an OS thread that
	// is inside the wanted network namespace and return fn's error, which
	// is exactly what internal/netns's (*NS).Do does. Sockets stay in that
	// namespace afterwards. nil opens them in the caller's namespace.
	Enter func(fn func() error) error
	// Progress, if set, is called once per step from another goroutine.
	Progress func(Progress)
	// Logf, if set, receives warnings (also kept in Result.Notes).
	Logf func(format string, args ...any)
}

// DSCP code points used by RRUL.
const (
	DSCPCS0 = 0
	DSCPCS1 = 8
	DSCPCS5 = 40
	DSCPEF  = 46
)

// rrulMarks are the four RRUL stream markings, in flent's order.
var rrulMarks = [...]struct {
	label string
	dscp  int
}{{"BE", DSCPCS0}, {"BK", DSCPCS1}, {"CS5", DSCPCS5}, {"EF", DSCPEF}}

// HostPort adds DefaultPort to addr when it names no port. IPv6 literals
// may be given with or without brackets.
func HostPort(addr string) string { return withPort(addr, DefaultPort) }

// withPort adds port to addr when it names none. The sqm, irtt and iperf3
// servers all take HOST or HOST:PORT, so one rule decides what names a
// port: a bare IPv6 literal ("2001:db8::1") does not.
func withPort(addr string, port int) string {
	if _, _, err := net.SplitHostPort(addr); err == nil {
		return addr
	}
	if a, err := netip.ParseAddr(addr); err == nil {
		return netip.AddrPortFrom(a, uint16(port)).String()
	}
	if len(addr) > 2 && addr[0] == '[' && addr[len(addr)-1] == ']' {
		addr = addr[1 : len(addr)-1]
	}
	return net.JoinHostPort(addr, strconv.Itoa(port))
}

func (o *Options) defaults() error {
	if o.Mode == "" {
		o.Mode = ModeRRUL
	}
	switch o.Mode {
	case ModeRRUL, ModeSpeedtest, ModeIdle:
	default:
		return fmt.Errorf("bloat: unknown mode %q; use rrul, speedtest or idle", o.Mode)
	}
	switch {
	case o.Only != "" && o.Mode != ModeSpeedtest:
		return fmt.Errorf("bloat: a single direction (%q) is a speedtest-mode option", o.Only)
	case o.Only != "" && o.Only != DirDown && o.Only != DirUp:
		return fmt.Errorf("bloat: direction %q is not %q or %q", o.Only, DirDown, DirUp)
	}
	if o.Duration <= 0 {
		o.Duration = 60 * time.Second
		if o.Mode == ModeIdle {
			o.Duration = 10 * time.Second
		}
	}
	if o.Idle == 0 {
		o.Idle = 5 * time.Second
	}
	if o.Idle < 0 || o.Mode == ModeIdle {
		o.Idle = 0
	}
	if o.Interval <= 0 {
		o.Interval = 200 * time.Millisecond
	}
	if o.Interval < 10*time.Millisecond {
		return fmt.Errorf("bloat: interval %v is below 10ms; probes that fast measure the probes, not the link", o.Interval)
	}
	if o.Streams <= 0 {
		o.Streams = 5
	}
	if o.Mode == ModeRRUL {
		o.Streams = 4
	}
	switch o.Network {
	case "":
		o.Network = "tcp"
	case "tcp", "tcp4", "tcp6":
	default:
		return fmt.Errorf("bloat: network %q is not tcp, tcp4 or tcp6", o.Network)
	}
	if err := o.loadServer(); err != nil {
		return err
	}
	if err := o.checkIRTT(); err != nil {
		return err
	}
	if o.Enter == nil {
		o.Enter = func(fn func() error) error { return fn() }
	}
	if o.Logf == nil {
		o.Logf = func(string, ...any) {}
	}
	return nil
}

// plannedPhase is a phase of the schedule, in offsets from the start.
type plannedPhase struct {
	name       string
	start, end time.Duration
	down, up   int // streams
}

func schedule(o *Options) []plannedPhase {
	var ph []plannedPhase
	t := time.Duration(0)
	add := func(name string, d time.Duration, down, up int) {
		if d <= 0 {
			return
		}
		ph = append(ph, plannedPhase{name, t, t + d, down, up})
		t += d
	}
	switch o.Mode {
	case ModeIdle:
		add("idle", o.Duration, 0, 0)
		return ph
	case ModeRRUL:
		add("idle-before", o.Idle, 0, 0)
		add("load", o.Duration, o.Streams, o.Streams)
	case ModeSpeedtest:
		add("idle-before", o.Idle, 0, 0)
		if o.Only != DirUp {
			add("download", o.Duration, o.Streams, 0)
		}
		if o.Only != DirDown {
			add("upload", o.Duration, 0, o.Streams)
		}
	}
	add("idle-after", o.Idle, 0, 0)
	return ph
}

// client holds one run's state.
type client struct {
	o     Options
	start time.Time
	total time.Duration
	// end is when the server will end the session (granted in its
	// welcome), less endMargin: nothing the client waits for after its
	// schedule may go past it.
	end      time.Time
	server   netip.AddrPort // resolved from the control connection
	token    [tokenLen]byte
	kinds    []*kind
	notes    []string
	phase    atomic.Value // string
	lastRTT  atomic.Int64 // ns
	mu       sync.Mutex
	streams  []*stream
	ticks    []time.Duration
	at       []time.Duration // when each tick was really taken
	down, up []float64
}

// note keeps each distinct note once: on an OS that cannot mark DSCP,
// every marked stream's dial would otherwise repeat the same line.
func (c *client) note(format string, args ...any) {
	s := fmt.Sprintf(format, args...)
	c.mu.Lock()
	seen := slices.Contains(c.notes, s)
	if !seen {
		c.notes = append(c.notes, s)
	}
	c.mu.Unlock()
	if !seen {
		c.o.Logf("%s", s)
	}
}

// Run runs one test against a server and returns its result. It returns an
// error if the server cannot be reached or refuses the test; trouble later
// on (an ICMP socket that cannot be opened, a load stream that fails) is
// reported in Result.Notes and the run goes on. Cancelling ctx stops the run
// early with ctx's error.
func Run(ctx context.Context, o Options) (*Result, error) {
	if err := o.defaults(); err != nil {
		return nil, err
	}
	c := &client{o: o}
	plan := schedule(&c.o)
	c.total = plan[len(plan)-1].end
	addr := HostPort(o.Addr)

	var ctl net.Conn // an sqm server's control connection; none for iperf3
	if o.IPerf3 != "" {
		if err := c.resolveIPerf3(ctx); err != nil {
			return nil, err
		}
	} else {
		var err error
		ctl, err = c.dial(ctx, addr, DSCPCS0)
		if err != nil {
			return nil, fmt.Errorf("bloat: connect to server %s: %w (is 'sqm server' running there and the port open?)", addr, err)
		}
		defer ctl.Close()
		if err := c.handshake(ctl, plan); err != nil {
			return nil, fmt.Errorf("bloat: server %s: %w", addr, err)
		}
		ra := ctl.RemoteAddr().(*net.TCPAddr)
		ip, _ := netip.AddrFromSlice(ra.IP)
		c.server = netip.AddrPortFrom(ip.Unmap(), uint16(ra.Port))
	}

	for _, n := range osNotes() { // what this OS cannot give, e.g. receive timestamps on windows
		c.note("%s", n)
	}
	if err := c.openProbes(); err != nil {
		return nil, err
	}
	defer func() {
		for _, k := range c.kinds {
			k.conn.Close()
		}
	}()
	if o.IPerf3 != "" {
		if err := c.iperf3Probes(); err != nil {
			return nil, err
		}
	}

	c.start = time.Now()
	c.phase.Store(plan[0].name)
	runCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	// The server sends nothing on the control connection after welcome; a
	// read returning means it ended the session (shutdown, time limit).
	if ctl != nil {
		ctlDone := make(chan struct{})
		go func() {
			defer close(ctlDone)
			var b [1]byte
			ctl.Read(b[:])
			cancel(fmt.Errorf("bloat: server %s ended the session early (it may have shut down or hit its time limit)", addr))
		}()
		defer func() { ctl.Close(); <-ctlDone }()
	}
	var wg sync.WaitGroup
	for i, k := range c.kinds {
		wg.Add(2)
		offset := time.Duration(i) * c.o.Interval / time.Duration(len(c.kinds))
		go func() { defer wg.Done(); c.sendProbes(runCtx, k, offset) }()
		go func() { defer wg.Done(); k.receive(c) }()
	}
	samplerDone := make(chan struct{})
	go func() { defer close(samplerDone); c.sample(runCtx) }()

	err := c.runPhases(runCtx, plan)
	// Wait for late replies, then stop everything, before the server ends
	// the session.
	wait := 3 * c.maxRTT()
	wait = min(max(wait, 200*time.Millisecond), maxLateReplyWait, time.Until(c.end))
	if err == nil {
		select {
		case <-time.After(wait):
		case <-runCtx.Done():
			err = context.Cause(runCtx)
		}
	} else if cause := context.Cause(runCtx); cause != nil {
		err = cause
	}
	cancel(nil)
	<-samplerDone
	for _, k := range c.kinds {
		k.conn.Close()
	}
	wg.Wait()
	if err != nil {
		return nil, err
	}
	return c.result(plan), nil
}

func (c *client) dial(ctx context.Context, addr string, dscp int) (net.Conn, error) {
	d := net.Dialer{Timeout: 10 * time.Second, Control: func(network, address string, rc syscall.RawConn) error {
		if dscp != 0 {
			if err := setTOS(rc, dscp); err != nil {
				c.note("cannot mark traffic with DSCP %d: %v", dscp, err)
			}
		}
		return nil
	}}
	var conn net.Conn
	err := c.o.Enter(func() error {
		var err error
		conn, err = d.DialContext(ctx, c.o.Network, addr)
		return err
	})
	return conn, err
}

// endMargin is how much earlier than the server's end of the session the
// client stops waiting, for its own wake-up delays on a loaded machine.
const endMargin = 500 * time.Millisecond

func (c *client) handshake(ctl net.Conn, plan []plannedPhase) error {
	helloAt := time.Now() // the server's clock for the session starts later
	ctl.SetDeadline(helloAt.Add(10 * time.Second))
	defer ctl.SetDeadline(time.Time{})
	maxStreams := 0
	for _, p := range plan {
		maxStreams = max(maxStreams, p.down+p.up)
	}
	hello := &message{Type: msgHello, Version: ProtocolVersion, DurationMs: c.total.Milliseconds() + 1,
		GraceMs: clientGrace(plan).Milliseconds(), Streams: maxStreams}
	if err := writeMessage(ctl, hello); err != nil {
		return fmt.Errorf("send hello: %w", err)
	}
	m, err := readMessage(ctl)
	if err != nil {
		return fmt.Errorf("read challenge: %w (is this an sqm server?)", err)
	}
	if m.Type == msgError {
		return fmt.Errorf("refused: %s", m.Error)
	}
	if m.Type != msgChallenge {
		return fmt.Errorf("expected challenge, got %q", m.Type)
	}
	auth := &message{Type: msgAuth}
	if c.o.Secret != "" {
		auth.MAC = mac(c.o.Secret, m.Nonce)
	}
	if err := writeMessage(ctl, auth); err != nil {
		return fmt.Errorf("send auth: %w", err)
	}
	m, err = readMessage(ctl)
	if err != nil {
		return fmt.Errorf("read welcome: %w", err)
	}
	if m.Type == msgError {
		return fmt.Errorf("refused: %s", m.Error)
	}
	if m.Type != msgWelcome {
		return fmt.Errorf("expected welcome, got %q", m.Type)
	}
	copy(c.token[:], m.Token)
	grace := time.Duration(m.GraceMs) * time.Millisecond
	if grace == 0 {
		grace = sessionGrace // a server from before GraceMs
	}
	c.end = helloAt.Add(time.Duration(hello.DurationMs)*time.Millisecond + grace - endMargin)
	return nil
}

func (c *client) runPhases(ctx context.Context, plan []plannedPhase) error {
	for _, p := range plan {
		c.phase.Store(p.name)
		if c.o.IPerf3 != "" {
			if err := c.iperf3Phase(ctx, p); err != nil {
				return err
			}
			continue
		}
		// Dial all of a phase's streams at once: dialled one after another,
		// later handshakes would queue behind the first streams' load and
		// start late (seen as 0.5 s late uploads behind a 20 Mbit/s htb).
		n := p.down + p.up
		opened := make([]*stream, n)
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
			wg.Add(1)
			go func() {
				defer wg.Done()
				st, err := c.openStream(ctx, dir, label, dscp)
				if err != nil {
					if ctx.Err() == nil {
						c.note("%s stream %s could not start: %v", dir, label, err)
					}
					return
				}
				opened[i] = st
			}()
		}
		wg.Wait()
		var active []*stream
		for _, st := range opened {
			if st != nil {
				active = append(active, st)
			}
		}
		c.mu.Lock()
		c.streams = append(c.streams, active...) // in schedule order
		for _, st := range active {
			st.series = make([]float64, len(c.ticks))
		}
		c.mu.Unlock()
		if ctx.Err() != nil {
			c.stopAll(active)
			return ctx.Err()
		}
		select {
		case <-time.After(time.Until(c.start.Add(p.end))):
		case <-ctx.Done():
		}
		c.stopAll(active)
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
	return nil
}

// stream is one TCP load connection.
type stream struct {
	dir, label string
	dscp       int
	conn       net.Conn
	recv       atomic.Int64 // download: bytes read
	sent       atomic.Int64 // upload: bytes written (fallback without TCP_INFO)
	base       int64        // upload: acked bytes before the load began
	startT     time.Duration
	mu         sync.Mutex
	stopped    bool
	endT       time.Duration
	final      int64 // goodput counter when stopped (the time series ends here)
	total      int64 // bytes delivered: final, or the server's count for uploads
	peer       int64 // the other end's count, where it gives one (iperf3)
	prev       int64 // bytes at the previous sampling tick
	series     []float64
	done       chan struct{}
}

func (c *client) openStream(ctx context.Context, dir, label string, dscp int) (*stream, error) {
	// A stream still opening when the session ends is of no use.
	ctx, cancel := context.WithDeadline(ctx, c.end)
	defer cancel()
	conn, err := c.dial(ctx, c.server.String(), dscp)
	if err != nil {
		return nil, err
	}
	st := &stream{dir: dir, label: label, dscp: dscp, conn: conn, done: make(chan struct{})}
	conn.SetDeadline(minTime(time.Now().Add(10*time.Second), c.end))
	if err := writeMessage(conn, &message{Type: msgStream, Token: c.token[:], Dir: dir, DSCP: dscp}); err != nil {
		conn.Close()
		return nil, err
	}
	conn.SetDeadline(time.Time{})
	if dir == DirUp {
		st.base, _ = bytesAcked(conn)
	}
	st.startT = time.Since(c.start)
	go st.pump()
	return st, nil
}

// pump moves the stream's data until the connection fails or is closed:
// it reads a download and writes random bytes to an upload.
func (st *stream) pump() {
	defer close(st.done)
	buf := make([]byte, loadChunk)
	if st.dir == DirDown {
		setRcvLowat(st.conn, rcvLowat)
		for {
			n, err := st.conn.Read(buf)
			st.recv.Add(int64(n))
			if err != nil {
				return
			}
		}
	}
	rand.Read(buf)
	for {
		n, err := st.conn.Write(buf)
		st.sent.Add(int64(n))
		if err != nil {
			return
		}
	}
}

// bytes is the stream's goodput so far: received (down) or acknowledged by
// the server (up).
func (st *stream) bytes() int64 {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.stopped {
		return st.final
	}
	return st.bytesLocked()
}

func (st *stream) bytesLocked() int64 {
	if st.dir == DirDown {
		return st.recv.Load()
	}
	if n, ok := bytesAcked(st.conn); ok {
		return n - st.base
	}
	return st.sent.Load()
}

// stop ends the stream at offset at. An upload stream then stops writing,
// sends FIN and waits until drainEnd for the server's count of bytes
// received: data still queued on a bloated path when the phase ends was
// sent in the phase and counts for goodput, as on iperf3's receiver side.
// Acknowledgements alone would miss it, and on a bloated reverse path they
// lag by its whole queue (seen: a 20 Mbit/s RRUL upload read 11 Mbit/s).
// It returns false if an upload's count did not arrive by drainEnd.
func (st *stream) stop(at time.Duration, drainEnd time.Time) bool {
	st.mu.Lock()
	st.final = st.bytesLocked()
	st.total = st.final
	st.stopped = true
	st.endT = at
	st.mu.Unlock()
	if st.dir != DirUp {
		st.conn.Close()
		<-st.done
		return true
	}
	st.conn.SetWriteDeadline(time.Now()) // unblocks the writer
	<-st.done
	// Bytes still in the socket buffer were written, not sent, in the
	// phase: they must not count (they made a 50 Mbit/s htb read 50.2).
	left, ok := notSent(st.conn)
	sentInPhase := st.sent.Load() - left
	counted := true
	if cw, ok2 := st.conn.(interface{ CloseWrite() error }); ok && ok2 && cw.CloseWrite() == nil {
		st.conn.SetReadDeadline(drainEnd)
		var b [8]byte
		if _, err := io.ReadFull(st.conn, b[:]); err == nil {
			n := min(int64(binary.BigEndian.Uint64(b[:])), sentInPhase)
			if n > st.total {
				st.total = n
			}
		} else {
			counted = false
		}
	}
	st.conn.Close()
	return counted
}

// stopAll stops streams concurrently, so uploads drain in parallel.
//
// Known limit, measured in the lab's unshaped 5 Mbit/s upload (2.4 s of
// modem queue): the server's count never arrives in time there (the FIN
// queues behind megabytes of autotuned send buffer), so uploads fall back to
// acknowledged bytes (4.4-4.6 Mbit/s). Bounding the unsent data with
// TCP_NOTSENT_LOWAT made the count arrive within 3 s, but then the queued
// bytes count over the phase's time alone and the upload read 5.06 Mbit/s,
// above the link's 4.78: counting delivered bytes needs the time they took
// (e.g. the server stamping its count), not only the bytes.
//
// A drain waits for the queue seen by the probes to empty (twice the largest
// RTT, plus a second), at most maxUploadDrain and never past the session's
// end: a count that arrives later is lost (the goodput then counts only
// acknowledged bytes), but the session is not.
func (c *client) stopAll(streams []*stream) {
	at := time.Since(c.start)
	drain := min(time.Second+2*c.maxRTT(), maxUploadDrain)
	drainEnd := minTime(time.Now().Add(drain), c.end)
	var wg sync.WaitGroup
	var lost atomic.Int32
	ups := 0
	for _, st := range streams {
		if st.dir == DirUp {
			ups++
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if !st.stop(at, drainEnd) {
				lost.Add(1)
			}
		}()
	}
	wg.Wait()
	if n := lost.Load(); n > 0 {
		why := fmt.Sprintf("within %v", drain.Round(time.Millisecond))
		if !drainEnd.Before(c.end) {
			why = "before the session's end"
		}
		c.note("the server's count of the bytes received on %d of %d upload streams did not arrive %s; their goodput counts acknowledged bytes only", n, ups, why)
	}
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// sample records throughput every step, aligned to the start, and reports
// progress.
func (c *client) sample(ctx context.Context) {
	step := c.o.Interval
	c.mu.Lock()
	c.ticks = append(c.ticks, 0)
	c.at = append(c.at, 0)
	c.down = append(c.down, 0)
	c.up = append(c.up, 0)
	c.mu.Unlock()
	prevT := time.Duration(0)
	for k := 1; time.Duration(k)*step <= c.total; k++ {
		due := time.Duration(k) * step
		select {
		case <-time.After(time.Until(c.start.Add(due))):
		case <-ctx.Done():
			return
		}
		now := time.Since(c.start)
		dt := (now - prevT).Seconds()
		prevT = now
		c.mu.Lock()
		streams := append([]*stream(nil), c.streams...)
		c.mu.Unlock()
		var down, up float64
		vals := make([]float64, len(streams))
		for i, st := range streams {
			b := st.bytes()
			v := float64(b-st.prev) * 8 / dt / 1e6
			st.prev = b
			vals[i] = v
			if st.dir == DirDown {
				down += v
			} else {
				up += v
			}
		}
		c.mu.Lock()
		c.ticks = append(c.ticks, due)
		c.at = append(c.at, now)
		c.down = append(c.down, down)
		c.up = append(c.up, up)
		for i, st := range streams {
			st.series = append(st.series, vals[i])
		}
		for _, st := range c.streams[len(streams):] { // opened during this tick
			st.series = append(st.series, 0)
		}
		c.mu.Unlock()
		if c.o.Progress != nil {
			c.o.Progress(Progress{
				Phase: c.phase.Load().(string), Elapsed: now, Total: c.total,
				DownloadMbps: down, UploadMbps: up,
				LatencyMs: float64(c.lastRTT.Load()) / 1e6,
			})
		}
	}
}

func (c *client) maxRTT() time.Duration {
	var m time.Duration
	for _, k := range c.kinds {
		k.mu.Lock()
		for _, r := range k.recs {
			if r.got && r.rtt > m {
				m = r.rtt
			}
		}
		k.mu.Unlock()
	}
	return m
}

// result assembles the Result from the recorded samples and streams.
func (c *client) result(plan []plannedPhase) *Result {
	c.mu.Lock()
	defer c.mu.Unlock()
	r := &Result{
		FormatVersion: ResultVersion,
		Mode:          c.o.Mode,
		Server:        c.server.String(),
		Start:         c.start,
		IdleS:         c.o.Idle.Seconds(),
		LoadS:         c.o.Duration.Seconds(),
		StepS:         c.o.Interval.Seconds(),
		TotalS:        c.total.Seconds(),
		Notes:         c.notes,
	}
	if c.o.Mode == ModeIdle {
		r.LoadS = 0
	}
	for i, t := range c.ticks {
		r.Series.TS = append(r.Series.TS, t.Seconds())
		if i < len(c.at) {
			r.Series.AtS = append(r.Series.AtS, c.at[i].Seconds())
		}
		r.Series.DownloadMbps = append(r.Series.DownloadMbps, c.down[i])
		r.Series.UploadMbps = append(r.Series.UploadMbps, c.up[i])
	}
	for _, st := range c.streams {
		s := Stream{Dir: st.dir, Label: st.label, DSCP: st.dscp,
			StartS: st.startT.Seconds(), EndS: st.endT.Seconds(), Bytes: st.total, PeerBytes: st.peer, MbpsSeries: st.series}
		if d := st.endT - st.startT; d > 0 {
			s.Mbps = float64(st.total) * 8 / d.Seconds() / 1e6
		}
		if len(s.MbpsSeries) > len(c.ticks) {
			s.MbpsSeries = s.MbpsSeries[:len(c.ticks)]
		}
		r.Streams = append(r.Streams, s)
	}
	// Samples and the clock offset of each UDP kind.
	for _, k := range c.kinds {
		k.mu.Lock()
		off, hasOff := k.offset()
		for seq, rec := range k.recs {
			s := Sample{Kind: k.name, Seq: uint64(seq), TS: rec.sent.Seconds(), Lost: !rec.got}
			if rec.got {
				s.RTTMs = ms(rec.rtt)
				if rec.hasOWD && hasOff {
					s.OWDUpMs = float64(rec.a-off) / 1e6
					s.OWDDownMs = float64(rec.b+off) / 1e6
				}
			}
			r.Samples = append(r.Samples, s)
		}
		k.mu.Unlock()
	}
	sort.SliceStable(r.Samples, func(i, j int) bool { return r.Samples[i].TS < r.Samples[j].TS })

	phaseOf := func(t float64) *plannedPhase {
		for i := range plan {
			if t >= plan[i].start.Seconds() && t < plan[i].end.Seconds() {
				return &plan[i]
			}
		}
		return nil
	}
	loaded := func(p *plannedPhase) bool { return p != nil && p.down+p.up > 0 }
	collect := func(kind string, keep func(*plannedPhase) bool) stats.Summary {
		var rtts []float64
		sent := 0
		for _, s := range r.Samples {
			if kind != "" && s.Kind != kind {
				continue
			}
			p := phaseOf(s.TS)
			if p == nil || !keep(p) {
				continue
			}
			sent++
			if !s.Lost {
				rtts = append(rtts, s.RTTMs)
			}
		}
		return stats.Summarize(rtts, sent)
	}
	// The idle baseline is the latency before any load (or the whole run in
	// idle mode). The tail after the load is measured and reported as its
	// own phase, but it starts with whatever queue the load left behind (up
	// to seconds on a bloated link), so pooling it would raise the baseline
	// and hide part of the induced latency.
	baseline := func(p *plannedPhase) bool { return !loaded(p) && p.name != "idle-after" }
	r.Idle = collect("", baseline)
	r.Loaded = collect("", loaded)
	for _, k := range c.kinds {
		k.mu.Lock()
		up, down := k.upDSCP, k.downDSCP
		k.mu.Unlock()
		ps := ProbeSummary{Kind: k.name, DSCP: k.dscp,
			Idle:          collect(k.name, baseline),
			Loaded:        collect(k.name, loaded),
			ArrivedDSCPUp: up, ArrivedDSCPDown: down}
		if n := k.describe(&ps, r.Samples, func(t float64) bool { p := phaseOf(t); return p != nil && baseline(p) }, func(t float64) bool { return loaded(phaseOf(t)) }); n != "" {
			r.Notes = append(r.Notes, n)
		}
		if up >= 0 && up != k.dscp {
			r.Notes = append(r.Notes, fmt.Sprintf("%s probes sent with DSCP %d arrived at the server with DSCP %d: the path re-marks them on the way out", k.name, k.dscp, up))
		}
		if down >= 0 && down != k.dscp {
			r.Notes = append(r.Notes, fmt.Sprintf("%s replies sent with DSCP %d arrived here with DSCP %d: the path re-marks them on the way in", k.name, k.dscp, down))
		}
		var ups, downs []float64
		for _, s := range r.Samples {
			if s.Kind == k.name && !s.Lost && s.OWDUpMs != 0 && loaded(phaseOf(s.TS)) {
				ups = append(ups, s.OWDUpMs)
				downs = append(downs, s.OWDDownMs)
			}
		}
		if len(ups) > 0 {
			ps.LoadedOWDUpMs = stats.Summarize(ups, 0).MedianMs
			ps.LoadedOWDDownMs = stats.Summarize(downs, 0).MedianMs
		}
		r.Probes = append(r.Probes, ps)
	}
	r.Servers = c.servers(r.Probes)
	var downBytes, upBytes int64
	var downDur, upDur time.Duration
	for i := range plan {
		p := &plan[i]
		ph := Phase{Name: p.name, StartS: p.start.Seconds(), EndS: p.end.Seconds(),
			Latency: collect("", func(q *plannedPhase) bool { return q == p })}
		var db, ub int64
		first, last := time.Duration(-1), time.Duration(0)
		for _, st := range c.streams {
			if st.startT >= p.start && st.startT < p.end {
				if st.dir == DirDown {
					db += st.total
				} else {
					ub += st.total
				}
				if first < 0 || st.startT < first {
					first = st.startT
				}
				last = max(last, st.endT)
			}
		}
		// Goodput is over the time the streams were counted: from the first
		// one open to the stop. The phase's length would charge the streams'
		// setup to them (an iperf3 test's start waits for the previous test's
		// results and the server's new listening socket: 0.7 s of a 4 s phase
		// on a loaded machine) and ignore a late stop.
		d := p.end - p.start
		if first >= 0 && last > first {
			d = last - first
		}
		ph.DownloadMbps = float64(db) * 8 / d.Seconds() / 1e6
		ph.UploadMbps = float64(ub) * 8 / d.Seconds() / 1e6
		if p.down > 0 {
			downBytes += db
			downDur += d
		}
		if p.up > 0 {
			upBytes += ub
			upDur += d
		}
		r.Phases = append(r.Phases, ph)
	}
	if downDur > 0 {
		r.DownloadMbps = float64(downBytes) * 8 / downDur.Seconds() / 1e6
	}
	if upDur > 0 {
		r.UploadMbps = float64(upBytes) * 8 / upDur.Seconds() / 1e6
	}
	switch {
	case r.Loaded.Count > 0 && r.Idle.Count > 0:
		r.InducedMs = r.Loaded.MedianMs - r.Idle.MedianMs
		r.Grade = stats.Grade(r.InducedMs)
		r.RPM = stats.RPM(r.Loaded.MedianMs)
	case r.Idle.Count > 0:
		r.Grade = "-" // no load, no grade
		r.RPM = stats.RPM(r.Idle.MedianMs)
	default:
		r.Grade = "?"
	}
	r.RPMBand = stats.RPMBand(r.RPM)
	if math.IsNaN(r.InducedMs) {
		r.InducedMs = 0
	}
	return r
}

func ms(d time.Duration) float64 { return float64(d) / 1e6 }
