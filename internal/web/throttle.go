package web

import (
	"net/netip"
	"sync"
	"time"

	"sqm/internal/logger"
)

// throttle limits password guessing per client (clientKey: an IPv4
// address or an IPv6 /64). After throttleFree failed logins (typos) a
// client waits before its next one is even checked: 1 s, doubling with
// each further failure up to throttleMax; while it waits, or while one of its
// logins is being checked, its logins are refused at once (429) without
// hashing anything. Nothing is shared between clients but a map lookup,
// so a host that guesses never delays another host's login, and a success
// clears the client's record. The table holds at most throttleEntries
// clients: at the cap the one idle longest goes (a LAN rarely has that
// many IPv4 hosts, and IPv6 counts by /64).
type throttle struct {
	now func() time.Time
	log *logger.Logger
	max int

	mu      sync.Mutex
	m       map[netip.Prefix]*attempts
	lines   int       // log lines in the current minute, all clients
	linesAt time.Time // start of that minute
}

type attempts struct {
	fails int
	until time.Time // no login checked before this
	busy  bool      // a login is being checked
	last  time.Time // last attempt
	// What the log has not said yet: failures and refused attempts since
	// the client's last line, at most one line a minute per client.
	failed, refused int
	logged          time.Time
}

const (
	throttleFree    = 3
	throttleBase    = time.Second
	throttleMax     = 2 * time.Minute
	throttleForget  = 15 * time.Minute // a client quiet this long starts over
	throttleEntries = 1024
	logEvery        = time.Minute
	logLinesPerMin  = 30 // lines about failed logins, all clients together
)

func newThrottle(now func() time.Time, log *logger.Logger) *throttle {
	return &throttle{now: now, log: log, max: throttleEntries, m: map[netip.Prefix]*attempts{}}
}

func backoff(fails int) time.Duration {
	if fails <= throttleFree {
		return 0
	}
	d := throttleBase
	for i := throttleFree + 1; i < fails && d < throttleMax; i++ {
		d *= 2
	}
	return min(d, throttleMax)
}

// begin asks to check a login from key. When it may not, wait is how long
// the client should wait and why says why not.
func (t *throttle) begin(key netip.Prefix) (ok bool, wait time.Duration, why string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.now()
	e := t.m[key]
	if e != nil && now.Sub(e.last) > throttleForget && !e.busy {
		delete(t.m, key)
		e = nil
	}
	if e == nil {
		if len(t.m) >= t.max && !t.evict(now) {
			return false, throttleBase, "too many logins are being checked"
		}
		e = &attempts{}
		t.m[key] = e
	}
	e.last = now
	switch {
	case e.busy:
		wait, why = throttleBase, "another login from this address is being checked"
	case now.Before(e.until):
		wait, why = e.until.Sub(now), "too many failed logins from this address"
	default:
		e.busy = true
		return true, 0, ""
	}
	e.refused++
	t.note(key, e, now)
	return false, wait, why
}

// end records the outcome of the check begin allowed.
func (t *throttle) end(key netip.Prefix, success bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.now()
	e := t.m[key]
	if e == nil {
		return
	}
	e.busy = false
	if success {
		if e.failed+e.refused > 0 {
			t.line(key, e, now)
		}
		delete(t.m, key)
		return
	}
	e.fails++
	e.until = now.Add(backoff(e.fails))
	e.failed++
	t.note(key, e, now)
}

// evict makes room for one client: those quiet for throttleForget go, or
// else the one idle longest that is not being checked. mu is held.
func (t *throttle) evict(now time.Time) bool {
	var oldest netip.Prefix
	var found bool
	for k, e := range t.m {
		if e.busy {
			continue
		}
		if now.Sub(e.last) > throttleForget {
			delete(t.m, k)
			continue
		}
		if !found || e.last.Before(t.m[oldest].last) {
			oldest, found = k, true
		}
	}
	if len(t.m) < t.max {
		return true
	}
	if !found {
		return false
	}
	delete(t.m, oldest)
	return true
}

// note logs the client's unlogged attempts if its minute is over and the
// log's budget allows. mu is held.
func (t *throttle) note(key netip.Prefix, e *attempts, now time.Time) {
	if !e.logged.IsZero() && now.Sub(e.logged) < logEvery {
		return
	}
	t.line(key, e, now)
}

func (t *throttle) line(key netip.Prefix, e *attempts, now time.Time) {
	if now.Sub(t.linesAt) >= logEvery {
		t.linesAt, t.lines = now, 0
	}
	if t.lines >= logLinesPerMin {
		return // said at the client's next chance
	}
	t.lines++
	t.log.Warn("web login failed", "client", key.String(), "failed", e.failed, "refused", e.refused,
		"backoff", backoff(e.fails).String(), "note", "at most one line a minute per client")
	e.failed, e.refused, e.logged = 0, 0, now
}

// size is how many clients the table holds.
func (t *throttle) size() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.m)
}
