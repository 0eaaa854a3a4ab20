package bloat

import (
	"fmt"
	"net/netip"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestAdmission plays sequences of connections and sessions against small
// limits: each step says whether it must be admitted or refused and why.
func TestAdmission(t *testing.T) {
	lim := Limits{MaxStreams: 2, MaxClients: 2, MaxClientsPerAddr: 1, MaxHandshakes: 4, MaxHandshakesPerAddr: 2}.withDefaults()
	a := newAdmission(lim)
	var held []*ticket
	conn := func(addr, want string) {
		t.Helper()
		tk, why := a.admitConn(netip.MustParseAddr(addr))
		if why != want || (tk == nil) != (want != "") {
			t.Fatalf("conn from %s: ticket %v, refusal %q; want %q", addr, tk, why, want)
		}
		if tk != nil {
			held = append(held, tk)
		}
	}
	sess := func(addr, want string) {
		t.Helper()
		if why := a.admitSession(netip.MustParseAddr(addr)); why != want {
			t.Fatalf("session from %s: refusal %q, want %q", addr, why, want)
		}
	}
	// One address gets its share of the pool, not more.
	conn("192.0.2.1", "")
	conn("192.0.2.1", "")
	conn("192.0.2.1", refusedHandshakesPerAddr)
	// A /64 is one key, another /64 is another.
	conn("2001:db8::1", "")
	conn("2001:db8::2", "")
	conn("2001:db8::3", refusedHandshakesPerAddr)
	// The pool (4) is now full for everyone else.
	conn("198.51.100.1", refusedHandshakes)
	// A session's address is charged to the session, pool or no pool:
	// MaxStreams+1 = 3 connections per session.
	sess("203.0.113.9", "")
	for range 3 {
		conn("203.0.113.9", "")
	}
	// ... then it is a stranger like any other, and the pool is full.
	conn("203.0.113.9", refusedHandshakes)
	// Fair slots: one session per address key, MaxClients in all.
	sess("203.0.113.9", refusedSessionsPerAddr)
	sess("2001:db8::7", "")
	sess("2001:db8::8", refusedSessionsPerAddr)
	sess("192.0.2.1", refusedBusy)
	// Releasing everything, twice, leaves nothing charged.
	for _, tk := range held {
		a.release(tk)
		a.release(tk)
	}
	a.endSession(netip.MustParseAddr("203.0.113.9"))
	a.endSession(netip.MustParseAddr("2001:db8::7"))
	if !a.idle() {
		t.Errorf("charges left after releasing all: %+v", *a)
	}
	conn("198.51.100.1", "")
}

func TestNextAcceptDelay(t *testing.T) {
	var d time.Duration
	var got []time.Duration
	for range 10 {
		d = nextAcceptDelay(d)
		got = append(got, d)
	}
	want := []time.Duration{5, 10, 20, 40, 80, 160, 320, 640, 1000, 1000}
	for i := range want {
		if got[i] != want[i]*time.Millisecond {
			t.Fatalf("delays %v, want %v ms", got, want)
		}
	}
}

// TestLogLimiter floods the limiter with two reasons on a fake clock: the
// first line of each window is written, the rest are counted into one
// summary per window, and no event is lost from the counts.
func TestLogLimiter(t *testing.T) {
	var lines []string
	now := time.Unix(1e9, 0)
	l := newLogLimiter(func(f string, a ...any) { lines = append(lines, fmt.Sprintf(f, a...)) }, 10*time.Second)
	l.now = func() time.Time { return now }
	events := 0
	for i := range 1000 {
		peer := netip.AddrFrom4([4]byte{192, 0, 2, byte(i % 7)})
		l.printf("idle", peer, "idle %d", i)
		l.printf("bad", peer, "bad %d", i)
		events += 2
		now = now.Add(25 * time.Millisecond) // 25 s in all: windows at 0, 10, 20 s
		if i%100 == 0 {
			l.flush(false)
		}
	}
	l.flush(true)
	// 3 windows x 2 reasons: one line and one summary each.
	if len(lines) != 12 {
		t.Fatalf("%d lines, want 12:\n%s", len(lines), strings.Join(lines, "\n"))
	}
	sum := regexp.MustCompile(`^server: (\d+) more \((idle|bad)\) in the last \d+s, from (\d+) addresses`)
	counted := 0
	for _, line := range lines {
		if m := sum.FindStringSubmatch(line); m != nil {
			n, _ := strconv.Atoi(m[1])
			counted += n
			if m[3] != "7" {
				t.Errorf("summary %q: want 7 addresses", line)
			}
			continue
		}
		counted++
	}
	if counted != events {
		t.Errorf("lines account for %d events, want %d:\n%s", counted, events, strings.Join(lines, "\n"))
	}
	// A lone event after a quiet spell is written at once, unsummarised.
	lines = nil
	now = now.Add(time.Minute)
	l.printf("idle", netip.Addr{}, "alone")
	l.flush(true)
	if len(lines) != 1 || lines[0] != "alone" {
		t.Errorf("lone event: %q", lines)
	}
}
