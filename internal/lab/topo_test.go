package lab

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"sqm/internal/netns"
	"sqm/internal/testutil"
	"sqm/internal/tune"
)

// ourNetNSRefs counts file descriptors and threads of this process that
// refer to one of the namespaces ids: after
// a lab run there must be none, so the kernel has removed the lab's
// namespaces (and their veths, IFBs and qdiscs).
func ourNetNSRefs(t *testing.T, ids ...string) int {
	t.Helper()
	ours := func(s string) bool { return slices.Contains(ids, s) }
	n := 0
	links, _ := filepath.Glob("/proc/self/fd/*")
	tasks, _ := filepath.Glob("/proc/self/task/*/ns/net")
	for _, l := range append(links, tasks...) {
		s, err := os.Readlink(l)
		if err == nil && strings.HasPrefix(s, "net:[") && ours(s) {
			t.Logf("%s -> %s", l, s)
			n++
		}
	}
	return n
}

// hostNetNS names the namespace the test starts in, read on a thread
// locked for the purpose (any thread, before the lab entered a namespace).
func hostNetNS(t *testing.T) string {
	t.Helper()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	s, err := os.Readlink("/proc/thread-self/ns/net")
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestTopology builds the four namespaces on the host kernel (veth only, no
// netem), runs a short real test through client -- router -- isp -- server
// and checks that nothing is left afterwards.
func TestTopology(t *testing.T) {
	testutil.RequireRoot(t)
	host := hostNetNS(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	topo, err := newTopology(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := len(topo.names()); got != 4 {
		t.Fatalf("names = %v", topo.names())
	}
	ids := topo.ids()
	if len(ids) != 4 || ids[0] == host {
		t.Fatalf("namespace ids = %v (host %s)", ids, host)
	}
	// Forwarding and routes: the client reaches the server through the
	// router and the isp.
	srv, err := topo.startServer(ctx)
	if err != nil {
		topo.Close()
		t.Fatal(err)
	}
	o := &Options{Mode: "rrul", Duration: 2 * time.Second, Idle: time.Second} // speedtest runs in the VM test
	res, err := topo.measure(ctx, o, "plain")
	srv.stop()
	// Offloads: TSO must be off on the shaped veth.
	tso, terr := topo.router.OffloadOn(wanDev, netns.TSO)
	if terr != nil {
		t.Error(terr)
	}
	names := topo.names()
	if cerr := topo.Close(); cerr != nil {
		t.Error(cerr)
	}
	if err != nil {
		t.Fatal(err)
	}
	if tso {
		t.Errorf("TSO on %s is on, want off", wanDev)
	}
	for _, n := range names {
		if _, err := os.Stat(filepath.Join(netns.Dir, n)); err == nil {
			t.Errorf("namespace %s still exists after Close", n)
		}
	}
	if res.DownloadMbps <= 0 || res.UploadMbps <= 0 || res.Loaded.Count == 0 {
		t.Errorf("result through the topology: down %v up %v, %d loaded probes; want traffic both ways",
			res.DownloadMbps, res.UploadMbps, res.Loaded.Count)
	}
	if n := ourNetNSRefs(t, ids...); n != 0 {
		t.Errorf("after Close this process still holds %d references to lab namespaces", n)
	}
}

// TestRunRefusesWithoutNetem checks the host kernel case: the lab (Run and
// Tune, which share setup) names the missing module and points at --vm
// before it builds anything.
func TestRunRefusesWithoutNetem(t *testing.T) {
	testutil.RequireRoot(t)
	if testutil.InVM() {
		t.Skip("the VM kernel has netem")
	}
	o := Options{Link: DefaultLink(), Mode: "speedtest", Duration: 2 * time.Second}
	for name, run := range map[string]func() error{
		"Run":  func() error { _, err := Run(context.Background(), o); return err },
		"Tune": func() error { _, err := Tune(context.Background(), o, tune.Options{}, 1); return err },
	} {
		t.Run(name, func(t *testing.T) {
			err := run()
			if err == nil {
				t.Skip("this kernel has netem and cake; nothing to refuse")
			}
			for _, want := range []string{"netem", "sch_netem", "--vm"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not mention %q", err, want)
				}
			}
		})
	}
}

// TestMeasureCancel is Ctrl-C in the middle of a test: the measurement
// stops with the context's error at once, and Close still removes every
// namespace (Run defers exactly this).
func TestMeasureCancel(t *testing.T) {
	testutil.RequireRoot(t)
	topo, err := newTopology(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	names, ids := topo.names(), topo.ids()
	ctx, cancel := context.WithCancel(context.Background())
	srv, err := topo.startServer(ctx)
	if err != nil {
		topo.Close()
		t.Fatal(err)
	}
	time.AfterFunc(1500*time.Millisecond, cancel)
	start := time.Now()
	const full = 20 * time.Second // the test's length if nothing stopped it
	_, err = topo.measure(ctx, &Options{Mode: "speedtest", Duration: full, Idle: time.Second}, "cancelled")
	took := time.Since(start)
	srv.stop()
	if cerr := topo.Close(); cerr != nil {
		t.Error(cerr)
	}
	// Not a speed bound: a measurement that ignored the cancel would run
	// its full length, twice the time this allows.
	if !errors.Is(err, context.Canceled) || took >= full/2 {
		t.Errorf("measure after cancel: err %v after %v; want context.Canceled before the %v test's half", err, took, full)
	}
	for _, n := range names {
		if _, err := os.Stat(filepath.Join(netns.Dir, n)); err == nil {
			t.Errorf("namespace %s still exists after Close", n)
		}
	}
	if n := ourNetNSRefs(t, ids...); n != 0 {
		t.Errorf("after Close this process still holds %d references to lab namespaces", n)
	}
}
