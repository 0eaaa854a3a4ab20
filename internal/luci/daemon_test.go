package luci_test

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"sqm/internal/clitest"
	"sqm/internal/features"
	"sqm/internal/luci"
	"sqm/internal/netns"
	"sqm/internal/testutil"
)

func TestMain(m *testing.M) { clitest.Main(m) }

// expected probes every qdisc LuCI is offered with a fresh prober: the
// truth the directory must show.
func expected(t *testing.T) []string {
	t.Helper()
	p := features.NewProber()
	var want []string
	for _, k := range luci.Qdiscs() {
		switch err := p.Qdisc(k); {
		case err == nil:
			want = append(want, k)
		case !errors.Is(err, features.ErrNotAvailable):
			t.Fatalf("probe %s: %v", k, err)
		}
	}
	slices.Sort(want)
	return want
}

func listDir(dir string) []string {
	ents, _ := os.ReadDir(dir)
	var got []string
	for _, e := range ents {
		got = append(got, e.Name())
	}
	return got
}

// TestDaemonRefreshesAvailableQdiscs runs `sqm daemon` (in a namespace of
// its own) and checks <state-dir>/available_qdiscs, luci-app-sqm's qdisc
// list, against real probes at start and again after a reload (SIGHUP):
// a file removed meanwhile comes back, a stale one for a qdisc the kernel
// lacks disappears. On this host's kernel that is cake or fq_codel; in the
// VM, where every qdisc exists, the reload half checks restoring only.
func TestDaemonRefreshesAvailableQdiscs(t *testing.T) {
	testutil.RequireRoot(t)
	want := expected(t)
	if !slices.Contains(want, "pfifo") {
		t.Fatalf("pfifo, part of every kernel's qdisc core, probed missing: %v", want)
	}
	ns := netns.NewT(t, "sqmlu")
	state := t.TempDir()
	conf := filepath.Join(t.TempDir(), "sqm")
	if err := os.WriteFile(conf, []byte("config queue 'wan'\n\toption enabled '0'\n\toption interface 'eth9'\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := clitest.Command("daemon", "--config", conf, "--state-dir", state, "--poll-interval", "0", "--check-interval", "0")
	var logs strings.Builder
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := ns.Start(cmd); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		<-done
		if t.Failed() {
			t.Logf("daemon log:\n%s", logs.String())
		}
	})
	dir := filepath.Join(state, "available_qdiscs")
	// waitFor polls the directory until it holds want; the daemon is a
	// separate process, so there is no event to wait on. The bound is
	// generous: it only ends a test that would otherwise hang.
	waitFor := func(what string, want []string) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for !slices.Equal(listDir(dir), want) {
			select {
			case err := <-done:
				t.Fatalf("%s: daemon exited: %v", what, err)
			default:
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: %s holds %v, want %v", what, dir, listDir(dir), want)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	waitFor("start", want)

	os.Remove(filepath.Join(dir, "pfifo"))
	stale := ""
	for _, k := range luci.Qdiscs() {
		if !slices.Contains(want, k) {
			stale = k
			os.WriteFile(filepath.Join(dir, k), nil, 0o644)
			break
		}
	}
	if err := cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitFor("reload (pfifo removed, stale "+stale+" added before)", want)
}

// TestQdiscsCommand: `sqm qdiscs`, which the OpenWrt init script runs
// before it starts the daemon, leaves <state-dir>/available_qdiscs holding
// exactly what the probes find (a stale entry for a qdisc the kernel lacks
// removed) and prints the same list.
func TestQdiscsCommand(t *testing.T) {
	testutil.RequireRoot(t)
	want := expected(t)
	ns := netns.NewT(t, "sqmlq")
	state := t.TempDir()
	dir := filepath.Join(state, "available_qdiscs")
	stale := ""
	for _, k := range luci.Qdiscs() {
		if !slices.Contains(want, k) {
			stale = k
		}
	}
	if stale != "" {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, stale), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cmd := clitest.Command("qdiscs", "--state-dir", state)
	out, err := ns.Output(cmd)
	if err != nil {
		t.Fatalf("sqm qdiscs: %v\n%s", err, out)
	}
	if got := listDir(dir); !slices.Equal(got, want) {
		t.Errorf("%s holds %v, want %v (stale entry was %q)", dir, got, want, stale)
	}
	if got := strings.Fields(string(out)); !slices.Equal(got, want) {
		t.Errorf("printed %v, want %v", got, want)
	}
}
