package service_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"sqm/internal/cli"
)

// rig is one test's namespace, config file and state directory, with sqm
// run in-process through cli.Run on the namespace's thread.
type rig struct {
	t     *testing.T
	ns    *netNS
	cfg   string
	state string
}

func newRig(t *testing.T) *rig {
	ns := newNetNS(t)
	dir := t.TempDir()
	return &rig{t: t, ns: ns, cfg: filepath.Join(dir, "sqm"), state: filepath.Join(dir, "run")}
}

func (r *rig) config(s string) {
	r.t.Helper()
	if err := os.WriteFile(r.cfg, []byte(s), 0o644); err != nil {
		r.t.Fatal(err)
	}
}

// run runs `sqm args...` with the rig's config and state dir.
func (r *rig) run(args ...string) (stdout, stderr string, code int) {
	var o, e bytes.Buffer
	full := append([]string{args[0], "--state-dir", r.state}, args[1:]...)
	if args[0] != "status" && args[0] != "stop" && args[0] != "apply" {
		full = append(full, "--config", r.cfg)
	}
	r.ns.Do(func() { code = cli.Run(context.Background(), full, &o, &e) })
	return o.String(), e.String(), code
}

func (r *rig) mustRun(args ...string) string {
	r.t.Helper()
	o, e, code := r.run(args...)
	if code != 0 {
		r.t.Fatalf("sqm %s: exit %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), code, o, e)
	}
	return o
}

// simplestPfifo is the recipe this machine's kernel can build: htb with a
// pfifo leaf, ingress through an IFB with a u32 mirred redirect.
const simplestPfifo = `
config queue 'wan'
	option enabled '1'
	option interface 'sq0'
	option download '20000'
	option upload '5000'
	option script 'simplest.qos'
	option qdisc 'pfifo'
`

func TestHostStartStopStatus(t *testing.T) {
	r := newRig(t)
	r.ns.sh(t, "ip link add sq0 type veth peer name sq1 && ip link set sq0 up && ip link set sq1 up")
	r.config(simplestPfifo)

	out := r.mustRun("start")
	if !strings.Contains(out, "sq0: applied (section \"wan\")") {
		t.Errorf("start output:\n%s", out)
	}
	root := r.ns.tc(t, "qdisc show dev sq0")
	for _, want := range []string{"qdisc htb 1: root", "qdisc pfifo", "qdisc ingress ffff:"} {
		if !strings.Contains(root, want) {
			t.Errorf("tc qdisc show dev sq0 lacks %q:\n%s", want, root)
		}
	}
	if ifb := r.ns.tc(t, "qdisc show dev ifb4sq0"); !strings.Contains(ifb, "qdisc htb 1: root") {
		t.Errorf("IFB not shaped:\n%s", ifb)
	}
	if fi, err := os.Stat(r.state); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("state dir: %v, %v; want mode 0700", fi, err)
	}

	// Idempotent: a second start changes nothing.
	if out := r.mustRun("start"); !strings.Contains(out, "sq0: unchanged") {
		t.Errorf("second start:\n%s", out)
	}

	// Status, human and JSON. Send some packets through the shaper first.
	r.ns.sh(t, "ip addr add 10.9.0.1/24 dev sq0; ping -c 3 -i 0.2 -W 1 10.9.0.2 >/dev/null 2>&1 || true")
	st := r.mustRun("status")
	for _, want := range []string{`sq0: section "wan"`, "tree as applied", "download 20000 kbit/s", "qdisc  htb", "class  htb", "ifb4sq0: IFB shaping the ingress of sq0", "drops", "backlog"} {
		if !strings.Contains(st, want) {
			t.Errorf("status lacks %q:\n%s", want, st)
		}
	}
	t.Logf("sqm status:\n%s", st)
	js := r.mustRun("status", "--json")
	var rep struct {
		Devices []struct {
			Device string `json:"device"`
			Kernel struct {
				Qdiscs []struct {
					Kind    string `json:"kind"`
					Packets uint64 `json:"packets"`
				} `json:"qdiscs"`
			} `json:"kernel"`
		} `json:"devices"`
	}
	if err := json.Unmarshal([]byte(js), &rep); err != nil {
		t.Fatalf("status --json: %v\n%s", err, js)
	}
	if len(rep.Devices) != 2 || rep.Devices[0].Device != "sq0" || len(rep.Devices[0].Kernel.Qdiscs) == 0 {
		t.Errorf("status --json devices: %+v", rep.Devices)
	}
	var pkts uint64
	for _, q := range rep.Devices[0].Kernel.Qdiscs {
		if q.Kind == "htb" {
			pkts = q.Packets
		}
	}
	if pkts == 0 {
		t.Errorf("htb root counted no packets after pings:\n%s", js)
	}

	// Restart rebuilds from scratch (counters reset) in one transaction
	// per interface, not stop then start; a broken config makes it change
	// nothing.
	if out := r.mustRun("restart"); strings.Contains(out, "sq0: removed") || !strings.Contains(out, "sq0: applied") {
		t.Errorf("restart:\n%s", out)
	}
	r.config(strings.Replace(simplestPfifo, "simplest.qos", "nosuch.qos", 1))
	if _, e, code := r.run("restart"); code != 1 || !strings.Contains(e, "nosuch") {
		t.Errorf("restart with a broken config: exit %d\n%s", code, e)
	}
	if !strings.Contains(r.ns.tc(t, "qdisc show dev sq0"), "htb 1:") {
		t.Error("restart with a broken config removed the shaping")
	}
	r.config(simplestPfifo)

	// Someone deletes the root: start notices and rebuilds.
	r.ns.sh(t, "tc qdisc del dev sq0 root")
	if st := r.mustRun("status", "sq0"); !strings.Contains(st, "tree DIFFERS") {
		t.Errorf("status does not show the deleted root:\n%s", st)
	}
	if out := r.mustRun("start"); !strings.Contains(out, "sq0: applied") {
		t.Errorf("start after tampering:\n%s", out)
	}

	// Stop removes exactly sqm's objects.
	r.ns.sh(t, "tc qdisc add dev sq1 root handle 7: htb") // not sqm's
	if out := r.mustRun("stop"); !strings.Contains(out, "sq0: removed") {
		t.Errorf("stop:\n%s", out)
	}
	if q := r.ns.tc(t, "qdisc show dev sq0"); strings.Contains(q, "htb") || strings.Contains(q, "ingress") {
		t.Errorf("sqm's qdiscs left after stop:\n%s", q)
	}
	if _, err := r.ns.try("ip link show ifb4sq0"); err == nil {
		t.Error("IFB left after stop")
	}
	if q := r.ns.tc(t, "qdisc show dev sq1"); !strings.Contains(q, "htb 7:") {
		t.Errorf("stop touched a qdisc sqm did not install:\n%s", q)
	}
	if ents, _ := filepath.Glob(filepath.Join(r.state, "*.json")); len(ents) != 0 {
		t.Errorf("state left after stop: %v", ents)
	}
	if out := r.mustRun("stop", "sq0"); !strings.Contains(out, "not-shaped") {
		t.Errorf("second stop:\n%s", out)
	}
}

// shape drops the counters from tc output (IPv6 router solicitations pass
// through even in a test namespace), leaving the tree.
func shape(tc string) string {
	return regexp.MustCompile(`direct_packets_stat \d+ `).ReplaceAllString(tc, "")
}

func TestHostStartChecksBeforeTouching(t *testing.T) {
	r := newRig(t)
	r.ns.sh(t, "ip link add sq0 type veth peer name sq1 && ip link set sq0 up && ip link set sq1 up")
	tests := []struct {
		name, config, setup string
		args                []string
		wantErr             string
	}{
		{"missing interface", simplestPfifo + `
config queue 'lte'
	option enabled '1'
	option interface 'wwan0'
	option download '1000'
	option upload '1000'
	option script 'simplest.qos'
	option qdisc 'pfifo'
`, "", nil, "wwan0 does not exist"},
		{"foreign root qdisc", simplestPfifo, "tc qdisc add dev sq0 root handle 5: htb", nil, "did not install"},
		{"unknown script", strings.Replace(simplestPfifo, "simplest.qos", "nosuch.qos", 1), "", nil, "nosuch"},
		{"interface without section", simplestPfifo, "", []string{"sq1"}, "no enabled queue section for interface sq1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r.ns.try("tc qdisc del dev sq0 root; tc qdisc del dev sq0 ingress")
			r.config(tt.config)
			if tt.setup != "" {
				r.ns.sh(t, tt.setup)
			}
			before := shape(r.ns.tc(t, "qdisc show dev sq0"))
			_, e, code := r.run(append([]string{"start"}, tt.args...)...)
			if code != 1 || !strings.Contains(e, tt.wantErr) {
				t.Errorf("exit %d, stderr:\n%s\nwant exit 1 mentioning %q", code, e, tt.wantErr)
			}
			if after := shape(r.ns.tc(t, "qdisc show dev sq0")); after != before {
				t.Errorf("failed start changed the kernel:\nbefore %s\nafter  %s", before, after)
			}
			if _, err := r.ns.try("ip link show ifb4sq0"); err == nil {
				t.Error("failed start left an IFB")
			}
		})
	}
	// --force replaces the foreign root.
	r.config(simplestPfifo)
	r.ns.try("tc qdisc del dev sq0 root; tc qdisc add dev sq0 root handle 5: htb")
	if out := r.mustRun("start", "--force"); !strings.Contains(out, "sq0: applied") {
		t.Errorf("start --force:\n%s", out)
	}
}

func TestHostApplyAndReload(t *testing.T) {
	r := newRig(t)
	r.ns.sh(t, "ip link add sq0 type veth peer name sq1 && ip link set sq0 up && ip link set sq1 up")
	out := r.mustRun("apply", "--iface", "sq1", "--down", "10mbit", "--up", "2mbit", "--script", "simplest", "--qdisc", "pfifo")
	if !strings.Contains(out, `sq1: applied (section "cli")`) || !strings.Contains(out, "egress 2000 kbit") {
		t.Errorf("apply:\n%s", out)
	}
	if dry := r.mustRun("apply", "--iface", "sq1", "--down", "10mbit", "--up", "3mbit", "--script", "simplest", "--qdisc", "pfifo", "--dry-run"); !strings.Contains(dry, "tc ") {
		t.Errorf("--dry-run printed no commands:\n%s", dry)
	}
	if q := r.ns.tc(t, "class show dev sq1"); !strings.Contains(q, "2Mbit") {
		t.Errorf("dry run changed the rate or apply did not set it:\n%s", q)
	}

	r.config(simplestPfifo)
	r.mustRun("start")
	// Change the rate: reload re-applies sq0 only and leaves sq1 (cli) alone.
	r.config(strings.Replace(simplestPfifo, "'5000'", "'6000'", 1))
	out = r.mustRun("reload")
	if !strings.Contains(out, "sq0: applied") || strings.Contains(out, "sq1") {
		t.Errorf("reload:\n%s", out)
	}
	if q := r.ns.tc(t, "class show dev sq0"); !strings.Contains(q, "6Mbit") {
		t.Errorf("reload did not apply the new rate:\n%s", q)
	}
	// Disable the section: reload removes it.
	r.config(strings.Replace(simplestPfifo, "enabled '1'", "enabled '0'", 1))
	if out := r.mustRun("reload"); !strings.Contains(out, "sq0: removed") {
		t.Errorf("reload of a disabled section:\n%s", out)
	}
	if q := r.ns.tc(t, "qdisc show dev sq1"); !strings.Contains(q, "htb 1:") {
		t.Errorf("reload removed the cli-applied sq1:\n%s", q)
	}
	if out := r.mustRun("stop", "sq1"); !strings.Contains(out, "sq1: removed") {
		t.Errorf("stop sq1:\n%s", out)
	}
}

func TestHostPlanChangesNothing(t *testing.T) {
	r := newRig(t)
	r.config(simplestPfifo)
	out := r.mustRun("plan")
	if !strings.Contains(out, "tc qdisc") || !strings.Contains(out, "MTU 1500") {
		t.Errorf("plan for a missing interface:\n%s", out)
	}
	js := r.mustRun("plan", "--json")
	var plans []map[string]any
	if err := json.Unmarshal([]byte(js), &plans); err != nil || len(plans) != 1 || plans[0]["interface"] != "sq0" {
		t.Errorf("plan --json: %v\n%s", err, js)
	}
	if _, err := os.Stat(r.state); err == nil {
		t.Error("plan created the state dir")
	}
}

// TestHostDaemonReappliesRecreatedInterface runs the daemon as a child
// process on this machine's kernel (htb+pfifo) and measures how fast a
// deleted and re-created interface is shaped again, and a late one shaped.
func TestHostDaemonReappliesRecreatedInterface(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a daemon process; skipped with -short")
	}
	r := newRig(t)
	r.config(simplestPfifo)
	d := r.startDaemon(t, "--debounce", "200ms", "--log-level", "info")
	pfifo := func() bool {
		out, err := r.ns.try("tc qdisc show dev sq0")
		return err == nil && strings.Contains(out, "qdisc pfifo") && strings.Contains(out, "qdisc ingress ffff:")
	}
	waitFor(t, 10*time.Second, "daemon waiting for sq0", func() bool { return strings.Contains(d.logs.String(), "msg=waiting") })
	r.ns.sh(t, "ip link add sq0 type veth peer name sq1 && ip link set sq1 up && ip link set sq0 up")
	late := waitFor(t, 10*time.Second, "sq0 shaped after it appeared", pfifo)
	var again []time.Duration
	for range 3 {
		r.ns.sh(t, "ip link del sq0 && ip link add sq0 type veth peer name sq1 && ip link set sq1 up && ip link set sq0 up")
		again = append(again, waitFor(t, 10*time.Second, "sq0 shaped again", pfifo))
	}
	t.Logf("late interface shaped after %v; re-created interface shaped again after %v (debounce 200ms)", late, again)
	if n := strings.Count(r.ns.sh(t, "ip -o link show type ifb"), "ifb4sq0"); n != 1 {
		t.Errorf("%d ifb4sq0 devices; want 1", n)
	}
	for _, l := range again {
		if l > 3*time.Second {
			t.Errorf("re-apply took %v; want well under 3 s with a 200ms debounce", l)
		}
	}
}

// issue23Config has what a router LuCI and past upgrades left behind: a
// disabled section naming a recipe sqm does not have, an enabled section
// with a broken value, and a good section. fix replaces the broken value.
func issue23Config(download string) string {
	return `
config queue 'old'
	option enabled '0'
	option interface 'sq9'
	option script 'hfsc_lite.qos'
` + simplestPfifo + `
config queue 'lte'
	option enabled '1'
	option interface 'sq2'
	option download '` + download + `'
	option upload '1000'
	option script 'simplest.qos'
	option qdisc 'pfifo'
`
}

// TestHostBrokenSectionStandsAlone is issue 23's "Done when", on this
// kernel in a namespace: `sqm start` shapes the good section, exits 1 with
// file:line for the broken one and says nothing about the disabled one
// but a warning; `sqm status` shows the refusal; `sqm daemon` keeps
// running, shapes the good one, and shapes the fixed one as soon as it is
// told (SIGHUP) or sees the file change.
func TestHostBrokenSectionStandsAlone(t *testing.T) {
	r := newRig(t)
	r.ns.sh(t, "ip link add sq0 type veth peer name sq1 && ip link add sq2 type veth peer name sq3 && ip link set sq0 up && ip link set sq1 up && ip link set sq2 up && ip link set sq3 up")
	r.config(issue23Config("85mbit"))
	o, e, code := r.run("start")
	brokenAt := r.cfg + `:18: queue "lte" option download: "85mbit" is not a number of kbit/s`
	if code != 1 || !strings.Contains(o, `sq0: applied (section "wan")`) || !strings.Contains(o, `sq2: refused (section "lte")`) || !strings.Contains(e, brokenAt) {
		t.Errorf("start: exit %d\nstdout:\n%s\nstderr:\n%s\nwant exit 1, sq0 applied, and %q", code, o, e, brokenAt)
	}
	for _, line := range strings.Split(e, "\n") {
		if strings.Contains(line, "hfsc_lite") && !strings.HasPrefix(line, "warning: ") {
			t.Errorf("the disabled section is more than a warning: %q", line)
		}
	}
	if !strings.Contains(r.ns.tc(t, "qdisc show dev sq0"), "qdisc pfifo") {
		t.Error("the good section is not shaped")
	}
	if strings.Contains(r.ns.tc(t, "qdisc show dev sq2"), "htb") {
		t.Error("the broken section was shaped")
	}
	if st := r.mustRun("status"); !strings.Contains(st, `REFUSED: section "lte" (`+r.cfg+":15, sq2)") || !strings.Contains(st, brokenAt) {
		t.Errorf("status does not show the refused section:\n%s", st)
	}
	if js := r.mustRun("status", "--json"); !strings.Contains(js, `"refused": [`) || !strings.Contains(js, `"section": "lte"`) {
		t.Errorf("status --json does not show the refused section:\n%s", js)
	}
	// plan: the good plan, and the refusal.
	if o, e, code := r.run("plan"); code != 1 || !strings.Contains(o, "dev sq0") || strings.Contains(o, "dev sq2") || !strings.Contains(e, brokenAt) {
		t.Errorf("plan: exit %d\nstdout:\n%s\nstderr:\n%s", code, o, e)
	}
	r.mustRun("stop")

	if testing.Short() {
		return
	}
	for _, how := range []string{"SIGHUP", "file change"} {
		t.Run("daemon/"+how, func(t *testing.T) {
			r.config(issue23Config("85mbit"))
			poll := "0"
			if how == "file change" {
				poll = "100ms"
			}
			d := r.startDaemon(t, "--poll-interval", poll, "--check-interval", "0")
			waitFor(t, 10*time.Second, "sq0 shaped", func() bool { return d.applied("sq0") == 1 })
			waitFor(t, 10*time.Second, "refusal logged", func() bool { return strings.Contains(d.logs.String(), `queue \"lte\" option download`) })
			if d.applied("sq2") != 0 {
				t.Error("the daemon applied the broken section")
			}
			r.config(issue23Config("3000"))
			if how == "SIGHUP" {
				d.cmd.Process.Signal(syscall.SIGHUP)
			}
			waitFor(t, 10*time.Second, "fixed section shaped", func() bool { return d.applied("sq2") == 1 })
			if !strings.Contains(r.ns.tc(t, "class show dev ifb4sq2"), "rate 3Mbit") {
				t.Errorf("sq2's ingress is not at the fixed rate:\n%s", r.ns.tc(t, "class show dev ifb4sq2"))
			}
			select {
			case err := <-d.done:
				d.done <- err
				t.Fatalf("the daemon exited: %v", err)
			default:
			}
			r.mustRun("stop")
		})
	}
}
