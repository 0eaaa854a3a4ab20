//go:build linux

package rpm_test

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"sqm/internal/netns"
)

// TestRPMBreakdown is a measurement for docs/rpm.md, not a check: it runs
// the namespace test's RPM run (nginx or sqm server) while it records every
// TCP segment at the client's interface with the kernel's timestamps
// (testdata/sniff.py: the machine has no tcpdump) and samples `ss -tin` in
// both namespaces every 100 ms, and leaves the raw data in
// $SQM_RPM_BREAKDOWN for testdata/breakdown.py to attribute each probe's
// time to its parts. Off by default: it adds nothing the namespace tests
// do not check, and the sampling loads the machine.
//
//	SQM_RPM_BREAKDOWN=/tmp/bd SQM_RPM_BREAKDOWN_SERVER=nginx go test -run TestRPMBreakdown ./internal/rpm
//	python3 internal/rpm/testdata/breakdown.py /tmp/bd
func TestRPMBreakdown(t *testing.T) {
	dir := os.Getenv("SQM_RPM_BREAKDOWN")
	if dir == "" {
		t.Skip("a measurement for docs/rpm.md: set SQM_RPM_BREAKDOWN=DIR (and SQM_RPM_BREAKDOWN_SERVER=nginx|sqm) to run it")
	}
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("needs python3 for the packet recorder")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	var l *link
	switch os.Getenv("SQM_RPM_BREAKDOWN_LINK") {
	case "routed":
		l = newRoutedLink(t)
	case "":
		l = newLink(t)
	default:
		t.Fatal("SQM_RPM_BREAKDOWN_LINK: routed or empty")
	}
	// SQM_RPM_BREAKDOWN_SYSCTL=key=value,... is set in both namespaces, to
	// try one kernel behaviour at a time (net.ipv4.tcp_autocorking=0).
	for _, kv := range strings.FieldsFunc(os.Getenv("SQM_RPM_BREAKDOWN_SYSCTL"), func(r rune) bool { return r == ',' }) {
		k, v, _ := strings.Cut(kv, "=")
		for _, ns := range []*netns.NS{l.srv, l.cli} {
			if err := ns.SetSysctl(k, v); err != nil {
				t.Fatal(err)
			}
		}
	}
	var args []string
	switch srv := os.Getenv("SQM_RPM_BREAKDOWN_SERVER"); srv {
	case "nginx":
		certFile, keyFile := writeCert(t, t.TempDir())
		args = []string{"--rpm", startNginx(t, l, certFile, keyFile), "--ca", certFile}
	case "", "sqm":
		args = []string{"--rpm", startSQMServer(t, l), "--insecure"}
	default:
		t.Fatalf("SQM_RPM_BREAKDOWN_SERVER=%q: nginx or sqm", srv)
	}
	sniff := exec.Command(py, "testdata/sniff.py", "vrC", filepath.Join(dir, "packets.txt"))
	sniff.Stderr = os.Stderr
	if err := l.cli.Start(sniff); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for _, s := range []struct {
		ns   *netns.NS
		name string
	}{{l.srv, "srv"}, {l.cli, "cli"}} {
		f, err := os.Create(filepath.Join(dir, "ss-"+s.name+".txt"))
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer f.Close()
			tick := time.NewTicker(100 * time.Millisecond)
			defer tick.Stop()
			for {
				select {
				case <-stop:
					return
				case <-tick.C:
				}
				out, _ := s.ns.Output(exec.Command("ss", "-tinH", "state", "established"))
				fmt.Fprintf(f, "@ %.6f\n%s", float64(time.Now().UnixNano())/1e9, out)
			}
		}()
	}
	time.Sleep(300 * time.Millisecond) // the recorder binds its socket
	res := runRPM(t, l, args...)
	close(stop)
	wg.Wait()
	sniff.Process.Signal(syscall.SIGTERM)
	sniff.Wait()
	b, err := json.MarshalIndent(res, "", " ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "result.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// newRoutedLink is newLink with the shaping moved off the two hosts: the
// client and the server each reach a router namespace over their own veth,
// and the router's two egress interfaces carry the htb and the FIFO, as a
// home router or a modem does. The hosts' own interfaces then queue
// nothing, so the kernel's per-socket limits on data waiting in the local
// qdisc (TCP small queues, autocorking) never hold a probe back.
func newRoutedLink(t *testing.T) *link {
	t.Helper()
	requireLinkTools(t)
	l := &link{srv: netns.NewT(t, "rpmS"), cli: netns.NewT(t, "rpmC")}
	r := netns.NewT(t, "rpmR")
	if err := r.Router(); err != nil {
		t.Fatal(err)
	}
	if err := l.srv.Veth("vrS", r, "vrRS"); err != nil {
		t.Fatal(err)
	}
	if err := l.cli.Veth("vrC", r, "vrRC"); err != nil {
		t.Fatal(err)
	}
	for _, s := range []struct {
		ns       *netns.NS
		dev, ip4 string
		shape    bool
	}{
		{l.srv, "vrS", srvIP + "/24", false}, {l.cli, "vrC", "10.79.0.2/24", false},
		{r, "vrRS", "10.78.0.254/24", true}, {r, "vrRC", "10.79.0.254/24", true},
	} {
		if err := s.ns.DisableOffloads(s.dev); err != nil {
			t.Fatal(err)
		}
		if err := s.ns.AddAddr(s.dev, s.ip4); err != nil {
			t.Fatal(err)
		}
		if err := s.ns.Up("lo", s.dev); err != nil {
			t.Fatal(err)
		}
		if !s.shape {
			if err := s.ns.SetSysctl("net.ipv4.tcp_congestion_control", "reno"); err != nil {
				t.Fatal(err)
			}
			continue
		}
		for _, args := range [][]string{
			{"qdisc", "add", "dev", s.dev, "root", "handle", "1:", "htb", "default", "1"},
			{"class", "add", "dev", s.dev, "parent", "1:", "classid", "1:1", "htb",
				"rate", fmt.Sprintf("%dmbit", rateMbit), "ceil", fmt.Sprintf("%dmbit", rateMbit)},
			{"qdisc", "add", "dev", s.dev, "parent", "1:1", "handle", "10:", "pfifo", "limit", strconv.Itoa(fifoLimit)},
		} {
			if out, err := s.ns.Output(exec.Command("tc", args...)); err != nil {
				t.Fatalf("tc %v: %v\n%s", args, err, out)
			}
		}
	}
	for _, s := range []struct {
		ns      *netns.NS
		dev, gw string
	}{{l.srv, "vrS", "10.78.0.254"}, {l.cli, "vrC", "10.79.0.254"}} {
		if err := s.ns.WaitReady(s.dev, 5*time.Second); err != nil {
			t.Fatal(err)
		}
		if err := s.ns.AddRoute("default", s.gw, ""); err != nil {
			t.Fatal(err)
		}
	}
	for _, dev := range []string{"vrRS", "vrRC"} {
		if err := r.WaitReady(dev, 5*time.Second); err != nil {
			t.Fatal(err)
		}
	}
	return l
}
