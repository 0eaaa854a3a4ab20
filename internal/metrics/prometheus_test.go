package metrics_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"sqm/internal/clitest"
	"sqm/internal/httpd"
	"sqm/internal/kernel"
	"sqm/internal/metrics"
	"sqm/internal/metrics/metricshttp"
	"sqm/internal/netns"
	"sqm/internal/service"
	"sqm/internal/testutil"
)

func TestMain(m *testing.M) { clitest.Main(m) }

// shapedLink is two namespaces joined by a veth pair, wan0 (10.77.0.1)
// shaped by `sqm apply` both ways, ingress through an IFB. On the host
// kernel the recipe is simple with pfifo leaves (htb; the host has no
// fq_codel or cake).
type shapedLink struct {
	router, peer *netns.NS
	stateDir     string
}

func newShapedLink(t *testing.T, script, qdisc string) *shapedLink {
	t.Helper()
	testutil.RequireRoot(t)
	l := &shapedLink{router: netns.NewT(t, "sqmpr"), peer: netns.NewT(t, "sqmpp"), stateDir: t.TempDir()}
	if err := l.router.Veth("wan0", l.peer, "peer0"); err != nil {
		t.Fatal(err)
	}
	for _, s := range []struct {
		ns   *netns.NS
		dev  string
		addr string
	}{{l.router, "wan0", "10.77.0.1/24"}, {l.peer, "peer0", "10.77.0.2/24"}} {
		// No IPv6: router solicitations and DAD would add packets the
		// test did not send, and the counters are compared exactly.
		if err := s.ns.SetSysctl("net.ipv6.conf.all.disable_ipv6", "1"); err != nil {
			t.Fatal(err)
		}
		if err := s.ns.SetSysctl("net.ipv6.conf.default.disable_ipv6", "1"); err != nil {
			t.Fatal(err)
		}
		if err := s.ns.AddAddr(s.dev, s.addr); err != nil {
			t.Fatal(err)
		}
		if err := s.ns.Up("lo", s.dev); err != nil {
			t.Fatal(err)
		}
	}
	out, err := l.router.Output(clitest.Command("apply", "--state-dir", l.stateDir, "--iface", "wan0",
		"--down", "20mbit", "--up", "10mbit", "--script", script, "--qdisc", qdisc))
	if err != nil {
		t.Fatalf("sqm apply: %v\n%s", err, out)
	}
	return l
}

// ping sends n echo requests from the router to the peer and waits;
// extra are more ping options (-Q TOS).
func (l *shapedLink) ping(t *testing.T, n int, extra ...string) {
	t.Helper()
	if _, err := exec.LookPath("ping"); err != nil {
		t.Skip("ping not installed (iputils-ping)")
	}
	args := append([]string{"-q", "-n", "-c", strconv.Itoa(n), "-i", "0.01", "-W", "2"}, extra...)
	out, err := l.router.Output(exec.Command("ping", append(args, "10.77.0.2")...))
	if err != nil {
		t.Fatalf("ping: %v\n%s", err, out)
	}
}

// kernelSource opens a netlink socket inside the router namespace (it stays
// bound to that namespace wherever it is used from) and reads the state sqm
// apply wrote.
func (l *shapedLink) kernelSource(t *testing.T) (*metrics.KernelSource, *kernel.Conn) {
	t.Helper()
	var conn *kernel.Conn
	if err := l.router.Do(func() (err error) { conn, err = kernel.Open(); return err }); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return &metrics.KernelSource{Store: &service.Store{Dir: l.stateDir}, Kernel: conn, Build: metrics.DefaultBuild("test")}, conn
}

func rootBytes(t *testing.T, conn *kernel.Conn, dev string) uint64 {
	t.Helper()
	ds, err := conn.Status(dev)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range ds[0].Qdiscs {
		if q.Parent.String() == "root" {
			return q.Bytes
		}
	}
	t.Fatalf("%s has no root qdisc", dev)
	return 0
}

// TestStatusPromShapedLink runs `sqm status --prom` against a real shaped
// link: both directions' htb roots appear with the kernel's counters, and
// promtool accepts the output.
func TestStatusPromShapedLink(t *testing.T) {
	l := newShapedLink(t, "simple", "pfifo")
	l.ping(t, 20)
	_, conn := l.kernelSource(t)
	out, err := l.router.Output(clitest.Command("status", "--prom", "--state-dir", l.stateDir))
	if err != nil {
		t.Fatalf("sqm status --prom: %v\n%s", err, out)
	}
	for _, want := range []string{
		`sqm_queue_root_info{interface="wan0",direction="egress",device="wan0",kind="htb",handle="1:"} 1`,
		`sqm_queue_root_info{interface="wan0",direction="ingress",device="ifb4wan0",kind="htb",handle="1:"} 1`,
		`sqm_queue_rate_bytes_per_second{interface="wan0",direction="egress"} 1250000`,
		`sqm_queue_rate_bytes_per_second{interface="wan0",direction="ingress"} 2500000`,
		fmt.Sprintf(`sqm_queue_sent_bytes_total{interface="wan0",direction="egress"} %d`, rootBytes(t, conn, "wan0")),
		fmt.Sprintf(`sqm_queue_sent_bytes_total{interface="wan0",direction="ingress"} %d`, rootBytes(t, conn, "ifb4wan0")),
		`sqm_scrape_error 0`,
	} {
		if !bytes.Contains(out, []byte(want+"\n")) {
			t.Errorf("missing %s in\n%s", want, out)
		}
	}
	// 20 echo requests of 98 bytes (84 IP + 14 Ethernet) at least.
	if b := rootBytes(t, conn, "wan0"); b < 20*98 {
		t.Errorf("egress root sent %d bytes, fewer than the pings", b)
	}
	if promtool, err := exec.LookPath("promtool"); err == nil {
		cmd := exec.Command(promtool, "check", "metrics")
		cmd.Stdin = bytes.NewReader(out)
		if msg, err := cmd.CombinedOutput(); err != nil || len(bytes.TrimSpace(msg)) > 0 {
			t.Errorf("promtool check metrics: %v\n%s", err, msg)
		}
	}
	// A name sqm does not shape is an error, so a typo is noticed.
	if out, err := l.router.Output(clitest.Command("status", "--prom", "--state-dir", l.stateDir, "wan9")); err == nil {
		t.Errorf("status --prom wan9 succeeded:\n%s", out)
	}
	// The textfile form writes the same exposition.
	file := filepath.Join(t.TempDir(), "sqm.prom")
	if out, err := l.router.Output(clitest.Command("status", "--prom-file", file, "--state-dir", l.stateDir)); err != nil {
		t.Fatalf("sqm status --prom-file: %v\n%s", err, out)
	}
	if b, err := os.ReadFile(file); err != nil || !bytes.Contains(b, []byte(`sqm_queue_shaping{interface="wan0",direction="egress"} 1`)) {
		t.Errorf("textfile: %v\n%s", err, b)
	}
	// --prom-interval keeps rewriting the file until SIGTERM, then exits 0.
	os.Remove(file)
	loop := clitest.Command("status", "--prom-file", file, "--prom-interval", "100ms", "--state-dir", l.stateDir)
	var logs bytes.Buffer
	loop.Stdout, loop.Stderr = &logs, &logs
	if err := l.router.Start(loop); err != nil {
		t.Fatal(err)
	}
	rewrites := 0
	var last time.Time
	for deadline := time.Now().Add(30 * time.Second); rewrites < 3 && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if fi, err := os.Stat(file); err == nil && fi.ModTime() != last {
			last = fi.ModTime()
			rewrites++
		}
	}
	loop.Process.Signal(syscall.SIGTERM)
	if err := loop.Wait(); err != nil {
		t.Errorf("status --prom-interval after SIGTERM: %v\n%s", err, logs.String())
	}
	if rewrites < 3 {
		t.Errorf("--prom-interval 100ms: the file was written %d times", rewrites)
	}
}

// TestPrometheusScrapes has Debian's Prometheus server scrape the handler
// serving the shaped link's status, then asks its HTTP API for the
// interface's counter and compares it with the kernel's.
func TestPrometheusScrapes(t *testing.T) {
	prom, err := exec.LookPath("prometheus")
	if err != nil {
		t.Skip("prometheus not installed (Debian package prometheus; scripts/setup.sh installs it)")
	}
	l := newShapedLink(t, "simple", "pfifo")
	src, conn := l.kernelSource(t)

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	mux := httpd.NewMux()
	mux.Handle("/metrics", metricshttp.Handler(src))
	srv := &httpd.Server{Handler: mux}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Shutdown(context.Background()) })

	dir := t.TempDir()
	cfg := fmt.Sprintf(`global:
  scrape_interval: 1s
  scrape_timeout: 900ms
scrape_configs:
  - job_name: sqm
    static_configs:
      - targets: ['%s']
`, ln.Addr())
	if err := os.WriteFile(filepath.Join(dir, "prometheus.yml"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	web := freePort(t)
	var logs bytes.Buffer
	cmd := exec.Command(prom, "--config.file="+filepath.Join(dir, "prometheus.yml"),
		"--storage.tsdb.path="+filepath.Join(dir, "data"), "--web.listen-address="+web)
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		cmd.Wait()
		if t.Failed() {
			t.Logf("prometheus log:\n%s", logs.String())
		}
	})

	l.ping(t, 30)
	before := rootBytes(t, conn, "wan0")
	if before < 30*98 {
		t.Fatalf("egress root sent %d bytes, fewer than the pings", before)
	}
	// Wait for a scrape after the pings. ARP may still cross the link,
	// so the value Prometheus stored must lie between the kernel's count
	// before the wait and after it.
	q := `sqm_queue_sent_bytes_total{interface="wan0",direction="egress",job="sqm"}`
	var got uint64
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		if v, err := strconv.ParseUint(query(t, web, q), 10, 64); err == nil {
			if got = v; got >= before {
				break
			}
		}
		time.Sleep(500 * time.Millisecond)
	}
	after := rootBytes(t, conn, "wan0")
	if got < before || got > after {
		t.Fatalf("Prometheus says %s = %d, the kernel said %d before and %d after", q, got, before, after)
	}
	t.Logf("Prometheus: %s = %d (kernel %d..%d)", q, got, before, after)
	if v := query(t, web, `sqm_queue_shaping{interface="wan0",direction="ingress"}`); v != "1" {
		t.Errorf("ingress shaping = %q, want 1", v)
	}
	if v := query(t, web, `up{job="sqm"}`); v != "1" {
		t.Errorf("up = %q, want 1", v)
	}
}

func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// query returns the value of the single series an instant query returns,
// "" if none (or Prometheus is not answering yet).
func query(t *testing.T, addr, q string) string {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/api/v1/query?query=" + url.QueryEscape(q))
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	var r struct {
		Status string
		Data   struct {
			Result []struct {
				Value [2]any
			}
		}
	}
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil || r.Status != "success" {
		return ""
	}
	if len(r.Data.Result) != 1 {
		return ""
	}
	s, _ := r.Data.Result[0].Value[1].(string)
	return strings.TrimSpace(s)
}
