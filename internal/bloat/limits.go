package bloat

import (
	"fmt"
	"net/netip"
	"sort"
	"sync"
	"time"

	"sqm/internal/peerkey"
)

// Defaults of the server's per-address limits (see Limits).
const (
	defaultMaxClientsPerAddr    = 1
	defaultMaxHandshakes        = 128
	defaultMaxHandshakesPerAddr = 8
	defaultHandshakeTimeout     = 5 * time.Second
)

// addrKey is the unit the server counts a peer's connections and sessions
// in; peerkey owns the rule (IPv4 address, IPv6 /64) for every server.
var addrKey = peerkey.Of

// admission decides which connections and sessions the server takes on.
// Its methods are called with the server's mutex held.
//
// A connection that has not yet said what it is (hello or stream) is "in
// handshake" and is charged at accept time, when only the peer's address is
// known. Strangers share a server-wide pool and each address key has a
// small share of it, so one host cannot fill the pool. Connections from an
// address that holds a session are charged to that session instead
// (MaxStreams+1 per session), which is where its load-stream dials come
// from: strangers filling the pool, even from many addresses, cannot stop a
// running test from opening its streams. The stream's token is checked
// against that session once it arrives.
type admission struct {
	lim Limits

	handshakes   int                  // strangers' connections in handshake
	handshakesBy map[netip.Prefix]int // ... per address key
	// connections in handshake charged to the sessions of an address
	sessionConns map[netip.Addr]int

	sessions   int
	sessionsBy map[netip.Prefix]int
	sessionsAt map[netip.Addr]int // live sessions per exact peer address
}

func newAdmission(lim Limits) *admission {
	return &admission{
		lim:          lim,
		handshakesBy: map[netip.Prefix]int{},
		sessionConns: map[netip.Addr]int{},
		sessionsBy:   map[netip.Prefix]int{},
		sessionsAt:   map[netip.Addr]int{},
	}
}

// ticket is one admitted connection's charge, returned by admitConn and
// given back (once) by release.
type ticket struct {
	peer      netip.Addr
	key       netip.Prefix
	ofSession bool // charged to the sessions of peer, not the strangers' pool
	released  bool
}

// Refusal reasons, also the keys of the refusal counters and of the log
// limiter, so each kind of refusal gets its own summary line.
const (
	refusedHandshakesPerAddr = "over the per-address handshake limit"
	refusedHandshakes        = "handshake pool full"
	refusedSessionsPerAddr   = "address already testing"
	refusedBusy              = "all session slots taken"
)

// admitConn charges a new connection from peer, or says why not.
func (a *admission) admitConn(peer netip.Addr) (*ticket, string) {
	peer = peer.Unmap()
	t := &ticket{peer: peer, key: addrKey(peer)}
	if n := a.sessionsAt[peer]; n > 0 && a.sessionConns[peer] < n*(a.lim.MaxStreams+1) {
		t.ofSession = true
		a.sessionConns[peer]++
		return t, ""
	}
	if a.handshakesBy[t.key] >= a.lim.MaxHandshakesPerAddr {
		return nil, refusedHandshakesPerAddr
	}
	if a.handshakes >= a.lim.MaxHandshakes {
		return nil, refusedHandshakes
	}
	a.handshakes++
	a.handshakesBy[t.key]++
	return t, ""
}

// release gives back a connection's charge: when it has become a session
// or a stream, or has been closed. Releasing twice is harmless.
func (a *admission) release(t *ticket) {
	if t == nil || t.released {
		return
	}
	t.released = true
	if t.ofSession {
		if a.sessionConns[t.peer]--; a.sessionConns[t.peer] <= 0 {
			delete(a.sessionConns, t.peer)
		}
		return
	}
	a.handshakes--
	if a.handshakesBy[t.key]--; a.handshakesBy[t.key] <= 0 {
		delete(a.handshakesBy, t.key)
	}
}

// admitSession takes a session slot for peer, or says why not.
func (a *admission) admitSession(peer netip.Addr) string {
	peer = peer.Unmap()
	key := addrKey(peer)
	if a.sessionsBy[key] >= a.lim.MaxClientsPerAddr {
		return refusedSessionsPerAddr
	}
	if a.sessions >= a.lim.MaxClients {
		return refusedBusy
	}
	a.sessions++
	a.sessionsBy[key]++
	a.sessionsAt[peer]++
	return ""
}

// holds reports whether peer's address key has a session.
func (a *admission) holds(peer netip.Addr) bool {
	return a.sessionsBy[addrKey(peer)] > 0
}

// endSession frees the slot admitSession took for peer.
func (a *admission) endSession(peer netip.Addr) {
	peer = peer.Unmap()
	key := addrKey(peer)
	a.sessions--
	if a.sessionsBy[key]--; a.sessionsBy[key] <= 0 {
		delete(a.sessionsBy, key)
	}
	if a.sessionsAt[peer]--; a.sessionsAt[peer] <= 0 {
		delete(a.sessionsAt, peer)
	}
}

// idle reports whether nothing is charged: for tests that check for leaks.
func (a *admission) idle() bool {
	return a.handshakes == 0 && len(a.handshakesBy) == 0 && len(a.sessionConns) == 0 &&
		a.sessions == 0 && len(a.sessionsBy) == 0 && len(a.sessionsAt) == 0
}

// Accept back-off: after a failed accept the server waits before the next,
// doubling from minAcceptDelay up to maxAcceptDelay, and starts over after
// a success. Out of file descriptors (EMFILE, ENFILE) the pending
// connection stays in the kernel's backlog, so accepting again at once
// would spin; a second is short enough that a freed descriptor is used
// soon after.
const (
	minAcceptDelay = 5 * time.Millisecond
	maxAcceptDelay = time.Second
)

func nextAcceptDelay(d time.Duration) time.Duration {
	if d <= 0 {
		return minAcceptDelay
	}
	return min(2*d, maxAcceptDelay)
}

// logLimiter keeps a flood from turning into a flood of log lines: per
// reason it writes the first line of an interval in full, counts the rest,
// and writes one summary line (how many, from how many address keys) when
// the interval is over. Without it every refused connection was a line,
// and a stranger could fill the server's disk or bury real events.
type logLimiter struct {
	logf  func(format string, args ...any)
	every time.Duration
	now   func() time.Time

	mu  sync.Mutex
	win map[string]*logWindow
}

type logWindow struct {
	start      time.Time
	suppressed int
	from       map[netip.Prefix]struct{}
	fromFull   bool // more distinct keys than maxSummaryAddrs
}

// maxSummaryAddrs bounds the address keys a window remembers for its
// summary, so a flood from many addresses cannot grow it without bound.
const maxSummaryAddrs = 4096

// defaultLogEvery is the length of a log window: a flood costs one line
// per reason per 10 s, and a lone refusal is still logged at once.
const defaultLogEvery = 10 * time.Second

func newLogLimiter(logf func(string, ...any), every time.Duration) *logLimiter {
	return &logLimiter{logf: logf, every: every, now: time.Now, win: map[string]*logWindow{}}
}

// printf logs format/args unless a line for reason was already written in
// the current window, in which case it only counts it against peer's key.
func (l *logLimiter) printf(reason string, peer netip.Addr, format string, args ...any) {
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	if w := l.win[reason]; w != nil {
		if now.Sub(w.start) < l.every {
			w.suppressed++
			if len(w.from) < maxSummaryAddrs {
				w.from[addrKey(peer)] = struct{}{}
			} else if _, ok := w.from[addrKey(peer)]; !ok {
				w.fromFull = true
			}
			return
		}
		l.summarize(reason, w, now)
	}
	l.win[reason] = &logWindow{start: now, from: map[netip.Prefix]struct{}{}}
	l.logf(format, args...)
}

// flush ends the windows that are over (all of them if final) and writes
// their summaries.
func (l *logLimiter) flush(final bool) {
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	reasons := make([]string, 0, len(l.win))
	for r := range l.win {
		reasons = append(reasons, r)
	}
	sort.Strings(reasons)
	for _, r := range reasons {
		if w := l.win[r]; final || now.Sub(w.start) >= l.every {
			l.summarize(r, w, now)
			delete(l.win, r)
		}
	}
}

func (l *logLimiter) summarize(reason string, w *logWindow, now time.Time) {
	if w.suppressed == 0 {
		return
	}
	addrs := fmt.Sprint(len(w.from))
	if w.fromFull {
		addrs = "more than " + addrs
	}
	l.logf("server: %d more (%s) in the last %v, from %s addresses (IPv6 counted per /64)",
		w.suppressed, reason, now.Sub(w.start).Round(time.Second), addrs)
}

// Sessionless echo (probewire.EchoRequest): a router's autorate probes a
// server for hours, so it cannot hold a session (those last minutes, one
// per address). The server answers echo requests without one, bounded so
// that a LAN full of strangers gets no more than a small reflector: a
// reply is no larger than its request, and these limits hold per second.
const (
	// maxEchoPerAddr is the answers per address key (peerkey) per second:
	// 20 is six times what autorate sends one server (one probe each
	// 300 ms), so several routers behind one NAT address still fit.
	maxEchoPerAddr = 20
	// maxEchoPerSecond caps the answers to everyone.
	maxEchoPerSecond = 2000
	// maxEchoAddrs bounds the table of address keys counted in one
	// second: a flood of spoofed sources fills it and is refused for the
	// rest of the second rather than grow it.
	maxEchoAddrs = 1024
)

// echoLimiter counts echo answers in the current one-second window.
type echoLimiter struct {
	sec   int64
	total int
	per   map[netip.Prefix]int
}

// allow reports whether an echo request from peer, received at now (Unix
// ns), gets an answer, and counts it if so.
func (e *echoLimiter) allow(peer netip.Addr, now int64) bool {
	if sec := now / int64(time.Second); sec != e.sec || e.per == nil {
		e.sec, e.total = sec, 0
		if e.per == nil {
			e.per = make(map[netip.Prefix]int)
		} else {
			clear(e.per)
		}
	}
	if e.total >= maxEchoPerSecond {
		return false
	}
	k := addrKey(peer)
	n, seen := e.per[k]
	if n >= maxEchoPerAddr || (!seen && len(e.per) >= maxEchoAddrs) {
		return false
	}
	e.per[k] = n + 1
	e.total++
	return true
}
