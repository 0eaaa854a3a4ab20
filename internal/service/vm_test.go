package service_test

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"sqm/internal/clitest"
	"sqm/internal/testutil"
)

// cakeSection shapes IFACE with piece_of_cake (the VM kernel has sch_cake).
func cakeSection(name, iface string) string {
	return fmt.Sprintf(`
config queue '%s'
	option enabled '1'
	option interface '%s'
	option download '20000'
	option upload '5000'
	option qdisc 'cake'
	option script 'piece_of_cake.qos'
	option linklayer 'ethernet'
	option overhead '18'
`, name, iface)
}

// daemon is a `sqm daemon` child process in a namespace.
type daemon struct {
	cmd  *exec.Cmd
	logs *syncBuf
	done chan error
}

type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func (r *rig) startDaemon(t *testing.T, extra ...string) *daemon {
	t.Helper()
	args := append([]string{"daemon", "--config", r.cfg, "--state-dir", r.state, "--log-level", "debug"}, extra...)
	d := &daemon{cmd: clitest.Command(args...), logs: &syncBuf{}, done: make(chan error, 1)}
	d.cmd.Stderr = d.logs
	d.cmd.Stdout = d.logs
	r.ns.start(t, d.cmd)
	go func() { d.done <- d.cmd.Wait() }()
	t.Cleanup(func() {
		d.cmd.Process.Kill()
		<-d.done
		if t.Failed() {
			t.Logf("daemon log:\n%s", d.logs)
		}
	})
	return d
}

// applied is how many times the daemon has logged applying a tree on
// iface. It logs that once the kernel has the whole tree, which a look at
// the qdiscs cannot tell: they are there before the ingress filter is.
func (d *daemon) applied(iface string) int {
	return strings.Count(d.logs.String(), "level=INFO msg=applied interface="+iface+" ")
}

// waitFor polls cond every 5 ms for up to limit and returns how long it took.
func waitFor(t *testing.T, limit time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for !cond() {
		if time.Since(start) > limit {
			t.Fatalf("timed out after %v waiting for %s", limit, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
	return time.Since(start)
}

func (r *rig) shaped(iface string) bool {
	out, err := r.ns.try("tc qdisc show dev " + iface)
	return err == nil && strings.Contains(out, "qdisc cake") && strings.Contains(out, "qdisc ingress ffff:")
}

func vmRig(t *testing.T) *rig {
	testutil.RequireVM(t)
	r := newRig(t)
	r.ns.sh(t, "modprobe sch_cake; modprobe ifb; modprobe act_mirred; modprobe cls_u32; modprobe sch_ingress; true")
	return r
}

func TestVMDaemonReappliesRecreatedInterface(t *testing.T) {
	r := vmRig(t)
	r.ns.sh(t, "ip link add vm0 type veth peer name vm1 && ip link set vm0 up && ip link set vm1 up")
	r.config(cakeSection("wan", "vm0"))
	d := r.startDaemon(t, "--debounce", "200ms")
	waitFor(t, 20*time.Second, "vm0 shaped at start", func() bool { return r.shaped("vm0") && d.applied("vm0") == 1 })

	var lat []time.Duration
	for i := 0; i < 3; i++ {
		r.ns.sh(t, "ip link del vm0")
		r.ns.sh(t, "ip link add vm0 type veth peer name vm1 && ip link set vm0 up && ip link set vm1 up")
		lat = append(lat, waitFor(t, 20*time.Second, "vm0 shaped again", func() bool { return r.shaped("vm0") && d.applied("vm0") >= i+2 }))
	}
	t.Logf("re-apply latency after delete+create (debounce 200ms, emulated CPU): %v", lat)
	if n := strings.Count(r.ns.sh(t, "ip -o link show type ifb"), "ifb4vm0"); n != 1 {
		t.Errorf("%d ifb4vm0 devices; want 1", n)
	}
}

func TestVMDaemonLinkDownUp(t *testing.T) {
	r := vmRig(t)
	r.ns.sh(t, "ip link add vm0 type veth peer name vm1 && ip link set vm0 up && ip link set vm1 up")
	r.config(cakeSection("wan", "vm0"))
	d := r.startDaemon(t, "--debounce", "200ms")
	waitFor(t, 20*time.Second, "vm0 shaped", func() bool { return r.shaped("vm0") && d.applied("vm0") == 1 })
	applied := d.applied("vm0")
	r.ns.sh(t, "ip link set vm0 down")
	time.Sleep(time.Second)
	r.ns.sh(t, "ip link set vm0 up")
	time.Sleep(2 * time.Second)
	if !r.shaped("vm0") {
		t.Fatalf("vm0 not shaped after down/up:\n%s", r.ns.sh(t, "tc qdisc show dev vm0"))
	}
	if n := d.applied("vm0"); n != applied {
		t.Errorf("down/up caused %d re-applies of an intact tree; want 0", n-applied)
	}
	// Down/up keeps qdiscs in Linux; a tree removed while down is restored.
	r.ns.sh(t, "ip link set vm0 down; tc qdisc del dev vm0 root; ip link set vm0 up")
	lat := waitFor(t, 20*time.Second, "vm0 restored after up", func() bool { return r.shaped("vm0") })
	t.Logf("tree deleted while down restored %v after up", lat)
}

func TestVMDaemonShapesLateInterface(t *testing.T) {
	r := vmRig(t)
	r.config(cakeSection("wan", "late0"))
	d := r.startDaemon(t, "--debounce", "200ms")
	waitFor(t, 20*time.Second, "daemon waiting", func() bool { return strings.Contains(d.logs.String(), "waiting") })
	r.ns.sh(t, "ip link add late0 type veth peer name late1 && ip link set late1 up && ip link set late0 up")
	lat := waitFor(t, 20*time.Second, "late0 shaped", func() bool { return r.shaped("late0") })
	t.Logf("late interface shaped %v after it appeared", lat)
}

func TestVMDaemonBrokenConfigOnHUP(t *testing.T) {
	r := vmRig(t)
	r.ns.sh(t, "ip link add vm0 type veth peer name vm1 && ip link set vm0 up && ip link set vm1 up")
	r.config(cakeSection("wan", "vm0"))
	d := r.startDaemon(t, "--poll-interval", "0")
	waitFor(t, 20*time.Second, "vm0 shaped", func() bool { return r.shaped("vm0") && d.applied("vm0") == 1 })
	before := r.ns.tc(t, "qdisc show dev vm0")
	r.config("config queue 'wan'\n\toption enabled '1\n") // unterminated quote
	d.cmd.Process.Signal(syscall.SIGHUP)
	waitFor(t, 20*time.Second, "reload error logged", func() bool { return strings.Contains(d.logs.String(), "config not reloaded") })
	if !strings.Contains(d.logs.String(), r.cfg+":") {
		t.Errorf("error does not name the file and line:\n%s", d.logs)
	}
	if after := r.ns.tc(t, "qdisc show dev vm0"); after != before {
		t.Errorf("broken config changed shaping:\nbefore %s\nafter  %s", before, after)
	}
	// Fixing it and SIGHUP applies the change.
	r.config(strings.Replace(cakeSection("wan", "vm0"), "'5000'", "'6000'", 1))
	d.cmd.Process.Signal(syscall.SIGHUP)
	waitFor(t, 20*time.Second, "new rate", func() bool { return strings.Contains(r.ns.tc(t, "qdisc show dev vm0"), "6Mbit") })
}

func TestVMConcurrentStarts(t *testing.T) {
	r := vmRig(t)
	r.ns.sh(t, "ip link add vm0 type veth peer name vm1 && ip link set vm0 up && ip link set vm1 up")
	r.config(cakeSection("wan", "vm0"))
	var wg sync.WaitGroup
	errs := make([]string, 3)
	for i := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			o, e, err := r.ns.sqm("start", "--config", r.cfg, "--state-dir", r.state)
			if err != nil {
				errs[i] = fmt.Sprintf("start %d: %v\n%s%s", i, err, o, e)
			} else {
				errs[i] = strings.TrimSpace(o)
			}
		}()
	}
	wg.Wait()
	t.Logf("outputs: %q", errs)
	applied := 0
	for _, e := range errs {
		if strings.Contains(e, "exit status") {
			t.Error(e)
		}
		if strings.Contains(e, "applied") {
			applied++
		}
	}
	if applied != 1 {
		t.Errorf("%d of 3 concurrent starts applied; want exactly 1 (the others find it unchanged)", applied)
	}
	q := r.ns.tc(t, "qdisc show dev vm0")
	if strings.Count(q, "qdisc cake") != 1 || strings.Count(q, "qdisc ingress") != 1 {
		t.Errorf("tree after concurrent starts:\n%s", q)
	}
	if n := strings.Count(r.ns.sh(t, "ip -o link show type ifb"), "ifb4vm0"); n != 1 {
		t.Errorf("%d ifb4vm0 devices; want 1", n)
	}
	if o, _, err := r.ns.sqm("start", "--config", r.cfg, "--state-dir", r.state); err != nil || !strings.Contains(o, "unchanged") {
		t.Errorf("start after the race: %v %s; want unchanged (state and kernel agree)", err, o)
	}
}

func TestVMKillDaemonMidApply(t *testing.T) {
	r := vmRig(t)
	for i := range 4 {
		r.ns.sh(t, fmt.Sprintf("ip link add k%d type veth peer name kp%d && ip link set k%d up && ip link set kp%d up", i, i, i, i))
	}
	// configure writes 4 sections with upload rate up: a new rate each
	// round makes the daemon re-apply every section over existing state.
	configure := func(up int) {
		var cfg strings.Builder
		for i := range 4 {
			cfg.WriteString(strings.Replace(cakeSection(fmt.Sprintf("s%d", i), fmt.Sprintf("k%d", i)), "'5000'", fmt.Sprintf("'%d'", up), 1))
		}
		r.config(cfg.String())
	}
	midApply := 0
	for round := range 8 {
		// Round 0 builds from nothing; later rounds change the rate, so
		// the daemon re-applies over the previous round's state. It is
		// killed (-9) as soon as it marks interface k(round%4) as being
		// applied: mid-apply by construction.
		up := 4100 + 100*round // never a whole Mbit: tc prints those as "5Mbit"
		configure(up)
		victim := filepath.Join(r.state, fmt.Sprintf("k%d.pending.json", round%4))
		cmd := clitest.Command("daemon", "--config", r.cfg, "--state-dir", r.state)
		r.ns.start(t, cmd)
		exited := make(chan struct{})
		go func() { cmd.Wait(); close(exited) }()
		hit := false
		deadline := time.Now().Add(20 * time.Second)
		for time.Now().Before(deadline) {
			if _, err := os.Stat(victim); err == nil {
				cmd.Process.Signal(syscall.SIGKILL)
				hit = true
				break
			}
			select {
			case <-exited:
				t.Fatalf("round %d: daemon exited by itself", round)
			default:
			}
			time.Sleep(200 * time.Microsecond)
		}
		cmd.Process.Signal(syscall.SIGKILL)
		<-exited
		if hit {
			midApply++
		}
		o, e, err := r.ns.sqm("start", "--config", r.cfg, "--state-dir", r.state)
		if err != nil {
			t.Errorf("round %d (killed while applying k%d: %v): start after kill -9: %v\n%s%s\nstate dir:\n%s", round, round%4, hit, err, o, e,
				r.ns.sh(t, "cd "+r.state+" && for f in *; do echo \"== $f\"; head -c 600 \"$f\"; echo; done"))
			continue
		}
		for i := range 4 {
			if !r.shaped(fmt.Sprintf("k%d", i)) {
				t.Errorf("round %d: k%d not shaped after recovery:\n%s", round, i, r.ns.sh(t, fmt.Sprintf("tc qdisc show dev k%d", i)))
			}
		}
		if q := r.ns.tc(t, "qdisc show dev k3"); !strings.Contains(q, fmt.Sprintf("bandwidth %dKbit", up)) {
			t.Errorf("round %d: k3 does not have the new rate %d kbit:\n%s", round, up, q)
		}
		if n := strings.Count(r.ns.sh(t, "ip -o link show type ifb"), "ifb4k"); n != 4 {
			t.Errorf("round %d: %d IFBs; want 4", round, n)
		}
		if o, _, err := r.ns.sqm("start", "--config", r.cfg, "--state-dir", r.state); err != nil || strings.Count(o, "unchanged") != 4 {
			t.Errorf("round %d: second start: %v\n%s; want 4 unchanged", round, err, o)
		}
	}
	t.Logf("%d of 8 kills hit an apply in progress (after its pending marker was written)", midApply)
	if midApply < 4 {
		t.Errorf("only %d of 8 kills landed mid-apply; the test did not test much", midApply)
	}
	// After all that, stop still knows everything sqm built.
	if o, e, err := r.ns.sqm("stop", "--state-dir", r.state); err != nil {
		t.Fatalf("stop: %v\n%s%s", err, o, e)
	}
	if ifbs := r.ns.sh(t, "ip -o link show type ifb"); strings.Contains(ifbs, "ifb4k") {
		t.Errorf("IFBs left after stop:\n%s", ifbs)
	}
	for i := range 4 {
		if q := r.ns.tc(t, fmt.Sprintf("qdisc show dev k%d", i)); strings.Contains(q, "cake") || strings.Contains(q, "ingress") {
			t.Errorf("k%d keeps sqm's qdiscs after stop:\n%s", i, q)
		}
	}
}
