package metrics

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"sqm/internal/kernel"
	"sqm/internal/plan"
	"sqm/internal/service"
)

func TestExtender(t *testing.T) {
	inc := incarnation{ifindex: 2, applied: applied, kind: "cake", handle: 0x80010000}
	other := inc
	other.applied = applied.Add(time.Minute)
	type step struct {
		raw     uint32
		witness uint64
		inc     incarnation
		want    uint64
	}
	for _, c := range []struct {
		name  string
		steps []step
	}{
		{"first reading is raw", []step{{7, 100, inc, 7}}},
		{"increase", []step{{7, 100, inc, 7}, {10, 200, inc, 10}}},
		{"wrap adds the distance through 2^32", []step{
			{1<<32 - 5, 100, inc, 1<<32 - 5}, {3, 200, inc, 1<<32 + 3}, {10, 300, inc, 1<<32 + 10}}},
		{"two wraps", []step{{1<<32 - 1, 1, inc, 1<<32 - 1}, {0, 2, inc, 1 << 32}, {1<<32 - 1, 3, inc, 2<<32 - 1}, {1, 4, inc, 2<<32 + 1}}},
		{"witness going back is a reset", []step{{1000, 5000, inc, 1000}, {3, 10, inc, 3}}},
		{"new incarnation is a reset even if the witness grew", []step{{1000, 5000, inc, 1000}, {3, 9000, other, 3}}},
		{"new ifindex is a reset", []step{{1000, 5000, inc, 1000}, {3, 9000, incarnation{ifindex: 9, applied: applied, kind: "cake", handle: 0x80010000}, 3}}},
		{"unchanged", []step{{5, 1, inc, 5}, {5, 1, inc, 5}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := newExtender()
			for i, s := range c.steps {
				e.begin()
				if got := e.extend("k", s.raw, s.witness, s.inc); got != s.want {
					t.Fatalf("step %d: raw %d -> %d, want %d", i, s.raw, got, s.want)
				}
				e.end()
			}
		})
	}
}

func TestExtenderForgets(t *testing.T) {
	e := newExtender()
	inc := incarnation{ifindex: 1}
	e.begin()
	e.extend("a", 1<<32-1, 1, inc)
	e.extend("b", 1, 1, inc)
	e.end()
	e.begin()
	e.extend("b", 2, 2, inc)
	e.end()
	if _, ok := e.series["a"]; ok || len(e.series) != 1 {
		t.Fatalf("series not seen in a scrape are kept: %v", e.series)
	}
	// "a" coming back starts over rather than as a wrap of the old value.
	e.begin()
	if got := e.extend("a", 3, 3, inc); got != 3 {
		t.Fatalf("a after being forgotten = %d, want 3", got)
	}
}

// TestCollectorWrap renders two scrapes across a 32-bit wrap of cake's
// tin packet counter and qdisc drops: the counters keep rising.
func TestCollectorWrap(t *testing.T) {
	k, states, _ := fixture()
	c := NewCollector()
	render(t, c, k, states, nil)
	ds := k["eth1"]
	root := ds.Qdiscs[0]
	cake := *root.Cake
	cake.Tins = append([]kernel.CakeTin(nil), cake.Tins...)
	cake.Tins[1].SentPackets = 1000 // was 2000: wrapped
	cake.Tins[1].SentBytes += 1 << 33
	root.Cake = &cake
	root.Drops = 2 // was 12
	root.Bytes += 1 << 33
	ds.Qdiscs = []kernel.QdiscStatus{root, ds.Qdiscs[1]}
	k["eth1"] = ds
	out := string(render(t, c, k, states, nil))
	for _, want := range []string{
		`sqm_cake_tin_sent_packets_total{interface="eth1",direction="egress",tin="Best Effort"} 4294968296`, // 2^32 - 2000 + 2000 + 1000
		`sqm_queue_dropped_packets_total{interface="eth1",direction="egress"} 4294967298`,                   // 2^32 + 2
	} {
		if !strings.Contains(out, want+"\n") {
			t.Errorf("missing %s", want)
		}
	}
	// A fresh collector (a new process) shows the raw values.
	out = string(render(t, NewCollector(), k, states, nil))
	if !strings.Contains(out, `sqm_queue_dropped_packets_total{interface="eth1",direction="egress"} 2`+"\n") {
		t.Errorf("fresh collector does not start from the raw value")
	}
}

// TestLeafMarks: an htb root's ECN marks are its leaves' (fq_codel, cake).
func TestLeafMarks(t *testing.T) {
	k := fakeKernel{"eth9": {Device: "eth9", Ifindex: 9, Qdiscs: []kernel.QdiscStatus{
		{Kind: "htb", Handle: plan.MakeHandle(1, 0), Parent: plan.HandleRoot},
		{Kind: "fq_codel", Handle: plan.MakeHandle(0x110, 0), Parent: plan.MakeHandle(1, 0x11), FqCodel: &kernel.FqCodelStats{ECNMark: 5}},
		{Kind: "cake", Handle: plan.MakeHandle(0x120, 0), Parent: plan.MakeHandle(1, 0x12), Cake: &kernel.CakeStats{Tins: []kernel.CakeTin{{ECNMarkedPackets: 7}}}},
		{Kind: "ingress", Handle: plan.MakeHandle(0xffff, 0), Parent: plan.HandleIngress, FqCodel: &kernel.FqCodelStats{ECNMark: 1000}},
	}}}
	out := string(render(t, NewCollector(), k, []*service.State{state("eth9", "s", "simple", "fq_codel", "", 0, 1000)}, nil))
	if want := `sqm_queue_ecn_marked_packets_total{interface="eth9",direction="egress"} 12` + "\n"; !strings.Contains(out, want) {
		t.Errorf("want %s in\n%s", want, out)
	}
}

func TestPolicedIngress(t *testing.T) {
	k := fakeKernel{"eth5": {Device: "eth5", Ifindex: 5, Qdiscs: []kernel.QdiscStatus{
		{Kind: "cake", Handle: plan.MakeHandle(1, 0), Parent: plan.HandleRoot, Counters: kernel.Counters{Bytes: 10}},
		{Kind: "ingress", Handle: plan.MakeHandle(0xffff, 0), Parent: plan.HandleIngress, Counters: kernel.Counters{Bytes: 777}},
	}}}
	out := string(render(t, NewCollector(), k, []*service.State{state("eth5", "s", "police", "cake", "", 8000, 1000)}, nil))
	for _, want := range []string{
		`sqm_queue_root_info{interface="eth5",direction="ingress",device="eth5",kind="ingress",handle="ffff:"} 1`,
		`sqm_queue_sent_bytes_total{interface="eth5",direction="ingress"} 777`,
		`sqm_queue_sent_bytes_total{interface="eth5",direction="egress"} 10`,
	} {
		if !strings.Contains(out, want+"\n") {
			t.Errorf("missing %s in\n%s", want, out)
		}
	}
}

func TestWriteFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "sqm.prom")
	os.WriteFile(path, []byte("old"), 0o600)
	k, states, _ := fixture()
	snap, _ := FromStates(k, states)
	if err := NewCollector().WriteFile(path, snap, nil); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(path)
	if err != nil || !bytes.HasPrefix(got, []byte("# HELP sqm_build_info")) {
		t.Fatalf("file: %v %q", err, got)
	}
	fi, _ := os.Stat(path)
	if fi.Mode().Perm() != 0o644 {
		t.Errorf("mode %v, want 0644 (the collector may run as another user)", fi.Mode().Perm())
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 1 {
		t.Errorf("temporary files left: %v", ents)
	}
	if err := NewCollector().WriteFile(filepath.Join(dir, "missing", "x.prom"), snap, nil); err == nil || !strings.Contains(err.Error(), "missing") {
		t.Errorf("unwritable directory: err %v, want one naming the path", err)
	}
}

// TestNoHTTP keeps net/http out of this package's dependencies: `sqm
// status --prom` links it, and in a router build without the web page
// net/http would cost about 1.5 MB. The handler is in metricshttp.
func TestNoHTTP(t *testing.T) {
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go command not on PATH")
	}
	out, err := exec.Command(gobin, "list", "-deps", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	for _, p := range strings.Fields(string(out)) {
		if p == "net/http" || p == "crypto/tls" {
			t.Errorf("package metrics depends on %s", p)
		}
	}
}
