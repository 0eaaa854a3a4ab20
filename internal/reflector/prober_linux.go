package reflector

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"sync"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"sqm/internal/bloat/probewire"
	"sqm/internal/irtt"
)

// Sockets, by index.
const (
	sockICMP4 = iota
	sockICMP6
	sockUDP4
	sockUDP6
	nSocks
)

type sock struct {
	fd  int // -1: not open
	raw bool
}

// Prober probes a set of targets, at each Poll. It has no goroutine of
// its own: the daemon's autorate loop ticks at the probe interval anyway,
// and polling its sockets there instead of waiting on them took the
// prober's wake-ups (one per probe and per reply, each waking the Go
// runtime's sysmon) out of a router's CPU budget. The replies' kernel
// receive stamps (SO_TIMESTAMPNS) keep the delays exact however late
// they are read.
type Prober struct {
	cfg     Config
	socks   [nSocks]sock
	started bool
	polled  time.Time // the previous Poll's start
	targets []tstate
	byUDP   map[netip.AddrPort]int
	icmpID  uint16
	// anchor is when the prober was made; wall times sent in probes and
	// used for one-way delays count from its wall reading by the
	// monotonic clock (see wall).
	anchor time.Time

	// ring holds the probes in flight by seq&mask; tail is the oldest
	// seq not yet answered or lost, next the seq of the next probe.
	ring       []pending
	mask       uint32
	tail, next uint32
	// inflight counts the live probes per socket: drain reads a socket
	// only while it waits for something on it.
	inflight [nSocks]int
	seen     []bool // Waiting's: targets reported

	// every is how often each target is probed now (Config.Interval, or
	// SetInterval's), owned by Poll; want is SetInterval's, under mu.
	every time.Duration

	mu      sync.Mutex
	replace map[int]Target
	want    time.Duration
	closed  bool

	buf    [2048]byte
	out    [256]byte
	oobBuf [16]uint64 // 8-aligned, for control messages
	rsa    unix.RawSockaddrAny
	iov    unix.Iovec
	msg    unix.Msghdr
	sample Sample
}

// tstate is one target's state.
type tstate struct {
	t        Target
	kind     Kind // how it is probed now
	sa       rawAddr
	sock     int
	next     time.Time     // next probe
	interval time.Duration // between probes: the prober's every, or longer if an irtt server says so
	granted  time.Duration // the interval an irtt server granted (0: none)
	// ICMP timestamps: replies seen, probes lost before the first reply,
	// why the stamps are unusable ("" if not known to be), whether a stamp
	// off a whole second was seen, and whole-second replies before that.
	tsReplies, tsLost, tsCoarse, tsMirror, tsGood int
	tsBad                                         string
	tsFine                                        bool
	// irtt: the open session, when to send the next open request, the
	// wait after that, and probes lost in a row.
	sess    *irtt.Session
	opened  time.Time // when sess opened
	openAt  time.Time
	backoff time.Duration
	misses  int
}

type pending struct {
	seq    uint32
	target int32
	live   bool
	sock   uint8 // the socket it was sent on (inflight)
	kind   Kind
	orig   uint32 // ICMP timestamp: the originate stamp sent
	sent   time.Time
}

// Timestamp targets that answer none of their first tsTries probes are
// probed with echo: many hosts and firewalls drop type 13.
const tsTries = 5

// tsRepeats is how many replies in a row show a fault that one reply
// cannot (whole-second or copied stamps) before the target's stamps are
// refused.
const tsRepeats = 8

// irtt sessions are reopened after this many probes lost in a row (the
// server restarted and forgot the token, or it ended the session and the
// close packet was lost), and open requests repeated from 1 s to 30 s.
const (
	irttMisses     = 5
	irttMinBackoff = time.Second
	irttMaxBackoff = 30 * time.Second
	irttDuration   = time.Hour // asked for; the server may grant less
)

// New checks cfg and opens the sockets its targets need. It fails when
// ICMP is needed and neither a datagram ICMP socket (allowed by
// net.ipv4.ping_group_range) nor a raw one (root) can be opened.
func New(cfg Config) (*Prober, error) {
	c, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	p, err := newProber(c)
	if err != nil {
		return nil, err
	}
	var need [nSocks]bool
	ts4 := false
	for _, t := range c.Targets {
		need[sockFor(t)] = true
		ts4 = ts4 || t.Kind == ICMPTimestamp
	}
	open := func() error {
		for s := range need {
			if !need[s] {
				continue
			}
			if err := p.open(s, s == sockICMP4 && ts4); err != nil {
				return err
			}
		}
		return nil
	}
	if c.Enter != nil {
		err = c.Enter(open)
	} else {
		err = open()
	}
	if err != nil {
		p.closeFDs()
		return nil, err
	}
	for i, t := range c.Targets {
		p.setTarget(i, t)
	}
	return p, nil
}

// newProber makes a prober for c without sockets: New opens them.
func newProber(c Config) (*Prober, error) {
	p := &Prober{cfg: c, byUDP: map[netip.AddrPort]int{}, icmpID: uint16(rand.Uint32()), replace: map[int]Target{}, anchor: time.Now(),
		every: c.Interval, want: c.Interval}
	for i := range p.socks {
		p.socks[i].fd = -1
	}
	for i, t := range c.Targets {
		if t.Kind.UDP() {
			ap := netip.AddrPortFrom(t.Addr, t.port())
			if _, dup := p.byUDP[ap]; dup {
				return nil, fmt.Errorf("reflector: %v is listed twice", t)
			}
			p.byUDP[ap] = i
		}
	}
	// The ring holds every probe that can be in flight, twice over.
	inflight := len(c.Targets) * (int(c.Timeout/c.Interval) + 2)
	size := 16
	for size < 2*inflight {
		size *= 2
	}
	p.ring = make([]pending, size)
	p.mask = uint32(size - 1)
	p.targets = make([]tstate, len(c.Targets))
	return p, nil
}

func sockFor(t Target) int {
	switch {
	case t.Kind.UDP() && t.Addr.Is4():
		return sockUDP4
	case t.Kind.UDP():
		return sockUDP6
	case t.Addr.Is4():
		return sockICMP4
	}
	return sockICMP6
}

// setTarget (re)starts target i as t.
func (p *Prober) setTarget(i int, t Target) {
	ts := tstate{t: t, kind: t.Kind, sock: sockFor(t), backoff: irttMinBackoff, interval: p.every}
	if ts.kind == ICMPTimestamp && !p.socks[sockICMP4].raw {
		ts.kind = ICMPEcho
		p.cfg.Logf("reflector: %v: no raw ICMP socket (needs root): probing with echo, round trip only", t)
	}
	ts.sa = newRawAddr(t.Addr, t.port())
	p.targets[i] = ts
}

// open opens socket s; for ICMP a raw socket first if raw (timestamps
// need one), else a datagram socket first, cheaper since the kernel hands
// it only its own replies.
func (p *Prober) open(s int, raw bool) error {
	fam, proto := unix.AF_INET, unix.IPPROTO_ICMP
	if s == sockICMP6 || s == sockUDP6 {
		fam, proto = unix.AF_INET6, unix.IPPROTO_ICMPV6
	}
	const flags = unix.SOCK_NONBLOCK | unix.SOCK_CLOEXEC
	var fd int
	var err error
	switch s {
	case sockUDP4, sockUDP6:
		fd, err = unix.Socket(fam, unix.SOCK_DGRAM|flags, unix.IPPROTO_UDP)
		if err != nil {
			return fmt.Errorf("reflector: UDP socket: %w", err)
		}
	default:
		order := []bool{raw, !raw}
		switch p.cfg.sockets {
		case "raw":
			order = []bool{true}
		case "dgram":
			order = []bool{false}
		}
		var errs []error
		for _, r := range order {
			typ := unix.SOCK_DGRAM
			if r {
				typ = unix.SOCK_RAW
			}
			fd, err = unix.Socket(fam, typ|flags, proto)
			if err == nil {
				raw = r
				break
			}
			errs = append(errs, err)
		}
		if err != nil {
			return fmt.Errorf("reflector: no ICMP socket (%v): run as root, or let this group ping (sysctl net.ipv4.ping_group_range)", errors.Join(errs...))
		}
		if raw {
			filterICMP(fd, s == sockICMP6)
		}
	}
	if fam == unix.AF_INET6 {
		unix.SetsockoptInt(fd, unix.IPPROTO_IPV6, unix.IPV6_V6ONLY, 1)
	}
	// Kernel receive stamps; without them (never seen on Linux) the
	// loop's read time is used.
	unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_TIMESTAMPNS, 1)
	p.socks[s] = sock{fd: fd, raw: raw && s <= sockICMP6}
	return nil
}

// filterICMP lets a raw socket receive only echo and timestamp replies,
// so the loop does not wake for every ICMP packet the host gets.
func filterICMP(fd int, v6 bool) {
	if !v6 {
		mask := ^uint32(1<<icmp4EchoReply | 1<<icmp4TSReply) // a set bit blocks that type
		unix.SetsockoptInt(fd, unix.SOL_RAW, unix.ICMP_FILTER, int(int32(mask)))
		return
	}
	var f [32]byte // a set bit blocks that type
	for i := range f {
		f[i] = 0xff
	}
	f[icmp6EchoReply>>3] &^= 1 << (icmp6EchoReply & 7)
	unix.SetsockoptString(fd, unix.IPPROTO_ICMPV6, unix.ICMPV6_FILTER, string(f[:]))
}

func (p *Prober) closeFDs() {
	for i := range p.socks {
		if p.socks[i].fd >= 0 {
			unix.Close(p.socks[i].fd)
			p.socks[i].fd = -1
		}
	}
}

// Close ends the irtt sessions (if Poll opened any) and frees the
// sockets; Poll fails after it. Call it from Poll's goroutine, or once
// nothing polls any more.
func (p *Prober) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil
	}
	p.closed = true
	p.closeSessions()
	p.closeFDs()
	return nil
}

// Replace makes target i probe t instead, from its next probe on: for a
// controller that drops a reflector that stopped answering or lies. The
// probes in flight to the old one are forgotten (not reported lost). t
// must need a socket the prober has, that is one of the kinds and
// address families of the targets it was created with.
func (p *Prober) Replace(i int, t Target) error {
	if i < 0 || i >= len(p.targets) {
		return fmt.Errorf("reflector: no target %d (have %d)", i, len(p.targets))
	}
	if err := t.check(); err != nil {
		return err
	}
	if p.socks[sockFor(t)].fd < 0 {
		return fmt.Errorf("reflector: %v: no socket for it (none of the first targets needed one)", t)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return errors.New("reflector: prober closed")
	}
	p.replace[i] = t
	return nil
}

// SetInterval makes each target probed every d from the next Poll on
// (never more often than Config.Interval, nor than an irtt server
// granted): the controller's idle interval while the link is idle,
// Config.Interval again when load comes back.
func (p *Prober) SetInterval(d time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.want = max(d, p.cfg.Interval)
}

// Poll does, without waiting, what the time since the last call asks:
// it reads the replies that arrived (timed by their kernel receive
// stamps, not by when they are read), reports the probes older than the
// timeout lost, and sends the probes due, calling emit with each sample.
// A caller polls once or twice an interval (the daemon's loop polls at
// each tick). A probe is sent when it is due within a quarter interval, so that a poll a little
// early does not put it off by a whole interval, and one a half interval
// early does not send it twice. emit must not keep the *Sample (it is
// reused). Poll fails only once the prober is closed.
func (p *Prober) Poll(emit func(*Sample)) error {
	p.mu.Lock()
	closed := p.closed
	p.mu.Unlock()
	if closed {
		return errors.New("reflector: prober closed")
	}
	now := time.Now()
	if !p.started {
		p.started = true
		for i := range p.targets {
			p.targets[i].next, p.targets[i].openAt = now, now
		}
	}
	p.applyReplacements()
	p.applyInterval(now)
	// A reply may have waited since the previous poll: seconds on an
	// idle link whose loop sleeps.
	window := p.cfg.Timeout
	if !p.polled.IsZero() {
		window += now.Sub(p.polled)
	}
	p.polled = now
	for s := range p.socks {
		if p.socks[s].fd >= 0 {
			p.drain(s, window, emit)
		}
	}
	now = time.Now()
	p.expire(now, emit)
	p.sendDue(now, now.Add(p.every/4), emit)
	return nil
}

// Waiting calls fn with each target's oldest probe still in flight (lost
// ones too, until Poll reports them lost), as of the last Poll. A probe
// stuck in a queue answers only that queue's delay later; how long it has
// waited so far is a lower bound on the delay, which the controller reads
// before the reply comes. Call it from Poll's goroutine.
func (p *Prober) Waiting(fn func(target int, sent time.Time)) {
	if len(p.seen) != len(p.targets) {
		p.seen = make([]bool, len(p.targets))
	}
	clear(p.seen)
	for seq := p.tail; seq != p.next; seq++ {
		sl := &p.ring[seq&p.mask]
		if !sl.live || sl.seq != seq || int(sl.target) >= len(p.seen) || p.seen[sl.target] {
			continue
		}
		p.seen[sl.target] = true
		fn(int(sl.target), sl.sent)
	}
}

// applyInterval takes SetInterval's interval. Probing faster again, every
// target is probed at once, not at the end of the idle wait.
func (p *Prober) applyInterval(now time.Time) {
	p.mu.Lock()
	d := p.want
	p.mu.Unlock()
	if d == p.every {
		return
	}
	faster := d < p.every
	p.every = d
	for i := range p.targets {
		ts := &p.targets[i]
		ts.interval = max(d, ts.granted)
		if faster && now.Before(ts.next) {
			ts.next = now
		}
	}
}

func (p *Prober) applyReplacements() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i, t := range p.replace {
		for s := p.tail; s != p.next; s++ {
			if sl := &p.ring[s&p.mask]; sl.live && int(sl.target) == i {
				p.settle(sl)
			}
		}
		delete(p.replace, i)
		old := p.targets[i].t
		ap, oldAP := netip.AddrPortFrom(t.Addr, t.port()), netip.AddrPortFrom(old.Addr, old.port())
		if j, dup := p.byUDP[ap]; t.Kind.UDP() && dup && j != i {
			p.cfg.Logf("reflector: target %d not replaced by %v: target %d probes it already", i, t, j)
			continue
		}
		p.closeSession(i)
		if old.Kind.UDP() {
			delete(p.byUDP, oldAP)
		}
		if t.Kind.UDP() {
			p.byUDP[ap] = i
		}
		next := p.targets[i].next
		p.setTarget(i, t)
		p.targets[i].next, p.targets[i].openAt = next, time.Now()
		p.cfg.Logf("reflector: target %d is now %v", i, t)
	}
}

func (p *Prober) closeSessions() {
	for i := range p.targets {
		p.closeSession(i)
	}
}

func (p *Prober) closeSession(i int) {
	ts := &p.targets[i]
	if ts.sess != nil {
		sendto(p.socks[ts.sock].fd, ts.sess.AppendClose(p.out[:0]), &ts.sa)
		ts.sess = nil
	}
}

// sendDue sends the probes due by due (now, or a little later: Poll's
// quarter interval).
func (p *Prober) sendDue(now, due time.Time, emit func(*Sample)) {
	for i := range p.targets {
		ts := &p.targets[i]
		if ts.kind == UDPIRTT && ts.sess == nil && !due.Before(ts.openAt) {
			req := irtt.AppendOpen(p.out[:0], irtt.Params{Duration: irttDuration, Interval: p.cfg.Interval,
				StampAt: irtt.AtBoth, Clock: irtt.Wall}, ts.t.Key)
			sendto(p.socks[ts.sock].fd, req, &ts.sa)
			ts.openAt = now.Add(ts.backoff)
			ts.backoff = min(2*ts.backoff, irttMaxBackoff)
		}
		if !due.Before(ts.next) {
			if ts.kind != UDPIRTT || ts.sess != nil {
				p.send(i, emit)
			}
			ts.next = ts.next.Add(ts.interval)
			if ts.next.Before(now) { // fell behind (a suspended router): no burst
				ts.next = now.Add(ts.interval)
			}
		}
	}
}

func (p *Prober) send(i int, emit func(*Sample)) {
	ts := &p.targets[i]
	seq := p.next
	sl := &p.ring[seq&p.mask]
	now := time.Now()
	if sl.live { // cannot happen with the ring's size; never overwrite silently
		p.lose(sl, now, emit)
	}
	var b []byte
	var orig uint32
	switch ts.kind {
	case ICMPEcho:
		typ := byte(icmp4Echo)
		if ts.sock == sockICMP6 {
			typ = icmp6Echo
		}
		b = appendEcho(p.out[:0], typ, p.icmpID, seq)
	case ICMPTimestamp:
		orig = msSinceMidnight(p.wall(now))
		b = appendTimestamp(p.out[:0], p.icmpID, uint16(seq), orig)
	case UDPSQM:
		pk := probewire.Packet{Kind: probewire.EchoRequest, Seq: uint64(seq), ClientSend: p.wall(now)}
		b = pk.Marshal(p.out[:])
	case UDPIRTT:
		b = ts.sess.AppendRequest(p.out[:0], seq)
	case UDPDNS:
		b = appendDNSQuery(p.out[:0], uint16(seq))
	}
	sendto(p.socks[ts.sock].fd, b, &ts.sa)
	*sl = pending{seq: seq, target: int32(i), live: true, sock: uint8(ts.sock), kind: ts.kind, orig: orig, sent: now}
	p.inflight[ts.sock]++
	p.next++
}

// expire reports the probes older than the timeout as lost.
func (p *Prober) expire(now time.Time, emit func(*Sample)) {
	for ; p.tail != p.next; p.tail++ {
		sl := &p.ring[p.tail&p.mask]
		if !sl.live {
			continue
		}
		if now.Sub(sl.sent) < p.cfg.Timeout {
			return
		}
		p.lose(sl, now, emit)
	}
}

// lose reports the probe in sl lost, and counts it against its target.
func (p *Prober) lose(sl *pending, now time.Time, emit func(*Sample)) {
	p.settle(sl)
	i := int(sl.target)
	ts := &p.targets[i]
	switch {
	case sl.kind == ICMPTimestamp && ts.kind == ICMPTimestamp && ts.tsReplies == 0:
		if ts.tsLost++; ts.tsLost >= tsTries {
			ts.kind = ICMPEcho
			p.cfg.Logf("reflector: %v: no reply to %d timestamp requests: probing with echo, round trip only", ts.t, tsTries)
		}
	case sl.kind == UDPIRTT && ts.sess != nil && !sl.sent.Before(ts.opened):
		// Only probes of this session count: those of the last one,
		// still expiring, would end the new one too.
		if ts.misses++; ts.misses >= irttMisses {
			ts.sess, ts.openAt, ts.backoff = nil, now, irttMinBackoff
			p.cfg.Logf("reflector: %v: %d probes lost in a row: reopening the session", ts.t, irttMisses)
		}
	}
	p.sample = Sample{Target: i, Addr: ts.t.Addr, Kind: sl.kind, Seq: sl.seq, Sent: sl.sent, Lost: true}
	emit(&p.sample)
}

// settle ends sl's probe: answered, lost or forgotten.
func (p *Prober) settle(sl *pending) {
	sl.live = false
	p.inflight[sl.sock]--
}

// waiting says whether socket s may hold a reply the prober waits for: a
// probe in flight on it, or an irtt session being opened.
func (p *Prober) waiting(s int) bool {
	if p.inflight[s] > 0 {
		return true
	}
	for i := range p.targets {
		if ts := &p.targets[i]; ts.sock == s && ts.kind == UDPIRTT && ts.sess == nil {
			return true
		}
	}
	return false
}

// drain reads socket s while it may hold a reply the prober waits for,
// and until it has nothing more. A socket with nothing in flight is not
// read: on a router's slow core a read that finds nothing is a system
// call like any other, and this saves two a tick. Anything else that
// arrived there (a late duplicate, another program's ping reply on a raw
// socket) waits for the next read, which takes it before the replies
// behind it.
func (p *Prober) drain(s int, window time.Duration, emit func(*Sample)) {
	fd := p.socks[s].fd
	for p.waiting(s) {
		n, from, at, ok := p.recv(fd)
		if !ok {
			return
		}
		now := time.Now()
		// The kernel's stamp is of the wall clock: only its distance to
		// now is used, so that at, as every time here, is monotonic. A
		// stamp that cannot be (missing, after now, older than the
		// previous poll by more than the timeout: a wall clock step
		// between, or an emulator that does not translate the control
		// message) is not used. Before 2026-12-06 the bound was the
		// timeout alone, and a reply read more than 2 s after it came
		// (a loop ticking every 5 s while idle) was timed as if it had
		// just come: a rise of seconds, and a cut at the next load.
		if d := at.Sub(now.Round(0)); !at.IsZero() && d <= 0 && d > -window {
			at = now.Add(d)
		} else {
			at = now
		}
		b := p.buf[:n]
		switch s {
		case sockICMP4:
			if p.socks[s].raw {
				if len(b) < 20 || b[0]>>4 != 4 || int(b[0]&15)*4 > len(b) {
					continue
				}
				b = b[int(b[0]&15)*4:]
			}
			p.icmp4(b, from.Addr(), at, now, emit)
		case sockICMP6:
			if seq, ok := parseEcho(b, icmp6EchoReply, p.icmpID, !p.socks[s].raw); ok {
				if sl, i := p.match(seq, ICMPEcho, from.Addr()); sl != nil {
					p.emitReply(i, sl, at, now, 0, false, 0, 0, emit)
				}
			}
		default:
			p.udp(b, from, at, now, emit)
		}
	}
}

func (p *Prober) icmp4(b []byte, from netip.Addr, at, now time.Time, emit func(*Sample)) {
	anyID := !p.socks[sockICMP4].raw
	if seq, ok := parseEcho(b, icmp4EchoReply, p.icmpID, anyID); ok {
		if sl, i := p.match(seq, ICMPEcho, from); sl != nil {
			p.emitReply(i, sl, at, now, 0, false, 0, 0, emit)
		}
		return
	}
	r, ok := parseTimestampReply(b)
	if !ok || r.id != p.icmpID {
		return
	}
	sl, i := p.match(p.widen(r.seq), ICMPTimestamp, from)
	if sl == nil || sl.orig != r.orig {
		return
	}
	ts := &p.targets[i]
	ts.tsReplies++
	why := CheckTimestamps(r.orig, r.receive, r.transmit)
	if why == "" && !ts.tsFine {
		if r.receive%1000 != 0 || r.transmit%1000 != 0 {
			ts.tsFine = true
		} else if ts.tsCoarse++; ts.tsCoarse >= tsRepeats {
			why = tsCoarse
		}
	}
	// Stamps equal to the originate stamp while the round trip takes
	// milliseconds: a reflector copying it, not stamping.
	if r.receive == r.orig && r.transmit == r.orig && at.Sub(sl.sent) >= 2*time.Millisecond {
		if ts.tsMirror++; ts.tsMirror >= tsRepeats && why == "" {
			why = tsMirror
		}
	} else {
		ts.tsMirror = 0
	}
	if why != "" && ts.tsBad == "" {
		ts.tsBad = why
		p.cfg.Logf("reflector: %v: %s: round trip only", ts.t, why)
	}
	if why == "" {
		ts.tsGood++
	}
	var up, down, turn time.Duration
	// One-way delays only after tsRepeats good replies: the faults seen
	// only across replies are caught before a controller gets any.
	oneWay := ts.tsBad == "" && ts.tsFine && ts.tsGood >= tsRepeats
	if oneWay {
		up, down = timestampDelays(p.wall(sl.sent), p.wall(at), r.receive, r.transmit)
		turn = wrapDay(time.Duration(int64(r.transmit)-int64(r.receive)) * time.Millisecond)
	}
	p.emitReply(i, sl, at, now, turn, oneWay, up, down, emit)
}

func (p *Prober) udp(b []byte, from netip.AddrPort, at, now time.Time, emit func(*Sample)) {
	i, ok := p.byUDP[from]
	if !ok {
		return
	}
	ts := &p.targets[i]
	switch ts.kind {
	case UDPSQM:
		var pk probewire.Packet
		if pk.Unmarshal(b) != nil || pk.Kind != probewire.EchoReply || pk.Seq > 0xffffffff {
			return
		}
		sl, _ := p.match(uint32(pk.Seq), UDPSQM, from.Addr())
		if sl == nil || p.wall(sl.sent) != pk.ClientSend {
			return
		}
		up := time.Duration(pk.ServerRecv - pk.ClientSend)
		down := time.Duration(p.wall(at) - pk.ServerSend)
		p.emitReply(i, sl, at, now, time.Duration(pk.ServerSend-pk.ServerRecv), true, up, down, emit)
	case UDPDNS:
		id, ok := parseDNSReply(b)
		if !ok {
			return
		}
		if sl, _ := p.match(p.widen(id), UDPDNS, from.Addr()); sl != nil {
			p.emitReply(i, sl, at, now, 0, false, 0, 0, emit)
		}
	case UDPIRTT:
		if len(b) >= 4 && b[3]&irtt.FlagOpen != 0 {
			s, err := irtt.ParseOpenReply(b, ts.t.Key)
			if err != nil {
				p.cfg.Logf("reflector: %v: open refused: %v", ts.t, err)
				return
			}
			if ts.sess == nil {
				ts.sess, ts.misses, ts.backoff, ts.opened = s, 0, irttMinBackoff, now
				// A server that grants a longer interval drops what
				// comes faster: follow it.
				ts.granted = s.Params.Interval
				ts.interval = max(p.every, ts.granted)
				wall, _ := s.HasStamps()
				p.cfg.Logf("reflector: %v: session open (interval %v, duration %v, wall stamps %v)", ts.t, s.Params.Interval, s.Params.Duration, wall)
			}
			return
		}
		if ts.sess == nil {
			return
		}
		pk, err := ts.sess.ParseReply(b)
		if errors.Is(err, irtt.ErrClosed) || (err == nil && pk.Flags&irtt.FlagClose != 0) {
			ts.sess, ts.openAt, ts.backoff = nil, now, irttMinBackoff
			p.cfg.Logf("reflector: %v: the server closed the session: reopening", ts.t)
		}
		if err != nil {
			return
		}
		sl, _ := p.match(pk.Seqno, UDPIRTT, from.Addr())
		if sl == nil {
			return
		}
		ts.misses = 0
		wall, mono := false, false
		if ts.sess != nil {
			wall, mono = ts.sess.HasStamps()
		}
		var up, down, turn time.Duration
		if wall {
			up = time.Duration(pk.Receive.Wall - p.wall(sl.sent))
			down = time.Duration(p.wall(at) - pk.Send.Wall)
			turn = time.Duration(pk.Send.Wall - pk.Receive.Wall)
		}
		if mono {
			turn = time.Duration(pk.Send.Mono - pk.Receive.Mono)
		}
		p.emitReply(i, sl, at, now, turn, wall, up, down, emit)
	}
}

// wall is t on the wall clock as it read when the prober was made, moved
// on by the monotonic clock: Unix nanoseconds for stamps and one-way
// delays that a step of the wall clock does not move. A router sets its
// clock by NTP after boot, often after the daemon started; with the wall
// clock itself, such a step would shift every one-way delay's baseline
// by the step, and a controller would read a step forward as that much
// more delay downstream. The monotonic clock keeps NTP's frequency
// corrections, so it does not drift from the reflectors' clocks.
func (p *Prober) wall(t time.Time) int64 {
	return p.anchor.UnixNano() + int64(t.Sub(p.anchor))
}

// widen turns the 16-bit sequence of an ICMP timestamp reply (or a DNS
// reply's id) into the latest full sequence number with those low bits.
func (p *Prober) widen(s uint16) uint32 {
	full := p.next&^0xffff | uint32(s)
	if full-p.next < 0x80000000 { // full >= next: from the last round
		full -= 0x10000
	}
	return full
}

// match finds the live probe seq of kind sent to from.
func (p *Prober) match(seq uint32, kind Kind, from netip.Addr) (*pending, int) {
	sl := &p.ring[seq&p.mask]
	if !sl.live || sl.seq != seq || sl.kind != kind {
		return nil, 0
	}
	i := int(sl.target)
	if p.targets[i].t.Addr != from {
		return nil, 0
	}
	return sl, i
}

// emitReply reports the reply to sl received at (kernel stamp) and read
// at now; turn is the reflector's receive-to-send time, if known.
func (p *Prober) emitReply(i int, sl *pending, at, now time.Time, turn time.Duration, oneWay bool, up, down time.Duration, emit func(*Sample)) {
	p.settle(sl)
	rtt := at.Sub(sl.sent)
	if turn > 0 && turn < rtt {
		rtt -= turn
	}
	p.sample = Sample{Target: i, Addr: p.targets[i].t.Addr, Kind: sl.kind, Seq: sl.seq, Sent: sl.sent,
		RTT: rtt, OneWay: oneWay, Up: up, Down: down}
	emit(&p.sample)
}

// recv reads one datagram without blocking or allocating: its length,
// source and kernel receive time (zero if none); ok is false when there
// is nothing to read.
func (p *Prober) recv(fd int) (n int, from netip.AddrPort, at time.Time, ok bool) {
	oob := unsafe.Slice((*byte)(unsafe.Pointer(&p.oobBuf[0])), len(p.oobBuf)*8)
	p.iov.Base = &p.buf[0]
	p.iov.SetLen(len(p.buf))
	p.msg = unix.Msghdr{Name: (*byte)(unsafe.Pointer(&p.rsa)), Namelen: unix.SizeofSockaddrAny, Iov: &p.iov, Control: &oob[0]}
	p.msg.SetIovlen(1)
	p.msg.SetControllen(len(oob))
	for {
		r, _, e := unix.RawSyscall(unix.SYS_RECVMSG, uintptr(fd), uintptr(unsafe.Pointer(&p.msg)), unix.MSG_DONTWAIT)
		if e == unix.EINTR {
			continue
		}
		if e != 0 {
			// EAGAIN: drained. Anything else (an ICMP error queued on the
			// UDP socket) is nothing to report either.
			return 0, from, at, false
		}
		n = int(r)
		break
	}
	switch p.rsa.Addr.Family {
	case unix.AF_INET:
		sa := (*unix.RawSockaddrInet4)(unsafe.Pointer(&p.rsa))
		pb := (*[2]byte)(unsafe.Pointer(&sa.Port))
		from = netip.AddrPortFrom(netip.AddrFrom4(sa.Addr), uint16(pb[0])<<8|uint16(pb[1]))
	case unix.AF_INET6:
		sa := (*unix.RawSockaddrInet6)(unsafe.Pointer(&p.rsa))
		pb := (*[2]byte)(unsafe.Pointer(&sa.Port))
		from = netip.AddrPortFrom(netip.AddrFrom16(sa.Addr), uint16(pb[0])<<8|uint16(pb[1]))
	}
	return n, from, rxTime(oob[:p.msg.Controllen]), true
}

// rawAddr is a target's address as sendto(2) takes it, built once.
type rawAddr struct {
	sa  unix.RawSockaddrInet6 // or a RawSockaddrInet4 at its start
	len uintptr
}

func newRawAddr(a netip.Addr, port uint16) rawAddr {
	var r rawAddr
	pb := (*[2]byte)(unsafe.Pointer(&r.sa.Port)) // the same offset in both
	pb[0], pb[1] = byte(port>>8), byte(port)
	if a.Is4() {
		sa := (*unix.RawSockaddrInet4)(unsafe.Pointer(&r.sa))
		sa.Family, sa.Addr, r.len = unix.AF_INET, a.As4(), unix.SizeofSockaddrInet4
		return r
	}
	r.sa.Family, r.sa.Addr, r.len = unix.AF_INET6, a.As16(), unix.SizeofSockaddrInet6
	return r
}

// sendto sends b to a without waiting: the sockets are non-blocking, and
// a send that fails (no route while the WAN is down, a full buffer) is a
// probe that will not be answered, reported lost after the timeout.
//
// It and recv are raw system calls: one that returns at once has no need
// to tell the runtime it may block, and doing so on a slow core cost the
// loop more than the call (the runtime then hands the processor to
// another thread and polls every 20 us for a while; netlink's
// sockaddr.go has the measurements).
func sendto(fd int, b []byte, a *rawAddr) {
	if len(b) == 0 {
		return
	}
	unix.RawSyscall6(unix.SYS_SENDTO, uintptr(fd), uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)), 0,
		uintptr(unsafe.Pointer(&a.sa)), a.len)
}

// rxTime finds the SO_TIMESTAMPNS stamp among control messages.
func rxTime(oob []byte) time.Time {
	hl := unix.CmsgLen(0)
	for len(oob) >= hl {
		h := (*unix.Cmsghdr)(unsafe.Pointer(&oob[0]))
		l := int(h.Len)
		if l < hl || l > len(oob) {
			break
		}
		if h.Level == unix.SOL_SOCKET && h.Type == unix.SCM_TIMESTAMPNS && l >= unix.CmsgLen(int(unsafe.Sizeof(unix.Timespec{}))) {
			ts := (*unix.Timespec)(unsafe.Pointer(&oob[hl]))
			return time.Unix(int64(ts.Sec), int64(ts.Nsec))
		}
		sp := unix.CmsgSpace(l - hl)
		if sp > len(oob) {
			break
		}
		oob = oob[sp:]
	}
	return time.Time{}
}
