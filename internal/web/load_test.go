package web_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"sqm/internal/clitest"
	"sqm/internal/netns"
	"sqm/internal/testutil"
	"sqm/internal/web"
)

// TestWebUnderLoad is issue 25's load case on `sqm daemon --http` in
// namespaces: while one LAN host holds stalled connections (headers sent,
// the body never) and another guesses passwords as fast as it can, a third
// host's admin logs in, the status API keeps answering with fresh
// documents, the daemon keeps no more connections than its caps allow, its
// RSS stays within twice its idle value, and the shaping of wan0 is as it
// was. Before the caps and timeouts the daemon held every stalled
// connection (500 took it from 11.6 to 20.1 MB RSS and 510 descriptors),
// and each guess held one global lock for 500 ms, so the admin's login
// waited behind all of them.
//
// It opens 200 stalled connections; SQM_WEB_LOAD_CONNS raises that, and
// SQM_WEB_LOAD_BENCH=1 (make bench-web: 1,000 connections) also requires
// the admin's login to finish within 1 s, which a test on a shared
// machine must not assert.
func TestWebUnderLoad(t *testing.T) {
	testutil.RequireRoot(t)
	conns := 200
	if v := os.Getenv("SQM_WEB_LOAD_CONNS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("SQM_WEB_LOAD_CONNS=%q: want a number of connections", v)
		}
		conns = n
	}
	bench := os.Getenv("SQM_WEB_LOAD_BENCH") == "1"
	dir := t.TempDir()
	router := netns.NewT(t, "webLr")
	isp := netns.NewT(t, "webLi")
	lan := netns.NewT(t, "webLl")
	must(t, router.Veth("wan0", isp, "isp0"))
	must(t, router.Veth("lan0", lan, "host0"))
	must(t, router.AddAddr("wan0", "10.77.0.1/24"))
	must(t, isp.AddAddr("isp0", "10.77.0.2/24"))
	must(t, router.AddAddr("lan0", "10.79.0.1/24"))
	const staller, guesser, admin = "10.79.0.2", "10.79.0.3", "10.79.0.4"
	for _, a := range []string{staller, guesser, admin} {
		must(t, lan.AddAddr("host0", a+"/24"))
	}
	must(t, router.Up("lo", "wan0", "lan0"))
	must(t, isp.Up("lo", "isp0"))
	must(t, lan.Up("lo", "host0"))

	cfg := filepath.Join(dir, "sqm")
	must(t, os.WriteFile(cfg, []byte(browserConfig), 0o644))
	ah, _ := web.HashPassword(adminPass)
	users := filepath.Join(dir, "web-users")
	must(t, os.WriteFile(users, []byte("admin "+ah+"\n"), 0o600))
	addr := "10.79.0.1:" + webPort
	daemon := clitest.Command("daemon", "--config", cfg, "--state-dir", filepath.Join(dir, "run"),
		"--http", addr, "--http-users", users, "--stop-on-exit")
	daemonLog := startDaemon(t, router, daemon, 10*time.Second, nil)
	tc := func() string {
		var b strings.Builder
		for _, args := range [][]string{{"qdisc", "show", "dev", "wan0"}, {"class", "show", "dev", "wan0"}, {"qdisc", "show", "dev", "ifb4wan0"}, {"class", "show", "dev", "ifb4wan0"}} {
			out, err := router.Output(exec.Command("tc", args...))
			if err != nil {
				t.Fatalf("tc %v: %v", args, err)
			}
			b.Write(out)
		}
		return b.String()
	}
	waitFor(t, "the daemon shapes wan0", func() bool {
		out, err := router.Output(exec.Command("tc", "class", "show", "dev", "ifb4wan0"))
		return err == nil && strings.Contains(string(out), "rate 20Mbit")
	})

	// clientFrom is an HTTP client on the LAN host with address src.
	clientFrom := func(src string) *http.Client {
		jar, _ := cookiejar.New(nil)
		dial := func(ctx context.Context, network, a string) (net.Conn, error) {
			var c net.Conn
			err := lan.Do(func() error {
				var err error
				c, err = (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}}).DialContext(ctx, network, a)
				return err
			})
			return c, err
		}
		return &http.Client{Jar: jar, Timeout: 30 * time.Second, Transport: &http.Transport{DialContext: dial, MaxIdleConnsPerHost: 4}}
	}
	base := "http://" + addr
	adminC := clientFrom(admin)
	waitFor(t, "the page answers", func() bool {
		res, err := adminC.Get(base + "/")
		if err == nil {
			res.Body.Close()
		}
		return err == nil && res.StatusCode == 200
	})
	loginAdmin := func() (time.Duration, int) {
		start := time.Now()
		res, err := adminC.Post(base+"/api/login", "application/json", strings.NewReader(`{"password":"`+adminPass+`"}`))
		if err != nil {
			t.Fatalf("admin login: %v\n%s", err, daemonLog)
		}
		io.Copy(io.Discard, res.Body)
		res.Body.Close()
		return time.Since(start), res.StatusCode
	}
	statusTime := func() string {
		res, err := adminC.Get(base + "/api/status")
		if err != nil {
			t.Fatalf("GET /api/status: %v", err)
		}
		defer res.Body.Close()
		var doc struct {
			Time string `json:"time"`
		}
		if res.StatusCode != 200 || json.NewDecoder(res.Body).Decode(&doc) != nil || doc.Time == "" {
			t.Fatalf("GET /api/status: %s", res.Status)
		}
		return doc.Time
	}
	if _, code := loginAdmin(); code != 200 {
		t.Fatalf("admin login before the load: %d", code)
	}
	// A host on the WAN side that routes the LAN address to the router
	// reaches the listener (Linux takes a packet for any local address on
	// any interface); the page closes its connection at once.
	must(t, isp.AddRoute("10.79.0.0/24", "10.77.0.1", "isp0"))
	var wanErr error
	must(t, isp.Do(func() error {
		c, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err != nil {
			wanErr = err
			return nil
		}
		defer c.Close()
		fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: %s\r\n\r\n", addr)
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		b, err := io.ReadAll(c)
		if len(b) > 0 {
			wanErr = fmt.Errorf("answered: %.40q", b)
		} else if ne, ok := err.(net.Error); ok && ne.Timeout() {
			wanErr = fmt.Errorf("kept open")
		}
		return nil
	}))
	if wanErr != nil && !strings.Contains(wanErr.Error(), "reset") {
		t.Errorf("a WAN-side host connecting to the LAN address: %v; want the connection closed unanswered", wanErr)
	}
	for range 5 {
		statusTime()
	}
	pid := daemon.Process.Pid
	idleRSS, idleFDs := rssKB(t, pid), fdCount(t, pid)
	shaping := tc()

	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer func() { stop(); wg.Wait() }()

	// The staller keeps conns connections open or re-opening: each sends
	// a request's headers and a piece of its body, then nothing; one the
	// daemon closes is opened again a second later.
	var stallDials, stallClosed atomic.Int64
	redial := make(chan struct{}, conns)
	for range conns {
		redial <- struct{}{}
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		lan.Do(func() error { // sockets opened here stay in lan
			d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(staller)}, Timeout: 5 * time.Second}
			for {
				select {
				case <-ctx.Done():
					return nil
				case <-redial:
				}
				c, err := d.DialContext(ctx, "tcp", addr)
				stallDials.Add(1)
				if err != nil {
					go func() { time.Sleep(time.Second); redial <- struct{}{} }()
					continue
				}
				fmt.Fprintf(c, "POST /api/login HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{\"pass", addr)
				wg.Add(1)
				go func() {
					defer wg.Done()
					go func() { <-ctx.Done(); c.Close() }()
					io.Copy(io.Discard, c)
					c.Close()
					stallClosed.Add(1)
					select {
					case <-ctx.Done():
					case <-time.After(time.Second):
						redial <- struct{}{}
					}
				}()
			}
		})
	}()
	// The guesser logs in with wrong passwords back to back.
	var guesses sync.Map // status code -> *atomic.Int64
	wg.Add(1)
	go func() {
		defer wg.Done()
		c := clientFrom(guesser)
		for ctx.Err() == nil {
			req, _ := http.NewRequestWithContext(ctx, "POST", base+"/api/login", strings.NewReader(`{"password":"guess"}`))
			req.Header.Set("Content-Type", "application/json")
			res, err := c.Do(req)
			code := 0
			if err == nil {
				io.Copy(io.Discard, res.Body)
				res.Body.Close()
				code = res.StatusCode
			}
			n, _ := guesses.LoadOrStore(code, new(atomic.Int64))
			n.(*atomic.Int64).Add(1)
		}
	}()
	// The load settles: every stalled connection dialled once.
	waitFor(t, "the staller's connections are dialled", func() bool { return stallDials.Load() >= int64(conns) })
	time.Sleep(time.Second)

	took, code := loginAdmin()
	if code != 200 {
		t.Fatalf("admin login under load: %d", code)
	}
	t.Logf("admin login under load: %v (%d stalled connections dialled, %d closed by the daemon)", took, stallDials.Load(), stallClosed.Load())
	if bench && took > time.Second {
		t.Errorf("admin login under load took %v; issue 25 wants it within 1 s", took)
	}
	last := statusTime()
	for range 5 {
		time.Sleep(250 * time.Millisecond)
		if now := statusTime(); now == last {
			t.Errorf("the status API answered the same document twice (%s): the page stopped updating", now)
		} else {
			last = now
		}
	}
	maxRSS, maxFDs := 0, 0
	for range 10 {
		maxRSS, maxFDs = max(maxRSS, rssKB(t, pid)), max(maxFDs, fdCount(t, pid))
		time.Sleep(100 * time.Millisecond)
	}
	stop()
	var counts []string
	guesses.Range(func(k, v any) bool {
		counts = append(counts, fmt.Sprintf("%v: %d", k, v.(*atomic.Int64).Load()))
		return true
	})
	t.Logf("daemon RSS idle %d KiB, under load at most %d KiB; descriptors idle %d, under load at most %d; guesses by status %v",
		idleRSS, maxRSS, idleFDs, maxFDs, counts)
	if maxRSS > 2*idleRSS {
		t.Errorf("daemon RSS %d KiB under load; idle %d KiB, issue 25 allows twice that", maxRSS, idleRSS)
	}
	// 16 connections per client (the staller's), a few for the others.
	if maxFDs > idleFDs+16+8 {
		t.Errorf("the daemon held %d descriptors under load (idle %d): more than one client's cap of connections", maxFDs, idleFDs)
	}
	if got := tc(); got != shaping {
		t.Errorf("shaping changed under load:\nbefore:\n%s\nafter:\n%s", shaping, got)
	}
	if daemon.ProcessState != nil {
		t.Errorf("the daemon exited: %v", daemon.ProcessState)
	}
	if strings.Contains(daemonLog.String(), "level=ERROR") {
		t.Errorf("daemon errors under load:\n%s", daemonLog)
	}
}

func rssKB(t *testing.T, pid int) int {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "VmRSS:" {
			n, _ := strconv.Atoi(f[1])
			return n
		}
	}
	t.Fatalf("no VmRSS in /proc/%d/status", pid)
	return 0
}

func fdCount(t *testing.T, pid int) int {
	t.Helper()
	es, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		t.Fatal(err)
	}
	return len(es)
}
