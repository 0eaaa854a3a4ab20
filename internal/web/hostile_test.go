package web

// Tests of the page against a hostile LAN and a hostile web page in a LAN
// browser (issue 25): connection caps and read timeouts, per-client login
// throttling, DNS rebinding, the config API's reach, its cost.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"sqm/internal/httpd"
	"sqm/internal/httpd/httpdtest"
	"sqm/internal/logger"
)

// guard is how long a test waits for something that must happen before it
// calls the code broken: a deadlock detector, not a speed requirement.
const guard = 10 * time.Second

// dialFrom connects to addr from the loopback address src (Linux answers
// all of 127.0.0.0/8), so one test has several clients.
func dialFrom(t *testing.T, src, addr string) net.Conn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}, Timeout: guard}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatalf("dial %s from %s: %v", addr, src, err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// refusedAt dials addr from src and reports whether the server closed
// the connection at once (a reset may even beat connect's return).
func refusedAt(t *testing.T, src, addr string) bool {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}, Timeout: guard}
	c, err := d.Dial("tcp", addr)
	if errors.Is(err, syscall.ECONNRESET) {
		return true
	}
	if err != nil {
		t.Fatalf("dial %s from %s: %v", addr, src, err)
	}
	defer c.Close()
	return closedByPeer(c)
}

// closedByPeer waits (up to guard) for c to be closed by the other end
// and reports whether it was; false if it stayed open.
func closedByPeer(c net.Conn) bool {
	c.SetReadDeadline(time.Now().Add(guard))
	_, err := io.Copy(io.Discard, c)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return false
	}
	return true // EOF (nil from Copy) or a reset
}

// TestLimitListener: over the per-client cap a connection is closed at
// accept and never handed on, while another address is served; at the
// total cap the biggest holder makes room for a smaller one; the counts go
// back to zero when the connections close, however often Close is called.
func TestLimitListener(t *testing.T) {
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer inner.Close()
	l := newLimitListener(inner, 5, 3)
	var refused []string
	var rmu sync.Mutex
	l.refused = func(k netip.Prefix, why string) {
		rmu.Lock()
		refused = append(refused, k.String()+": "+why)
		rmu.Unlock()
	}
	accepted := make(chan net.Conn, 16)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.Write([]byte("hi"))
			accepted <- c
		}
	}()
	addr := inner.Addr().String()
	served := func(c net.Conn) bool {
		c.SetReadDeadline(time.Now().Add(guard))
		b := make([]byte, 2)
		_, err := io.ReadFull(c, b)
		return err == nil && string(b) == "hi"
	}
	var server []net.Conn
	take := func() net.Conn {
		select {
		case c := <-accepted:
			server = append(server, c)
			return c
		case <-time.After(guard):
			t.Fatal("an admitted connection never came out of Accept")
			return nil
		}
	}
	a := []net.Conn{dialFrom(t, "127.0.0.2", addr), dialFrom(t, "127.0.0.2", addr), dialFrom(t, "127.0.0.2", addr)}
	for i, c := range a {
		take()
		if !served(c) {
			t.Fatalf("connection %d of 127.0.0.2 (cap 3) not served", i+1)
		}
	}
	if !refusedAt(t, "127.0.0.2", addr) {
		t.Fatal("the 4th connection of 127.0.0.2 stayed open; the cap is 3")
	}
	b := dialFrom(t, "127.0.0.3", addr)
	take()
	if !served(b) {
		t.Fatal("127.0.0.3 not served while 127.0.0.2 is at its cap")
	}
	if n, per := l.counts(); n != 4 || per[netip.MustParsePrefix("127.0.0.2/32")] != 3 {
		t.Fatalf("counts %d %v; want 4 with 3 for 127.0.0.2", n, per)
	}
	// Total cap 5: the 5th fits; the 6th (a new client) pushes out
	// 127.0.0.2's oldest, the biggest holder's.
	take0 := dialFrom(t, "127.0.0.4", addr)
	take()
	if !served(take0) {
		t.Fatal("5th connection (127.0.0.4) not served")
	}
	c5 := dialFrom(t, "127.0.0.5", addr)
	take()
	if !served(c5) {
		t.Fatal("a new client at the total cap not served")
	}
	if !closedByPeer(a[0]) {
		t.Error("at the total cap the biggest holder's oldest connection was not closed")
	}
	// Now 2,1,1,1: a sixth client evicts again (2 > 0+1); then all hold
	// one and a seventh is refused.
	c6 := dialFrom(t, "127.0.0.6", addr)
	take()
	if !served(c6) {
		t.Fatal("6th client not served")
	}
	if !refusedAt(t, "127.0.0.7", addr) {
		t.Error("at the total cap with every client holding one, a new client was not refused")
	}
	for _, c := range server {
		c.Close()
		c.Close() // net/http and an eviction may both close
	}
	if n, per := l.counts(); n != 0 || len(per) != 0 {
		t.Errorf("after closing everything: %d held, %v; want 0", n, per)
	}
	rmu.Lock()
	defer rmu.Unlock()
	if len(refused) != 2 || !strings.Contains(refused[0], "127.0.0.2/32: per-client") || !strings.Contains(refused[1], "total") {
		t.Errorf("refusals reported: %q", refused)
	}
}

func TestClientKey(t *testing.T) {
	for in, want := range map[string]string{
		"192.0.2.7:1":              "192.0.2.7/32",
		"[::ffff:192.0.2.7]:1":     "192.0.2.7/32",
		"[2001:db8:1:2:3:4:5:6]:1": "2001:db8:1:2::/64",
		"[2001:db8:1:2::9]:80":     "2001:db8:1:2::/64",
		"[fe80::1%eth0]:80":        "fe80::/64",
		"@":                        "invalid Prefix",
	} {
		if got := remoteKey(in).String(); got != want {
			t.Errorf("%s: %s; want %s", in, got, want)
		}
	}
}

// serve runs s on a loopback listener with lim and returns its address.
func serve(t *testing.T, s *Server, lim limits) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s.limits = lim
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { s.Serve(ctx, ln); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return ln.Addr().String()
}

// TestServeTimeouts: a client that sends headers and then stalls the body,
// or sends nothing at all, is closed after the read timeouts. Before the
// fix only ReadHeaderTimeout was set and the stalled body held the
// connection for as long as the client liked.
func TestServeTimeouts(t *testing.T) {
	s := &Server{Users: testUsers(t)}
	addr := serve(t, s, limits{readHeader: 200 * time.Millisecond, read: 300 * time.Millisecond})
	stalled := dialFrom(t, "127.0.0.2", addr)
	fmt.Fprintf(stalled, "POST /api/login HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"pass")
	silent := dialFrom(t, "127.0.0.3", addr)
	if !closedByPeer(stalled) {
		t.Error("a request whose body stalled kept its connection open")
	}
	if !closedByPeer(silent) {
		t.Error("a connection that sent nothing stayed open")
	}
}

// TestServeConnCaps: the page's server refuses a client's connections over
// its cap at once, serves another client meanwhile, and frees the places
// when the connections go.
func TestServeConnCaps(t *testing.T) {
	s := &Server{Users: testUsers(t), Status: func(context.Context) (any, error) { return 1, nil }}
	addr := serve(t, s, limits{maxPerClient: 4, maxConns: 32})
	var held []net.Conn
	for range 4 {
		held = append(held, dialFrom(t, "127.0.0.2", addr))
	}
	waitCount := func(want int) {
		t.Helper()
		for end := time.Now().Add(guard); ; time.Sleep(10 * time.Millisecond) {
			n := -1 // Serve has not started yet
			if l := s.conns.Load(); l != nil {
				n, _ = l.counts()
			}
			if n == want {
				return
			} else if time.Now().After(end) {
				t.Fatalf("%d connections held; want %d", n, want)
			}
		}
	}
	waitCount(4)
	if !refusedAt(t, "127.0.0.2", addr) {
		t.Fatal("the 5th connection of one client stayed open; the cap is 4")
	}
	other := &http.Client{Transport: &http.Transport{DialContext: (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.3")}}).DialContext}}
	res, err := other.Get("http://" + addr + "/")
	if err != nil || res.StatusCode != 200 {
		t.Fatalf("another client while the first is at its cap: %v %v", res, err)
	}
	res.Body.Close()
	other.CloseIdleConnections()
	for _, c := range held {
		c.Close()
	}
	waitCount(0)
}

// TestServeWANPeer: a connection whose client the router reaches through
// a shaped interface is closed unanswered; others are served.
func TestServeWANPeer(t *testing.T) {
	s := &Server{Users: testUsers(t), WANPeer: func(a netip.Addr) string {
		if a == netip.MustParseAddr("127.0.0.5") {
			return "wan0"
		}
		return ""
	}}
	addr := serve(t, s, limits{})
	if !refusedAt(t, "127.0.0.5", addr) {
		t.Error("a client on the WAN side was served")
	}
	lan := &http.Client{Transport: &http.Transport{DialContext: (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.6")}}).DialContext}}
	res, err := lan.Get("http://" + addr + "/")
	if err != nil || res.StatusCode != 200 {
		t.Fatalf("a LAN client: %v %v", res, err)
	}
	res.Body.Close()
}

func testUsers(t *testing.T) *Users {
	t.Helper()
	admin, _ := HashPassword("admin-secret")
	read, _ := HashPassword("read-secret")
	u, err := ParseUsers("users", []byte("admin "+admin+"\nread "+read+"\n"))
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// fakeClock is a clock tests step by hand.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Add(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

type result struct {
	code int
	body map[string]any
	hdr  httpd.Header
}

// call serves one request from remote straight through ServeHTTP.
func call(s *Server, remote, method, path, body string) result {
	req := httpdtest.NewRequest(method, path, strings.NewReader(body))
	req.RemoteAddr = remote
	req.Host = "127.0.0.1:8080"
	req.Header.Set("Content-Type", "application/json")
	w := httpdtest.NewRecorder()
	s.ServeHTTP(w, req)
	var m map[string]any
	json.Unmarshal(w.Body.Bytes(), &m)
	return result{w.Code, m, w.Header()}
}

func login(s *Server, remote, pw string) result {
	return call(s, remote, "POST", "/api/login", `{"password":"`+pw+`"}`)
}

// TestLoginThrottlePerClient is the case: 20 wrong guesses in
// flight from A, and the admin's login from B is checked and answered
// while A's guess is still being checked (before the fix every login
// waited on one lock, 500 ms per failure: B came after all of A's). A's
// other 19 are refused at once, and A backs off exponentially.
func TestLoginThrottlePerClient(t *testing.T) {
	clock := &fakeClock{now: time.Unix(1_000_000, 0)}
	var logs syncBuffer
	s := &Server{Users: testUsers(t), clock: clock.Now, Log: logger.New(logger.NewText(&logs, logger.LevelInfo))}
	entered, release := make(chan struct{}, 20), make(chan struct{})
	s.check = func(pw string) (Role, bool) {
		if pw == "guess" {
			entered <- struct{}{}
			<-release
			return "", false
		}
		return s.Users.Check(pw)
	}
	const A, B = "10.1.1.1:40000", "10.1.1.2:40000"
	results := make(chan result, 20)
	for range 20 {
		go func() { results <- login(s, A, "guess") }()
	}
	select {
	case <-entered:
	case <-time.After(guard):
		t.Fatal("no guess of A reached the password check")
	}
	for range 19 {
		select {
		case r := <-results:
			if r.code != http.StatusTooManyRequests || r.hdr.Get("Retry-After") == "" {
				t.Fatalf("a second guess of A while one is checked: %d %v; want 429 with Retry-After", r.code, r.body)
			}
		case <-time.After(guard):
			t.Fatal("A's other guesses waited instead of being refused")
		}
	}
	bDone := make(chan result, 1)
	go func() { bDone <- login(s, B, "admin-secret") }()
	select {
	case r := <-bDone:
		if r.code != http.StatusOK || r.body["role"] != "admin" {
			t.Fatalf("B's login: %d %v", r.code, r.body)
		}
	case <-time.After(guard):
		close(release)
		t.Fatal("B's correct login waited behind A's guess")
	}
	close(release)
	if r := <-results; r.code != http.StatusUnauthorized {
		t.Fatalf("A's checked guess: %d %v; want 401", r.code, r.body)
	}

	// A's next failures: free up to throttleFree, then 1 s, 2 s, 4 s...
	s.check = func(pw string) (Role, bool) { return s.Users.Check(pw) }
	for i := 2; i <= throttleFree; i++ {
		if r := login(s, A, "wrong"); r.code != http.StatusUnauthorized {
			t.Fatalf("A's failure %d: %d %v; want 401 (no back-off yet)", i, r.code, r.body)
		}
	}
	want := time.Second
	for i := 0; i < 10; i++ {
		if r := login(s, A, "wrong"); r.code != http.StatusUnauthorized {
			t.Fatalf("A's guess after its wait: %d %v; want 401", r.code, r.body)
		}
		r := login(s, A, "admin-secret") // even the right password waits
		if r.code != http.StatusTooManyRequests || r.hdr.Get("Retry-After") != fmt.Sprint(int(want/time.Second)) {
			t.Fatalf("A right after failure %d: %d Retry-After %q; want 429 after %v", throttleFree+1+i, r.code, r.hdr.Get("Retry-After"), want)
		}
		if r := login(s, B, "wrong"); r.code != http.StatusUnauthorized {
			t.Fatalf("B while A backs off: %d; want its own 401", r.code)
		}
		clock.Add(want - time.Millisecond)
		if r := login(s, A, "wrong"); r.code != http.StatusTooManyRequests {
			t.Fatalf("A before its wait is over: %d; want 429", r.code)
		}
		clock.Add(time.Millisecond)
		want = min(2*want, throttleMax)
	}
	if r := login(s, A, "admin-secret"); r.code != http.StatusOK {
		t.Fatalf("A's right password after the wait: %d %v", r.code, r.body)
	}
	if r := login(s, A, "wrong"); r.code != http.StatusUnauthorized {
		t.Errorf("A's first failure after a success: %d; want 401 (record cleared)", r.code)
	}

	// The log: one line per client per minute, however many attempts.
	lines := strings.Count(logs.String(), "web login failed")
	if lines == 0 || lines > 2+int(clock.Now().Sub(time.Unix(1_000_000, 0))/logEvery)*2 {
		t.Errorf("%d log lines about failed logins over %v:\n%s", lines, clock.Now().Sub(time.Unix(1_000_000, 0)), logs.String())
	}
}

// TestThrottleLogOncePerMinute: a client failing many times a minute is
// one line, with the count.
func TestThrottleLogOncePerMinute(t *testing.T) {
	clock := &fakeClock{now: time.Unix(1_000_000, 0)}
	var logs syncBuffer
	th := newThrottle(clock.Now, logger.New(logger.NewText(&logs, logger.LevelInfo)))
	k := clientKey(netip.MustParseAddr("10.0.0.1"))
	for range 200 {
		if ok, _, _ := th.begin(k); ok {
			th.end(k, false)
		}
		clock.Add(100 * time.Millisecond) // 20 s in all
	}
	if n := strings.Count(logs.String(), "web login failed"); n != 1 {
		t.Fatalf("%d lines in 20 s of failures; want 1:\n%s", n, logs.String())
	}
	clock.Add(logEvery)
	if ok, _, _ := th.begin(k); ok {
		th.end(k, false)
	}
	out := logs.String()
	if n := strings.Count(out, "web login failed"); n != 2 || !strings.Contains(out, "refused=") {
		t.Errorf("after a minute: %d lines; want a second with the counts:\n%s", n, out)
	}
}

// TestThrottleTableBounded: a hostile LAN with many addresses cannot grow
// the table past its cap, the clients idle longest go first, and one
// IPv6 /64 is one entry.
func TestThrottleTableBounded(t *testing.T) {
	clock := &fakeClock{now: time.Unix(1_000_000, 0)}
	th := newThrottle(clock.Now, logger.New(logger.Discard))
	th.max = 8
	fail := func(a string) {
		k := clientKey(netip.MustParseAddr(a))
		if ok, _, _ := th.begin(k); ok {
			th.end(k, false)
		}
		clock.Add(time.Second)
	}
	for i := range 100 {
		fail(fmt.Sprintf("2001:db8:0:1::%x", i+1)) // one /64
	}
	if n := th.size(); n != 1 {
		t.Fatalf("100 addresses of one /64: %d entries; want 1", n)
	}
	for i := range 1000 {
		fail(fmt.Sprintf("10.0.%d.%d", i/250, i%250+1))
	}
	if n := th.size(); n != 8 {
		t.Fatalf("after 1000 IPv4 clients: %d entries; cap is 8", n)
	}
	if _, ok := th.m[clientKey(netip.MustParseAddr("10.0.3.250"))]; !ok {
		t.Error("the newest client was evicted instead of the oldest")
	}
}

// TestHostPolicy: the names and addresses the page answers to (DNS
// rebinding: a page elsewhere that points its name at the router sends
// that name as Host).
func TestHostPolicy(t *testing.T) {
	clock := &fakeClock{now: time.Unix(1_000_000, 0)}
	own := []netip.Addr{netip.MustParseAddr("192.168.1.1"), netip.MustParseAddr("fd00::1"), netip.MustParseAddr("fe80::1%br-lan")}
	reads := 0
	h := newHostPolicy("192.168.1.1:8080", "OpenWrt", []string{"home.arpa"}, []string{"Router.Example.com"},
		func() ([]netip.Addr, error) { reads++; return own, nil }, clock.Now)
	for host, want := range map[string]bool{
		"192.168.1.1:8080":         true,
		"192.168.1.1":              true,
		"[fd00::1]:8080":           true,
		"[fd00::1]":                true,
		"[fe80::1]:8080":           true,
		"[::1]:8080":               true,
		"127.0.0.1:8080":           true,
		"[::ffff:192.168.1.1]":     true,
		"localhost:8080":           true,
		"LOCALHOST.":               true,
		"openwrt":                  true,
		"OpenWrt.lan:8080":         true,
		"openwrt.home.arpa":        true,
		"router.example.com:443":   true,
		"ROUTER.EXAMPLE.COM.":      true,
		"":                         false, // no Host
		"attacker.example:8080":    false,
		"attacker.example":         false,
		"openwrt.attacker.example": false,
		"192.168.1.2:8080":         false,
		"[fd00::2]:8080":           false,
		"fd00::1":                  false, // unbracketed
		"[fe80::1%25br-lan]":       false,
		"[fd00::1":                 false,
		"[fd00::1]x":               false,
		"192.168.1.1:http":         false,
	} {
		if got := h.allowed(host); got != want {
			t.Errorf("Host %q: allowed %v; want %v", host, got, want)
		}
	}
	// An address added later is served after the next read; strange
	// addresses do not make a read each.
	own = append(own, netip.MustParseAddr("192.168.2.1"))
	before := reads
	for range 100 {
		h.allowed("203.0.113.9")
	}
	if reads-before > 1 {
		t.Errorf("100 strange Hosts read the addresses %d times within %v", reads-before, hostRefresh)
	}
	clock.Add(hostRefresh)
	if !h.allowed("192.168.2.1:8080") {
		t.Error("an address the router gained is not served after the refresh")
	}
}

// TestHostRefusedEverywhere: the check covers the page, the API and
// /metrics (which needs no login), with a clear status and body.
func TestHostRefusedEverywhere(t *testing.T) {
	s := &Server{Users: testUsers(t), Metrics: httpd.HandlerFunc(func(w httpd.ResponseWriter, r *httpd.Request) { io.WriteString(w, "sqm_up 1\n") })}
	for _, path := range []string{"/", "/metrics", "/api/login", "/api/status"} {
		for host, want := range map[string]int{"attacker.example:8080": 421, "": 400, "127.0.0.1:8080": 0} {
			method := "GET"
			if path == "/api/login" {
				method = "POST"
			}
			req := httpdtest.NewRequest(method, path, strings.NewReader(`{"password":"admin-secret"}`))
			req.Header.Set("Content-Type", "application/json")
			req.Host = host
			w := httpdtest.NewRecorder()
			s.ServeHTTP(w, req)
			if want == 0 {
				if w.Code == 421 || w.Code == 400 && host != "" {
					t.Errorf("%s Host %q: %d", path, host, w.Code)
				}
				continue
			}
			if w.Code != want || !strings.Contains(w.Body.String(), "router") {
				t.Errorf("%s Host %q: %d %q; want %d with a reason", path, host, w.Code, w.Body.String(), want)
			}
		}
	}
}

const daemonConfig = `config sqm 'daemon'
	option http '8080'
	option http_users '/etc/sqm/web-users'
`

// TestConfigQueueSectionsOnly: the API changes and deletes only queue
// sections, what the page shows; the daemon's own section (its address,
// logins, certificate) and other types are refused and the file stays.
func TestConfigQueueSectionsOnly(t *testing.T) {
	r := newRig(t)
	src := sampleConfig + "\n" + daemonConfig + "\nconfig other 'x'\n\toption a '1'\n"
	if err := os.WriteFile(r.cfg, []byte(src), 0o640); err != nil {
		t.Fatal(err)
	}
	c := r.client()
	if c.login("admin-secret") != http.StatusOK {
		t.Fatal("login")
	}
	for _, body := range []map[string]any{
		{"section": "daemon", "set": map[string]string{"http": "0.0.0.0:80"}},
		{"section": "daemon", "set": map[string]string{"http_users": ""}},
		{"section": "@sqm[0]", "set": map[string]string{"http_cert": "/nonexistent"}},
		{"section": "daemon", "delete": true},
		{"section": "x", "delete": true},
		{"section": "@other[0]", "set": map[string]string{"a": "2"}},
	} {
		code, m := c.change("/api/config", body)
		errs, _ := m["errors"].([]any)
		if code != http.StatusForbidden || len(errs) == 0 || !strings.Contains(fmt.Sprint(errs[0]), "only queue sections") {
			t.Errorf("%v: %d %v; want 403 saying only queue sections", body, code, m)
		}
	}
	if b, _ := os.ReadFile(r.cfg); string(b) != src || r.applies != 0 {
		t.Errorf("refused changes touched the file or applied (applies %d):\n%s", r.applies, b)
	}
	// Queue sections still change, by name and by @queue[i].
	if code, m := c.change("/api/config", map[string]any{"section": "@queue[0]", "set": map[string]string{"upload": "6000"}}); code != http.StatusOK {
		t.Errorf("queue section by ref: %d %v", code, m)
	}
}

// TestConfigOptionsBounded: one change sets at most maxSetOptions options
// (each costs work under the config lock); more is a clear 400 and no
// change.
func TestConfigOptionsBounded(t *testing.T) {
	r := newRig(t)
	c := r.client()
	if c.login("admin-secret") != http.StatusOK {
		t.Fatal("login")
	}
	set := map[string]string{}
	for i := range maxSetOptions + 1 {
		set[fmt.Sprintf("x%d", i)] = "1"
	}
	code, m := c.change("/api/config", map[string]any{"section": "wan", "set": set})
	if code != http.StatusBadRequest || !strings.Contains(fmt.Sprint(m["error"]), fmt.Sprintf("at most %d", maxSetOptions)) {
		t.Errorf("%d options: %d %v; want 400 naming the bound", len(set), code, m)
	}
	if b, _ := os.ReadFile(r.cfg); string(b) != sampleConfig {
		t.Error("the refused change touched the file")
	}
	delete(set, "x0")
	if code, m := c.change("/api/config", map[string]any{"section": "wan", "set": set}); code != http.StatusOK {
		t.Errorf("%d options (the bound): %d %v", len(set), code, m)
	}
	if b, _ := os.ReadFile(r.cfg); bytes.Count(b, []byte("option x")) != maxSetOptions {
		t.Errorf("after %d options:\n%s", maxSetOptions, b)
	}
}
