//go:build linux

package rpm_test

// `sqm server --rpm` run as a command on loopback: what its secret keeps
// from strangers, that `sqm test --rpm` with the secret still works, and
// what zero-window streams cost the process (its RSS, from /proc).

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"sqm/internal/clitest"
	"sqm/internal/rpm"
)

// sqmServer is a running `sqm server --rpm` on loopback.
type sqmServer struct {
	cmd *exec.Cmd
	url string // the configuration URL it logged, prefix included
	mu  sync.Mutex
	out strings.Builder
}

var rpmListening = regexp.MustCompile(`rpm: listening on (https://\S+)`)

// startRPMServer runs `sqm server --rpm 127.0.0.1:0` with args and waits
// for the line that says where the RPM endpoints are.
func startRPMServer(t *testing.T, args ...string) *sqmServer {
	t.Helper()
	s := &sqmServer{cmd: clitest.Command(append([]string{"server", "--listen", "127.0.0.1:0", "--rpm", "127.0.0.1:0"}, args...)...)}
	pr, err := s.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			s.mu.Lock()
			s.out.WriteString(sc.Text() + "\n")
			s.mu.Unlock()
			if m := rpmListening.FindStringSubmatch(sc.Text()); m != nil {
				select {
				case found <- m[1]:
				default:
				}
			}
		}
		close(found)
	}()
	t.Cleanup(func() {
		s.cmd.Process.Signal(syscall.SIGTERM)
		s.cmd.Wait()
		if t.Failed() {
			s.mu.Lock()
			t.Logf("sqm server output:\n%s", s.out.String())
			s.mu.Unlock()
		}
	})
	select {
	case u, ok := <-found:
		if !ok {
			t.Fatal("sqm server ended without saying where it listens")
		}
		s.url = u
	case <-time.After(30 * time.Second):
		t.Fatal("sqm server did not start listening")
	}
	return s
}

func secretFile(t *testing.T) string {
	t.Helper()
	f := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(f, []byte("correct horse battery staple\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return f
}

// countingDialer counts every byte the client reads from the server.
type countingConn struct {
	net.Conn
	n *atomic.Int64
}

func (c countingConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.n.Add(int64(n))
	return n, err
}

// TestRPMSecretStranger: with a secret, a client without it gets a 404
// and nothing else from any path, so the server sends no load to
// strangers; with the secret (the logged URL) everything is served, and
// the configuration's URLs stay under the prefix.
func TestRPMSecretStranger(t *testing.T) {
	s := startRPMServer(t, "--secret-file", secretFile(t))
	u, err := url.Parse(s.url)
	if err != nil {
		t.Fatal(err)
	}
	prefix := strings.TrimSuffix(u.Path, rpm.WellKnownPath)
	token := strings.TrimPrefix(prefix, "/")
	if token == "" || strings.Contains(token, "/") {
		// Go on: what a stranger gets is the point.
		t.Errorf("logged URL %s has no secret prefix", s.url)
		prefix, token = "/"+rpm.PathToken("correct horse battery staple"), rpm.PathToken("correct horse battery staple")
	}
	if strings.Contains(s.url, "horse") {
		t.Fatalf("logged URL %s shows the secret itself", s.url)
	}
	get := func(method, path string, body io.Reader) (int, []byte, int64) {
		var n atomic.Int64
		tr := &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, Protocols: new(http.Protocols),
			DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
				c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
				if err != nil {
					return nil, err
				}
				return countingConn{c, &n}, nil
			}}
		tr.Protocols.SetHTTP2(true)
		defer tr.CloseIdleConnections()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, method, "https://"+u.Host+path, body)
		resp, err := (&http.Client{Transport: tr}).Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		// Read at most 4 MB: enough to see load, not to wait for 8 GB.
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
		resp.Body.Close()
		return resp.StatusCode, b, n.Load()
	}
	// What the TLS handshake and HTTP/2's settings cost: the certificate
	// is well under 1 KB, so 8 KB leaves room for all of it and no load.
	const most = 8 << 10
	upper := strings.ToUpper(token)
	for _, p := range []string{
		rpm.WellKnownPath, rpm.PathConfig, rpm.PathLarge, rpm.PathSmall, "/",
		"/x" + prefix + rpm.PathLarge, prefix + "x" + rpm.PathLarge, prefix[:len(prefix)-1] + rpm.PathLarge,
		"/" + upper + rpm.PathLarge, rpm.PathLarge + prefix, "//" + token + rpm.PathLarge,
	} {
		code, body, n := get(http.MethodGet, p, nil)
		if code != http.StatusNotFound || len(body) != 0 || n > most {
			t.Errorf("stranger GET %s: %d, %d bytes of body, %d bytes in all; want 404, nothing, under %d", p, code, len(body), n, most)
		}
	}
	code, _, n := get(http.MethodPost, rpm.PathUpload, strings.NewReader(strings.Repeat("x", 1<<20)))
	if code != http.StatusNotFound || n > most {
		t.Errorf("stranger POST %s: %d, %d bytes read; want 404 and under %d", rpm.PathUpload, code, n, most)
	}

	code, body, _ := get(http.MethodGet, prefix+rpm.WellKnownPath, nil)
	if code != http.StatusOK {
		t.Fatalf("with the secret: %d %s", code, body)
	}
	cfg, err := rpm.ParseConfig(body)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []string{cfg.Large, cfg.Small, cfg.Upload} {
		if cu, err := url.Parse(c); err != nil || !strings.HasPrefix(cu.Path, prefix+"/") {
			t.Errorf("configuration URL %s is not under the secret prefix %s", c, prefix)
		}
	}
	if code, body, _ := get(http.MethodGet, prefix+rpm.PathLarge, nil); code != http.StatusOK || len(body) != 4<<20 {
		t.Errorf("with the secret, the large object: %d, %d bytes", code, len(body))
	}
}

// TestRPMSecretSQMTest runs a whole `sqm test --rpm` with the secret
// against the server, and one without it, which must fail saying why.
func TestRPMSecretSQMTest(t *testing.T) {
	sf := secretFile(t)
	s := startRPMServer(t, "--secret-file", sf)
	host := strings.TrimPrefix(strings.SplitN(s.url, "/", 4)[2], "")
	cmd := clitest.Command("test", "--rpm", host, "--insecure", "--json", "--quiet", "--duration", "8s", "--secret-file", sf)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("sqm test --rpm with the secret: %v\n%s", err, stderr.String())
	}
	var res rpm.Result
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatal(err)
	}
	if !(res.RPM > 0) || res.DownloadMbps <= 0 || res.UploadMbps <= 0 {
		t.Errorf("RPM %v, goodput %v down %v up", res.RPM, res.DownloadMbps, res.UploadMbps)
	}
	tok := rpm.PathToken("correct horse battery staple")
	if strings.Contains(string(out), tok) {
		t.Errorf("the result shows the secret's path token; it must be redacted:\n%.300s", out)
	}
	cmd = clitest.Command("test", "--rpm", host, "--insecure", "--quiet", "--duration", "8s")
	cmd.Env = append(cmd.Env, "SQM_SERVER_SECRET=")
	b, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(b), "404") || !strings.Contains(string(b), "secret") {
		t.Errorf("sqm test --rpm without the secret: %v\n%s", err, b)
	}
}

// rss reads a process's resident set (VmRSS) or its peak (VmHWM) in KB.
func rss(t *testing.T, pid int, field string) int {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, field+":"); ok {
			n, err := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatalf("no %s in /proc/%d/status", field, pid)
	return 0
}

// zeroWindowConns is how many connections TestRPMZeroWindowRSS opens: the
// review's 16 took the server before its stream limits to 2.0x idle RSS
// here (1600 parked handlers, about 10 KB each), on the line; 32, half
// the connections one address may hold, leave no doubt.
const zeroWindowConns = 32

// TestRPMZeroWindowRSS: connections from one address, each opening 100
// downloads whose flow-control window stays shut, must leave the server's
// peak RSS within twice what it used idle (after one ordinary exchange).
// The peak is taken once every stream has been answered (headers or
// reset), when every handler the server let run is parked on its window:
// no timing decides what is measured.
func TestRPMZeroWindowRSS(t *testing.T) {
	sf := secretFile(t)
	s := startRPMServer(t, "--secret-file", sf)
	u, _ := url.Parse(s.url)
	prefix := strings.TrimSuffix(u.Path, rpm.WellKnownPath)
	pid := s.cmd.Process.Pid
	// Warm up: the code paths of TLS, HTTP/2 and each endpoint paged in.
	c := h2Client()
	for _, p := range []string{rpm.WellKnownPath, rpm.PathSmall} {
		resp, err := c.Get(s.url[:len(s.url)-len(u.Path)] + prefix + p)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	resp, err := c.Get("https://" + u.Host + prefix + rpm.PathLarge)
	if err != nil {
		t.Fatal(err)
	}
	io.CopyN(io.Discard, resp.Body, 8<<20)
	resp.Body.Close()
	resp, err = c.Post("https://"+u.Host+prefix+rpm.PathUpload, "application/octet-stream", io.LimitReader(zeroReader{}, 8<<20))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	c.CloseIdleConnections()
	idle := rss(t, pid, "VmRSS")

	got := map[string]int{}
	var conns []*h2Raw
	for range zeroWindowConns {
		h := dialZeroWindow(t, u.Host)
		h.c.SetReadDeadline(time.Now().Add(60 * time.Second))
		conns = append(conns, h)
		for k, v := range h.streams(t, 100, u.Host, prefix+rpm.PathLarge, false) {
			got[k] += v
		}
	}
	peak := rss(t, pid, "VmHWM")
	now := rss(t, pid, "VmRSS")
	t.Logf("server RSS idle %d KB; with %d x 100 zero-window downloads peak %d KB, now %d KB (%.2fx idle); streams: %v", idle, zeroWindowConns, peak, now, float64(peak)/float64(idle), got)
	if peak > 2*idle {
		t.Errorf("peak RSS %d KB is more than twice the idle %d KB", peak, idle)
	}
	for _, h := range conns {
		h.c.Close()
	}
}

type zeroReader struct{}

func (zeroReader) Read(p []byte) (int, error) { clear(p); return len(p), nil }
