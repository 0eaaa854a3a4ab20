//go:build linux

package cli

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"sqm/internal/config"
	"sqm/internal/json"
	"sqm/internal/json/jsontest"
	"sqm/internal/kernel"
	"sqm/internal/plan"
	"sqm/internal/service"
)

// Another test file of this package may define -update too; share it.
func init() {
	if flag.Lookup("update") == nil {
		flag.Bool("update", false, "rewrite testdata/*.golden")
	}
}

func updateGolden() bool {
	f := flag.Lookup("update")
	return f != nil && f.Value.String() == "true"
}

// fakeStatus returns canned kernel status: a cake egress root with
// diffserv4 tins on eth1, an htb tree on its IFB.
type fakeStatus map[string]kernel.DeviceStatus

func (f fakeStatus) LinkMTU(iface string) (int, error) { return 1500, nil }

// Matches says eth1's tree differs, so the golden file shows drift.
func (f fakeStatus) Matches(p *plan.Plan) (bool, string, error) {
	if p.Interface == "eth1" {
		return false, "egress root: want cake 1:,\n have fq_codel", nil
	}
	return true, "", nil
}

func (f fakeStatus) ShaperRate(dev string) (uint64, error) { return 0, nil }

func (f fakeStatus) Status(devs ...string) ([]kernel.DeviceStatus, error) {
	var out []kernel.DeviceStatus
	for _, d := range devs {
		ds, ok := f[d]
		if !ok {
			return nil, fmt.Errorf("status %s: %w", d, kernel.ErrNoLink)
		}
		out = append(out, ds)
	}
	return out, nil
}

// statusFixture is two shaped interfaces (eth1 with an IFB, whose tree has
// drifted; ppp0, which is gone) and an unshaped one (eth2).
func statusFixture() (fakeStatus, []*service.State, time.Time) {
	applied := time.Date(2026, 11, 29, 23, 40, 1, 0, time.UTC)
	now := applied.Add(5*time.Minute + 3*time.Second)
	tin := func(i uint64) kernel.CakeTin {
		return kernel.CakeTin{ThresholdRate: 1250000 * (i + 1), TargetUS: 5000, IntervalUS: 100000,
			PeakDelayUS: uint32(1200 * (i + 1)), AvgDelayUS: uint32(300 * (i + 1)), BaseDelayUS: 12,
			SentPackets: uint32(1000 * (i + 1)), SentBytes: 1400000 * (i + 1), DroppedPackets: uint32(i * 3),
			ECNMarkedPackets: uint32(i), BacklogBytes: 1514, SparseFlows: 1, BulkFlows: uint32(i), MaxSkbLen: 1514}
	}
	k := fakeStatus{
		"eth1": {Device: "eth1", Ifindex: 2, Filters: 1, Qdiscs: []kernel.QdiscStatus{
			{Kind: "cake", Handle: plan.MakeHandle(1, 0), Parent: plan.HandleRoot,
				Counters: kernel.Counters{Bytes: 5600000, Packets: 4000, Drops: 12, Overlimits: 300, BacklogBytes: 1514, BacklogPackets: 1, ECNMarks: 6},
				Cake:     &kernel.CakeStats{Tins: []kernel.CakeTin{tin(0), tin(1), tin(2), tin(3)}}},
			{Kind: "ingress", Handle: plan.MakeHandle(0xffff, 0), Parent: plan.HandleIngress, Counters: kernel.Counters{Bytes: 123456789, Packets: 90000}},
		}},
		"ifb4eth1": {Device: "ifb4eth1", Ifindex: 5, Qdiscs: []kernel.QdiscStatus{
			{Kind: "htb", Handle: plan.MakeHandle(1, 0), Parent: plan.HandleRoot, Counters: kernel.Counters{Bytes: 123000000, Packets: 89000, Drops: 41, Overlimits: 7000}},
			{Kind: "fq_codel", Handle: plan.MakeHandle(0x110, 0), Parent: plan.MakeHandle(1, 0x10), Counters: kernel.Counters{Bytes: 123000000, Packets: 89000, Drops: 41}},
		}, Classes: []kernel.ClassStatus{
			{Kind: "htb", ClassID: plan.MakeHandle(1, 1), Parent: plan.HandleRoot, Counters: kernel.Counters{Bytes: 123000000, Packets: 89000}},
			{Kind: "htb", ClassID: plan.MakeHandle(1, 0x10), Parent: plan.MakeHandle(1, 1), Counters: kernel.Counters{Bytes: 123000000, Packets: 89000, Overlimits: 7000}},
		}},
		"eth2": {Device: "eth2", Ifindex: 3, Qdiscs: []kernel.QdiscStatus{{Kind: "noqueue", Parent: plan.HandleRoot}}},
	}
	wan := config.Defaults()
	wan.Name, wan.Interface, wan.Enabled, wan.Download, wan.Upload = "wan", "eth1", true, 85000, 10000
	wan.LinkLayer, wan.Overhead = "ethernet", 34
	cli := config.Defaults()
	cli.Name, cli.Interface, cli.Enabled, cli.Download, cli.Upload, cli.Script, cli.Qdisc = "cli", "ppp0", true, 0, 2000, "simplest", "fq_codel"
	states := []*service.State{
		{Interface: "eth1", Source: "/etc/config/sqm", Section: "wan", SectionPos: "/etc/config/sqm:3", AppliedAt: applied, PID: 4242,
			Queue: wan, Plan: wanPlan, Owned: kernel.Owned{Interface: "eth1", IFB: "ifb4eth1"}},
		{Interface: "ppp0", Source: service.SourceCLI, Section: "cli", AppliedAt: applied, Queue: cli},
	}
	return k, states, now
}

// wanPlan stands for eth1's applied plan: status passes the state's plan
// through as it is, so the golden file need not change with the planner.
var wanPlan = json.RawMessage(`{"interface":"eth1","section":"wan","script":"piece_of_cake","qdisc":"cake"}`)

func TestStatusGolden(t *testing.T) {
	k, states, now := statusFixture()
	tests := []struct {
		name   string
		ifaces []string
		golden string
		err    bool
	}{
		{"all shaped", nil, "status_all.golden", false},
		{"named, unshaped and missing", []string{"eth2", "nosuch0"}, "status_named.golden", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rep := statusReport(k, states, nil, tt.ifaces, now, nil)
			var b bytes.Buffer
			printStatus(&b, rep, "/run/sqm", now)
			if err := rep.err(); (err != nil) != tt.err {
				t.Errorf("err() = %v; want error %v", err, tt.err)
			}
			path := filepath.Join("testdata", tt.golden)
			if updateGolden() {
				if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run with -update to create it)", err)
			}
			if !bytes.Equal(want, b.Bytes()) {
				t.Errorf("status output differs from %s (-update rewrites it):\n got:\n%s\nwant:\n%s", path, b.Bytes(), want)
			}
		})
	}
	var b bytes.Buffer
	printStatus(&b, statusReport(k, nil, nil, nil, now, nil), "/run/sqm", now)
	if got := b.String(); got != "sqm is not shaping any interface (no state in /run/sqm)\n" {
		t.Errorf("no state: %q", got)
	}
	if !errors.Is(fmt.Errorf("x: %w", kernel.ErrNoLink), kernel.ErrNoLink) {
		t.Fatal("errors.Is broken")
	}
}

// An interrupted first apply (a pending record, no state) is listed with
// what to do about it, in text and JSON.
func TestStatusInterrupted(t *testing.T) {
	k, states, now := statusFixture()
	intr := map[string]service.Interrupted{"eth2": {PID: 77, Started: now.Add(-time.Minute), Source: "/etc/config/sqm", IFB: "ifb4eth2"}}
	rep := statusReport(k, states, intr, nil, now, nil)
	var devs []string
	for _, d := range rep.Devices {
		devs = append(devs, d.Device)
	}
	if got := strings.Join(devs, " "); got != "eth1 ifb4eth1 eth2 ppp0" {
		t.Errorf("devices %q; want the interrupted eth2 among the shaped ones", got)
	}
	var b bytes.Buffer
	printStatus(&b, rep, "/run/sqm", now)
	if !strings.Contains(b.String(), "eth2: an sqm apply (pid 77, started 2026-11-29 23:44:04 UTC) was interrupted here") || !strings.Contains(b.String(), "'sqm stop' removes it") {
		t.Errorf("text does not tell of the interrupted apply:\n%s", b.String())
	}
	j, err := json.Marshal(statusJSON(rep, "/run/sqm"))
	if err != nil || !strings.Contains(string(j), `"interrupted":{"pid":77,`) {
		t.Errorf("JSON (err %v) lacks the interrupted apply: %s", err, j)
	}
}

func fixtureRefused(now time.Time) []service.Refused {
	return []service.Refused{{Source: "/etc/config/sqm", Section: "lte", Interface: "wwan0", SectionPos: "/etc/config/sqm:20",
		Errors: []string{`/etc/config/sqm:23: queue "lte" option download: "85mbit" is not a number of kbit/s (sqm-scripts takes download in kbit/s, e.g. 85000)`},
		At:     now.Add(-2 * time.Minute)}}
}

// TestStatusRefused is issue 23 item 1: `sqm status` shows a section the
// last start or daemon pass refused, with why and where, in text and in
// JSON (a new key; the schema's other keys are unchanged), also when
// nothing is shaped, and only for a named interface when some are named.
func TestStatusRefused(t *testing.T) {
	k, states, now := statusFixture()
	for _, tt := range []struct {
		name   string
		states []*service.State
		ifaces []string
		want   bool
	}{{"with shaped devices", states, nil, true}, {"nothing shaped", nil, nil, true},
		{"its interface named", states, []string{"wwan0"}, true}, {"another interface named", states, []string{"eth1"}, false}} {
		t.Run(tt.name, func(t *testing.T) {
			rep := statusReport(k, tt.states, nil, tt.ifaces, now, nil)
			rep.withRefused(fixtureRefused(now), tt.ifaces)
			var b bytes.Buffer
			printStatus(&b, rep, "/run/sqm", now)
			text := b.String()
			const head = `REFUSED: section "lte" (/etc/config/sqm:20, wwan0), refused 2026-11-29 23:43:04 UTC (2m0s ago): not started; its interface keeps what it had`
			if got := strings.Contains(text, head) && strings.Contains(text, "\n  /etc/config/sqm:23: queue \"lte\" option download"); got != tt.want {
				t.Errorf("text shows the refusal: %v, want %v:\n%s", got, tt.want, text)
			}
			j, _ := json.Marshal(statusJSON(rep, "/run/sqm"))
			const key = `"refused":[{"section":"lte","source":"/etc/config/sqm","section_pos":"/etc/config/sqm:20","interface":"wwan0","errors":["/etc/config/sqm:23:`
			if got := strings.Contains(string(j), key); got != tt.want {
				t.Errorf("JSON has the refusal: %v, want %v: %s", got, tt.want, j)
			}
			if !tt.want && strings.Contains(string(j), `"refused"`) {
				t.Errorf("JSON has a refused key without refusals: %s", j)
			}
		})
	}
}

func TestHumanBytes(t *testing.T) {
	tests := []struct {
		in   uint64
		want string
	}{{0, "0"}, {999, "999"}, {1000, "1.0k"}, {1514, "1.5k"}, {5600000, "5.6M"}, {123456789012, "123.5G"}}
	for _, tt := range tests {
		if got := humanBytes(tt.in); got != tt.want {
			t.Errorf("humanBytes(%d) = %q; want %q", tt.in, got, tt.want)
		}
	}
}

// golden compares got with testdata/name, which -update rewrites.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if updateGolden() {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if !bytes.Equal(want, got) {
		t.Errorf("output differs from %s (-update rewrites it):\n got:\n%s\nwant:\n%s", path, got, want)
	}
}

// TestStatusJSON pins `sqm status --json`'s documented layout: snake_case
// keys, targets as text, the applied plan once. (It printed service.State
// as it was: PascalCase config fields, an integer TargetMode, and the
// plan both in State.Plan and State.Owned.Plan.)
func TestStatusJSON(t *testing.T) {
	k, states, now := statusFixture()
	rep := statusReport(k, states, nil, append(service.Interfaces(states), "eth2"), now, nil)
	rep.withRefused(fixtureRefused(now), nil)
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetIndent("", "  ")
	if err := enc.Encode(statusJSON(rep, "/run/sqm")); err != nil {
		t.Fatal(err)
	}
	golden(t, "status.json.golden", b.Bytes())
	// The golden file was first written by encoding/json; hold both the
	// writing and the reading of the document to it.
	if err := jsontest.Marshal(statusJSON(rep, "/run/sqm")); err != nil {
		t.Error(err)
	}
	if err := jsontest.Unmarshal(b.Bytes(), func() any { return new(statusDoc) }); err != nil {
		t.Error(err)
	}
	// Every key, at any depth, is snake_case, and the plan appears once.
	var walk func(v any)
	plans := 0
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			for key, x := range v {
				if key != strings.ToLower(key) || strings.ContainsAny(key, " -") {
					t.Errorf("key %q is not snake_case", key)
				}
				if key == "plan" {
					plans++
				}
				walk(x)
			}
		case []any:
			for _, x := range v {
				walk(x)
			}
		}
	}
	var doc any
	if err := json.Unmarshal(b.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	walk(doc)
	if plans != 1 {
		t.Errorf("%d plans in the JSON; want 1 (eth1's)", plans)
	}
}

// TestStatusHelpExample: the example in 'sqm help status' is what
// printStatus prints for that tree (it once showed cake at 8001:, a handle
// sqm never uses, under a header the command never printed).
func TestStatusHelpExample(t *testing.T) {
	help := cmdStatus().help
	i := strings.Index(help, "  $ sqm status eth1\n")
	if i < 0 {
		t.Fatal("help has no 'sqm status eth1' example")
	}
	var example []string
	for _, l := range strings.Split(help[i:], "\n")[1:] {
		if strings.TrimSpace(l) == "..." {
			break
		}
		example = append(example, strings.TrimPrefix(l, "  "))
	}
	applied := time.Date(2026, 11, 29, 23, 40, 1, 0, time.UTC)
	wan := config.Defaults()
	wan.Name, wan.Interface, wan.Enabled, wan.Download, wan.Upload = "wan", "eth1", true, 85000, 10000
	wan.LinkLayer, wan.Overhead = "ethernet", 34
	k := fakeStatus{
		"eth1": {Device: "eth1", Ifindex: 2, Filters: 1, Qdiscs: []kernel.QdiscStatus{
			{Kind: "cake", Handle: plan.MakeHandle(1, 0), Parent: plan.HandleRoot,
				Counters: kernel.Counters{Bytes: 1.2e9, Packets: 901234, Drops: 1021, BacklogBytes: 1514, BacklogPackets: 1, ECNMarks: 311},
				Cake:     &kernel.CakeStats{Tins: []kernel.CakeTin{{ThresholdRate: 1250000}}}},
			{Kind: "ingress", Handle: plan.MakeHandle(0xffff, 0), Parent: plan.HandleIngress, Counters: kernel.Counters{Bytes: 9.8e9, Packets: 7012345}},
		}},
	}
	st := &service.State{Interface: "eth1", Source: "/etc/config/sqm", Section: "wan", SectionPos: "/etc/config/sqm:3",
		AppliedAt: applied, Queue: wan}
	var b bytes.Buffer
	printStatus(&b, statusReport(matchingStatus{k}, []*service.State{st}, nil, []string{"eth1"}, applied, nil), "/run/sqm", applied.Add(5*time.Minute+3*time.Second))
	got := strings.Split(b.String(), "\n")
	if len(got) < len(example) {
		t.Fatalf("output shorter than the example:\n%s", b.String())
	}
	for j, want := range example {
		if got[j] != want {
			t.Errorf("help example line %d:\n help: %q\n real: %q", j+1, want, got[j])
		}
	}
}

// matchingStatus is a fakeStatus whose trees all match their plans.
type matchingStatus struct{ fakeStatus }

func (matchingStatus) Matches(*plan.Plan) (bool, string, error) { return true, "", nil }

// rateStatus holds eth1's upload tree at kbit: a plan matches only at
// that rate.
type rateStatus struct {
	fakeStatus
	kbit uint64
}

func (r rateStatus) Matches(p *plan.Plan) (bool, string, error) {
	if p.Egress != nil && p.Egress.RateKbit == r.kbit {
		return true, "", nil
	}
	return false, fmt.Sprintf("egress root: cake bandwidth: want %dkbit, have %dkbit", p.Egress.RateKbit, r.kbit), nil
}

func (r rateStatus) ShaperRate(dev string) (uint64, error) {
	if dev != "eth1" {
		return 0, fmt.Errorf("no link %s", dev)
	}
	return r.kbit * 1000, nil
}

// TestStatusAutorate: a queue the daemon autorates shows its rates,
// delay, load and last change's reason, and the tree at autorate's rate
// is not drift (it is when no daemon says so).
func TestStatusAutorate(t *testing.T) {
	now := time.Date(2026, 12, 2, 5, 0, 0, 0, time.UTC)
	q := config.Defaults()
	q.Name, q.Interface, q.Enabled, q.Download, q.Upload = "wan", "eth1", true, 0, 10000
	q.Autorate.Enabled = true
	st := &service.State{Interface: "eth1", Source: "/etc/config/sqm", Section: "wan", AppliedAt: now.Add(-time.Minute), Queue: q}
	k := rateStatus{fakeStatus{"eth1": {Device: "eth1", Ifindex: 2, Qdiscs: []kernel.QdiscStatus{{Kind: "cake", Handle: plan.MakeHandle(1, 0), Parent: plan.HandleRoot}}}}, 15000}
	store := &service.Store{Dir: t.TempDir()}

	rep := statusReport(k, []*service.State{st}, nil, nil, now, store)
	if d := rep.Devices[0].Drift; d == "" {
		t.Errorf("no autorate status, the tree at 15000 kbit/s: want drift against the base plan, got none")
	}
	var b bytes.Buffer
	printStatus(&b, rep, store.Dir, now)
	if !strings.Contains(b.String(), "autorate: not running (no daemon runs it): shaped at the base rates") {
		t.Errorf("without a status file:\n%s", b.String())
	}

	ar := service.AutorateStatus{Interface: "eth1", Section: "wan", PID: 42, UpdatedAt: now.Add(-300 * time.Millisecond), Running: true, RateChanges: 7,
		Upload: &service.AutorateDir{RateKbit: 15000, BaseKbit: 10000, MinKbit: 2500, MaxKbit: 20000, Load: 0.93, DelayMs: 2.5, TargetMs: 15,
			Reason: "increase", LastChange: "increase", LastChangeAgoS: 0.2, Decisions: map[string]uint64{"increase": 5, "hold": 3}},
		Reflectors: []service.AutorateReflector{{Target: "udp-sqm 9.9.9.9:12866", OneWay: true, Replied: true, RiseMs: [2]float64{0.5, 2.5}}}}
	js, err := json.Marshal(ar)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(store.Dir, "eth1.autorate.json"), js, 0o600); err != nil {
		t.Fatal(err)
	}
	rep = statusReport(k, []*service.State{st}, nil, nil, now, store)
	if d := rep.Devices[0].Drift; d != "" {
		t.Errorf("the tree at autorate's 15000 kbit/s reported as drift: %s", d)
	}
	// The file is written once a second: the kernel's rate, not the
	// file's, is what the tree is compared at, within autorate's range.
	for _, tt := range []struct {
		kbit uint64
		want string
	}{
		{12000, ""},
		{20000, ""},
		{2500, ""},
		{25000, "eth1: upload rate 25000 kbit/s is outside autorate's 2500..20000"},
		{2000, "eth1: upload rate 2000 kbit/s is outside autorate's 2500..20000"},
		{0, "egress root: cake bandwidth: want 10000kbit, have 0kbit"}, // no shaper: Matches's own words
	} {
		k := rateStatus{k.fakeStatus, tt.kbit}
		if d := statusReport(k, []*service.State{st}, nil, nil, now, store).Devices[0].Drift; d != tt.want {
			t.Errorf("the kernel at %d kbit/s, the file at 15000: drift %q, want %q", tt.kbit, d, tt.want)
		}
	}
	b.Reset()
	printStatus(&b, rep, store.Dir, now)
	for _, want := range []string{
		"autorate: running (daemon pid 42, 7 rate changes, updated 300ms ago)",
		"upload    15000 kbit/s (2500..20000, base 10000), delay +2.5 ms (target 15), load 93%, increase; last change: increase, 0.2s ago",
		"reflector udp-sqm 9.9.9.9:12866: one-way +0.5 ms down, +2.5 ms up",
		"tree as applied",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("status lacks %q:\n%s", want, b.String())
		}
	}
	rep.Devices[0].Autorate.Idle = true
	b.Reset()
	printStatus(&b, rep, store.Dir, now)
	if !strings.Contains(b.String(), "autorate: idle, probing slowly (daemon pid 42, 7 rate changes, updated 300ms ago)") {
		t.Errorf("an idle link's status:\n%s", b.String())
	}
	rep.Devices[0].Autorate.Idle = false
	b.Reset()
	printStatus(&b, rep, store.Dir, now.Add(time.Minute))
	if !strings.Contains(b.String(), "autorate: STALE: daemon pid 42 last updated it 1m0s ago") {
		t.Errorf("a minute-old status file not called stale:\n%s", b.String())
	}
	doc := statusJSON(rep, store.Dir)
	out, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"autorate":{"interface":"eth1"`, `"rate_kbit":15000`, `"last_change":"increase"`, `"decisions":{"hold":3,"increase":5}`, `"tree_matches":true`} {
		if !strings.Contains(string(out), want) {
			t.Errorf("status --json lacks %s:\n%s", want, out)
		}
	}
}

// TestAutorateStale: the status file is stale once not rewritten within
// twice its writing interval and 3 s more (never within 5 s): an idle
// link's file, rewritten every 10 s, is fresh at 20 s and stale at 24.
func TestAutorateStale(t *testing.T) {
	now := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	for _, tt := range []struct {
		every float64 // WriteEveryS
		age   time.Duration
		stale bool
	}{
		{0, 4 * time.Second, false}, {0, 6 * time.Second, true}, // files from before WriteEveryS
		{1, 4900 * time.Millisecond, false}, {1, 5100 * time.Millisecond, true},
		{10, 20 * time.Second, false}, {10, 24 * time.Second, true},
	} {
		a := &service.AutorateStatus{UpdatedAt: now.Add(-tt.age), WriteEveryS: tt.every}
		if got := autorateStale(a, now); got != tt.stale {
			t.Errorf("written every %vs, %v old: stale %v, want %v", tt.every, tt.age, got, tt.stale)
		}
	}
}
