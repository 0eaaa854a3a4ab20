package service_test

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"sqm/internal/clitest"
	"sqm/internal/testutil"
)

// This file checks that shaping needs nothing a stock router or the
// shipped systemd unit (CapabilityBoundingSet=CAP_NET_ADMIN) lacks: no
// veth module (not in default OpenWrt images), no network namespace of its
// own (unshare needs CAP_SYS_ADMIN), no capability but CAP_NET_ADMIN. The
// tests use a namespace only to keep their devices away from the machine's.

// privs is how the sqm child processes run.
type privs struct {
	name string
	// wrap is the command prefix; nil runs sqm as plain root.
	wrap []string
}

// netAdminOnly runs sqm as uid 0 with a bounding set of CAP_NET_ADMIN
// alone, so that after exec it has that capability and no other (what
// CapabilityBoundingSet=CAP_NET_ADMIN gives the daemon).
var netAdminOnly = privs{"cap_net_admin_only", []string{"setpriv", "--inh-caps=-all", "--bounding-set=-all,+net_admin", "--"}}

func (p privs) cmd(args ...string) *exec.Cmd {
	if p.wrap == nil {
		return clitest.Command(args...)
	}
	full := append(append([]string{}, p.wrap[1:]...), clitest.Binary())
	cmd := exec.Command(p.wrap[0], append(full, args...)...)
	cmd.Env = clitest.Env()
	return cmd
}

// sqm runs `sqm args...` with the rig's state dir (and config, for the
// commands that read one) inside the rig's namespace.
func (p privs) sqm(r *rig, args ...string) (string, int) {
	full := append([]string{args[0], "--state-dir", r.state}, args[1:]...)
	if args[0] == "start" || args[0] == "daemon" {
		full = append(full, "--config", r.cfg)
	}
	cmd := p.cmd(full...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	var err error
	r.ns.Do(func() { err = cmd.Run() })
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		r.t.Fatalf("run sqm %s: %v", strings.Join(args, " "), err)
	}
	return out.String(), code
}

func (p privs) mustSqm(t *testing.T, r *rig, args ...string) string {
	t.Helper()
	out, code := p.sqm(r, args...)
	if code != 0 {
		t.Fatalf("[%s] sqm %s: exit %d\n%s", p.name, strings.Join(args, " "), code, out)
	}
	return out
}

// checkCaps proves the wrapper does what it says: the process it starts
// has CAP_NET_ADMIN (bit 12) in its effective set and nothing else.
func checkCaps(t *testing.T, p privs) {
	t.Helper()
	if p.wrap == nil {
		return
	}
	if _, err := exec.LookPath(p.wrap[0]); err != nil {
		t.Fatalf("%s is needed to drop capabilities (util-linux): %v", p.wrap[0], err)
	}
	args := append(append([]string{}, p.wrap[1:]...), "grep", "^CapEff:", "/proc/self/status")
	out, err := exec.Command(p.wrap[0], args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(p.wrap, " "), err, out)
	}
	if got := strings.Fields(string(out)); len(got) != 2 || got[1] != fmt.Sprintf("%016x", 1<<12) {
		t.Fatalf("capabilities under %q: %q; want CAP_NET_ADMIN only (%016x)", strings.Join(p.wrap, " "), out, 1<<12)
	}
}

// startStopStatusDaemon runs sqm start, status, stop and then the daemon
// (including a re-created device) on dev, which recreate makes anew;
// shaped says whether sqm's tree is on dev.
func startStopStatusDaemon(t *testing.T, r *rig, p privs, dev, recreate string, shaped func() bool) {
	t.Helper()
	checkCaps(t, p)
	r.ns.sh(t, recreate)

	p.mustSqm(t, r, "start")
	if !shaped() {
		t.Fatalf("[%s] not shaped after sqm start:\n%s", p.name, r.ns.sh(t, "tc qdisc show dev "+dev))
	}
	if st := p.mustSqm(t, r, "status", dev); !strings.Contains(st, dev) {
		t.Errorf("[%s] sqm status does not mention %s:\n%s", p.name, dev, st)
	}
	p.mustSqm(t, r, "stop")
	if shaped() || strings.Contains(r.ns.sh(t, "ip -o link show"), "ifb4"+dev) {
		t.Fatalf("[%s] sqm stop left shaping:\n%s\n%s", p.name, r.ns.sh(t, "tc qdisc show"), r.ns.sh(t, "ip -o link show"))
	}

	d := &daemon{cmd: p.cmd("daemon", "--config", r.cfg, "--state-dir", r.state, "--log-level", "debug"), logs: &syncBuf{}, done: make(chan error, 1)}
	d.cmd.Stdout, d.cmd.Stderr = d.logs, d.logs
	r.ns.start(t, d.cmd)
	go func() { d.done <- d.cmd.Wait() }()
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			d.cmd.Process.Kill()
			<-d.done
		}
		if t.Failed() {
			t.Logf("[%s] daemon log:\n%s", p.name, d.logs)
		}
	})
	// done waits for the daemon's n-th "applied" for dev as well as for
	// the tree: shaped sees the qdiscs before the daemon has added the
	// ingress filter, and deleting the device then fails that apply
	// (an ERROR in the log) instead of testing a re-creation.
	done := func(n int) func() bool {
		return func() bool {
			return shaped() && d.applied(dev) >= n
		}
	}
	waitFor(t, 30*time.Second, "shaped by the daemon at start", done(1))
	r.ns.sh(t, "ip link del "+dev)
	r.ns.sh(t, recreate)
	lat := waitFor(t, 30*time.Second, "re-created device shaped again by the daemon", done(2))
	t.Logf("[%s] daemon shaped the re-created %s %v after it was created (default debounce)", p.name, dev, lat)
	d.cmd.Process.Signal(syscall.SIGTERM)
	if err := <-d.done; err != nil {
		t.Errorf("[%s] daemon exit after SIGTERM: %v\n%s", p.name, err, d.logs)
	}
	stopped = true
	if strings.Contains(d.logs.String(), "level=ERROR") {
		t.Errorf("[%s] daemon logged errors:\n%s", p.name, d.logs)
	}
	p.mustSqm(t, r, "stop")
	if shaped() {
		t.Errorf("[%s] still shaped after the daemon and sqm stop", p.name)
	}
}

// TestHostLeastPrivilege: on this machine's kernel (htb, pfifo, u32,
// mirred, ifb; no dummy), shape an IFB device with CAP_NET_ADMIN only.
func TestHostLeastPrivilege(t *testing.T) {
	if testutil.InVM() {
		t.Skip("host variant; TestVMWithoutVeth covers the VM")
	}
	r := newRig(t)
	r.config(strings.ReplaceAll(simplestPfifo, "'sq0'", "'lp0'"))
	shaped := func() bool {
		out, err := r.ns.try("tc qdisc show dev lp0")
		return err == nil && strings.Contains(out, "qdisc htb 1:") && strings.Contains(out, "qdisc ingress ffff:")
	}
	startStopStatusDaemon(t, r, netAdminOnly, "lp0", "ip link add lp0 type ifb && ip link set lp0 up", shaped)

	// This kernel has no sch_cake: the refusal names module and package
	// and leaves the system as it was.
	r.config(cakeSection("wan", "lp0"))
	refusedStart(t, r, netAdminOnly)
}

// refusedStart runs sqm start on a config whose qdisc (cake) the kernel
// lacks and checks the message and that nothing changed.
func refusedStart(t *testing.T, r *rig, p privs) {
	t.Helper()
	list := "tc qdisc show; ip -o link show | sed 's/^[0-9]*: //; s/ state.*//'"
	before := r.ns.sh(t, list)
	out, code := p.sqm(r, "start")
	if code == 0 {
		t.Fatalf("[%s] sqm start without sch_cake succeeded:\n%s", p.name, out)
	}
	want := "kernel module sch_cake is missing (OpenWrt: opkg install kmod-sched-cake)"
	if !strings.Contains(out, want) {
		t.Errorf("[%s] sqm start output does not say %q:\n%s", p.name, want, out)
	}
	if after := r.ns.sh(t, list); after != before {
		t.Errorf("[%s] a refused start changed the system:\nbefore:\n%s\nafter:\n%s", p.name, before, after)
	}
	t.Logf("[%s] %s", p.name, strings.TrimSpace(out))
}

// vmBlacklist makes modules unloadable in the VM the way an image without
// their package is: a modprobe.d "install" rule (modprobe reads
// /run/modprobe.d, a fresh tmpfs in the VM) and the module unloaded.
func vmBlacklist(t *testing.T, r *rig, mods ...string) {
	t.Helper()
	if err := os.MkdirAll("/run/modprobe.d", 0o755); err != nil {
		t.Fatal(err)
	}
	f := fmt.Sprintf("/run/modprobe.d/sqm-test-%s.conf", strings.Join(mods, "-"))
	var b strings.Builder
	for _, m := range mods {
		fmt.Fprintf(&b, "install %s /bin/false\n", m)
	}
	if err := os.WriteFile(f, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(f) })
	for _, m := range mods {
		// Devices and qdiscs of earlier tests go with their namespaces,
		// which the kernel frees asynchronously: wait for the module to
		// become unused.
		waitFor(t, 30*time.Second, "rmmod "+m, func() bool {
			_, err := r.ns.try("! grep -q '^" + m + " ' /proc/modules || rmmod " + m)
			return err == nil
		})
		if out, err := r.ns.try("modprobe " + m); err == nil {
			t.Fatalf("modprobe %s still works after blacklisting it:\n%s", m, out)
		}
	}
}

// TestVMWithoutVeth: with the veth module unloadable (as on a stock
// OpenWrt image), sqm start/status/stop/daemon shape a dummy device with
// piece_of_cake + ATM, as root and with CAP_NET_ADMIN only; with sch_cake
// unloadable as well, start names the module and the OpenWrt package and
// changes nothing.
func TestVMWithoutVeth(t *testing.T) {
	testutil.RequireVM(t)
	r := newRig(t)
	r.ns.sh(t, "modprobe dummy && modprobe ifb && modprobe sch_cake")
	vmBlacklist(t, r, "veth")
	if out, err := r.ns.try("ip link add vx0 type veth peer name vx1"); err == nil {
		t.Fatalf("veth pair created with veth blacklisted:\n%s", out)
	}
	sec := strings.ReplaceAll(cakeSection("wan", "dm0"), "option linklayer 'ethernet'", "option linklayer 'atm'")
	r.config(sec)
	shaped := func() bool { return r.shaped("dm0") }
	recreate := "ip link add dm0 type dummy && ip link set dm0 up"
	for _, p := range []privs{{"root", nil}, netAdminOnly} {
		t.Run(p.name, func(t *testing.T) {
			t.Cleanup(func() { r.ns.try("ip link del dm0") })
			startStopStatusDaemon(t, r, p, "dm0", recreate, shaped)
		})
	}
	if t.Failed() {
		return
	}

	vmBlacklist(t, r, "sch_cake")
	r.ns.sh(t, recreate)
	for _, p := range []privs{{"root", nil}, netAdminOnly} {
		refusedStart(t, r, p)
	}
}
