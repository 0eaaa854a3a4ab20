package service

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"sqm/internal/config"
	"sqm/internal/json"
	"sqm/internal/plan"
)

func TestStoreRoundTrip(t *testing.T) {
	s := &Store{Dir: filepath.Join(t.TempDir(), "run", "sqm")}
	q := queue("wan", "eth0", 1000, 2000)
	applied, err := plan.Build(&q, plan.Env{MTU: 1500})
	if err != nil {
		t.Fatal(err)
	}
	// Owned carries the applied plan: the kernel rebuilds it if a later
	// apply fails half-way, so it must survive the file.
	st := &State{Interface: "eth0", Source: "/etc/config/sqm", Section: "wan", Queue: q,
		Plan: []byte(`{"interface":"eth0"}`), Owned: Owned{Interface: "eth0", Ifindex: 3, EgressRoot: true, EgressHandle: 0x10000, IFB: "ifb4eth0", Plan: applied}}
	if err := s.Save(st); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(s.Dir)
	if err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("state dir mode = %v, %v; want 0700", fi.Mode().Perm(), err)
	}
	got, err := s.Load("eth0")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got.Owned, st.Owned) || got.Section != "wan" || !samePlan(got.Plan, st.Plan) || got.Queue.Download != 1000 {
		t.Errorf("round trip: got %+v, want %+v", got, st)
	}
	ents, _ := os.ReadDir(s.Dir)
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), ".tmp") {
			t.Errorf("temporary file %s left behind", e.Name())
		}
	}
	if none, err := s.Load("eth1"); none != nil || err != nil {
		t.Errorf("Load(eth1) = %v, %v; want nil, nil", none, err)
	}
	if err := s.Delete("eth0"); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete("eth0"); err != nil {
		t.Errorf("second Delete: %v; want nil (idempotent)", err)
	}
}

func TestStoreRejects(t *testing.T) {
	s := &Store{Dir: t.TempDir()}
	tests := []struct {
		name, file, content, wantErr string
	}{
		{"corrupt", "eth0.state.json", "{", "corrupt"},
		{"version", "eth1.state.json", `{"version":99}`, "version 99"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			os.WriteFile(filepath.Join(s.Dir, tt.file), []byte(tt.content), 0o600)
			_, err := s.Load(strings.TrimSuffix(tt.file, ".state.json"))
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("err = %v; want it to mention %q", err, tt.wantErr)
			}
		})
	}
	for _, bad := range []string{"", "../x", "a/b", "averyveryverylongname", "eth0:1"} {
		if _, err := s.Load(bad); err == nil {
			t.Errorf("Load(%q): no error; want invalid name", bad)
		}
	}
	if err := os.Chmod(s.Dir, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := s.Save(&State{Interface: "eth0"}); err == nil || !strings.Contains(err.Error(), "writable by every user") {
		t.Errorf("Save into a world-writable dir: %v; want refusal", err)
	}
}

func TestLock(t *testing.T) {
	dir := t.TempDir()
	l1, err := AcquireLock(dir, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err = AcquireLock(dir, 200*time.Millisecond)
	if err == nil {
		t.Fatal("second lock acquired while the first is held")
	}
	if waited := time.Since(start); waited < 200*time.Millisecond {
		t.Errorf("gave up after %v; want it to wait 200ms", waited)
	}
	if want := "pid " + strconv.Itoa(os.Getpid()); !strings.Contains(err.Error(), want) {
		t.Errorf("err = %v; want it to name the holder (%s)", err, want)
	}
	done := make(chan error)
	go func() {
		l, err := AcquireLock(dir, 5*time.Second)
		if err == nil {
			l.Release()
		}
		done <- err
	}()
	time.Sleep(100 * time.Millisecond)
	l1.Release()
	if err := <-done; err != nil {
		t.Errorf("waiter did not get the lock after release: %v", err)
	}
}

func TestPrepare(t *testing.T) {
	disabled := queue("off", "eth9", 1000, 1000)
	disabled.Enabled = false
	broken := queue("bad", "eth0", 1000, 1000)
	broken.Script = "broken"
	tests := []struct {
		name         string
		queues       []config.Queue
		opts         PrepareOptions
		wantTargets  []string
		wantWaiting  []string
		wantSkipped  []string // "section@interface"
		wantRefused  []string // "section@interface: error part"
		wantErrParts []string
	}{
		{name: "two sections", queues: []config.Queue{queue("wan", "eth0", 1000, 500), queue("lte", "wwan0", 2000, 500)},
			wantTargets: []string{"eth0", "wwan0"}},
		{name: "disabled skipped", queues: []config.Queue{queue("wan", "eth0", 1000, 500), disabled},
			wantTargets: []string{"eth0"}},
		{name: "missing interface is an error", queues: []config.Queue{queue("wan", "ppp0", 1000, 500)},
			wantErrParts: []string{"/etc/config/sqm:1", "ppp0 does not exist", "sqm daemon"}},
		{name: "missing interface waits for the daemon", queues: []config.Queue{queue("wan", "ppp0", 1000, 500), queue("lan", "eth0", 1, 1)},
			opts: PrepareOptions{AllowMissing: true}, wantTargets: []string{"eth0"}, wantWaiting: []string{"ppp0"}},
		{name: "waiting section is still checked", queues: []config.Queue{func() config.Queue { q := queue("wan", "ppp0", 1, 1); q.Script = "broken"; return q }(), queue("lan", "eth0", 1, 1)},
			opts: PrepareOptions{AllowMissing: true}, wantTargets: []string{"eth0"}, wantRefused: []string{`wan@ppp0: /etc/config/sqm:1: queue "wan" option script: no such script "broken"`}},
		{name: "waiting sections collide too", queues: []config.Queue{queue("a", "verylongname1", 1, 1), queue("b", "verylongname9", 2, 2)},
			opts: PrepareOptions{AllowMissing: true}, wantErrParts: []string{"ifb4verylongnam"}},
		// Issue 10 item 6: the first enabled section wins, as config
		// warns and the docs say; the rest still start.
		{name: "same interface twice: first enabled wins", queues: []config.Queue{disabledOn("z", "eth0"), queue("a", "eth0", 1, 1), queue("b", "eth0", 2, 2), queue("lte", "wwan0", 1, 1)},
			wantTargets: []string{"eth0", "wwan0"}, wantSkipped: []string{"b@eth0"}},
		{name: "skipped section of another interface is not reported", queues: []config.Queue{queue("a", "eth0", 1, 1), queue("b", "eth0", 2, 2), queue("lte", "wwan0", 1, 1)},
			opts: PrepareOptions{Ifaces: []string{"wwan0"}}, wantTargets: []string{"wwan0"}},
		{name: "IFB name collision", queues: []config.Queue{queue("a", "verylongname1", 1, 1), queue("b", "verylongname2", 2, 2)},
			wantErrParts: []string{`queue "a" (interface verylongname1) and queue "b" (interface verylongname2) both need IFB ifb4verylongnam`}},
		// Issue 23 item 1: a section the planner refuses is set aside,
		// with its position; the others still start.
		{name: "planner error refuses only its section", queues: []config.Queue{broken, queue("lte", "wwan0", 1, 1)},
			wantTargets: []string{"wwan0"}, wantRefused: []string{`bad@eth0: /etc/config/sqm:1: queue "bad" option script: no such script "broken"`}},
		{name: "config refusals are passed through", queues: []config.Queue{queue("lte", "wwan0", 1, 1)},
			opts:        PrepareOptions{Refused: []*config.SectionError{{Section: "x", Interface: "eth0", Errs: []error{errors.New("f:3: bad")}}}},
			wantTargets: []string{"wwan0"}, wantRefused: []string{"x@eth0: f:3: bad"}},
		{name: "a refused section of another interface is not selected", queues: []config.Queue{queue("lte", "wwan0", 1, 1)},
			opts:        PrepareOptions{Ifaces: []string{"wwan0"}, Refused: []*config.SectionError{{Section: "x", Interface: "eth0", Errs: []error{errors.New("f:3: bad")}}}},
			wantTargets: []string{"wwan0"}},
		{name: "all errors at once", queues: []config.Queue{queue("wan", "ppp0", 1, 1), broken},
			wantErrParts: []string{"ppp0 does not exist", "no such script"}},
		{name: "filter by interface", queues: []config.Queue{queue("wan", "eth0", 1, 1), queue("lte", "wwan0", 1, 1)},
			opts: PrepareOptions{Ifaces: []string{"wwan0"}}, wantTargets: []string{"wwan0"}},
		{name: "interface without section", queues: []config.Queue{queue("wan", "eth0", 1, 1)},
			opts: PrepareOptions{Ifaces: []string{"eth7"}}, wantErrParts: []string{"no enabled queue section for interface eth7"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			k := newFake("eth0", "wwan0", "eth9", "verylongname1", "verylongname2")
			s, _ := newService(t, k)
			p, err := s.Prepare(tt.queues, "/etc/config/sqm", tt.opts)
			if len(tt.wantErrParts) > 0 {
				if err == nil {
					t.Fatalf("no error; want one mentioning %q", tt.wantErrParts)
				}
				for _, part := range tt.wantErrParts {
					if !strings.Contains(err.Error(), part) {
						t.Errorf("err = %v\nwant it to mention %q", err, part)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got, waiting []string
			for _, tg := range p.Targets {
				got = append(got, tg.Queue.Interface)
			}
			for _, q := range p.Waiting {
				waiting = append(waiting, q.Interface)
			}
			if strings.Join(got, ",") != strings.Join(tt.wantTargets, ",") || strings.Join(waiting, ",") != strings.Join(tt.wantWaiting, ",") {
				t.Errorf("targets %v waiting %v; want %v, %v", got, waiting, tt.wantTargets, tt.wantWaiting)
			}
			// One link lookup (a netlink round trip) per section:
			// its MTU, or that it is missing.
			planned := 0 // sections the planner refused were looked up too
			for _, r := range p.Refused {
				for _, q := range tt.queues {
					if q.Name == r.Section {
						planned++
					}
				}
			}
			if want := len(tt.wantTargets) + len(tt.wantWaiting) + planned; k.lookups != want {
				t.Errorf("%d link lookups for %d sections; want one each", k.lookups, want)
			}
			var skipped []string
			for _, o := range p.Skipped {
				skipped = append(skipped, o.Section+"@"+o.Interface)
				if o.Action != ActSkipped || !strings.Contains(o.Detail, `already shaped by queue "a"`) {
					t.Errorf("skipped outcome %v does not name the section that won", o)
				}
			}
			if strings.Join(skipped, ",") != strings.Join(tt.wantSkipped, ",") {
				t.Errorf("skipped %v, want %v", skipped, tt.wantSkipped)
			}
			for _, tg := range p.Targets {
				if tg.Queue.Interface == "eth0" && tt.wantSkipped != nil && tg.Queue.Name != "a" {
					t.Errorf("eth0 planned from section %q, want the first enabled one, a", tg.Queue.Name)
				}
			}
			var refused []string
			for _, r := range p.Refused {
				refused = append(refused, r.Section+"@"+r.Interface+": "+r.Error())
			}
			if len(refused) != len(tt.wantRefused) {
				t.Errorf("refused %q, want %q", refused, tt.wantRefused)
			}
			for i := range refused {
				if i < len(tt.wantRefused) && !strings.Contains(refused[i], tt.wantRefused[i]) {
					t.Errorf("refused %q, want %q", refused[i], tt.wantRefused[i])
				}
			}
			if len(k.trees) != 0 {
				t.Errorf("Prepare changed the kernel: %v", k.trees)
			}
		})
	}
}

func disabledOn(name, iface string) config.Queue {
	q := queue(name, iface, 1, 1)
	q.Enabled = false
	return q
}

func actions(outs []Outcome) string {
	var s []string
	for _, o := range outs {
		s = append(s, o.Interface+"="+string(o.Action))
	}
	return strings.Join(s, " ")
}

func TestStartIdempotentAndChanged(t *testing.T) {
	k := newFake("eth0", "eth1")
	s, _ := newService(t, k)
	qs := []config.Queue{queue("wan", "eth0", 20000, 5000), queue("lan", "eth1", 1000, 1000)}
	steps := []struct {
		name    string
		mutate  func()
		want    string
		applies int // on eth0 after the step
	}{
		{"first start", func() {}, "eth0=applied eth1=applied", 1},
		{"again: nothing to do", func() {}, "eth0=unchanged eth1=unchanged", 1},
		{"changed rate re-applies only that one", func() { qs[0].Upload = 6000 }, "eth0=applied eth1=unchanged", 2},
		{"tree removed behind our back is rebuilt", func() { k.tamper("eth0") }, "eth0=applied eth1=unchanged", 3},
	}
	for _, st := range steps {
		st.mutate()
		outs, err := s.Start(qs, "/etc/config/sqm", PrepareOptions{}, false)
		if err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
		if got := actions(outs); got != st.want {
			t.Errorf("%s: outcomes %q; want %q", st.name, got, st.want)
		}
		if n := k.count(k.applies, "eth0"); n != st.applies {
			t.Errorf("%s: %d applies on eth0; want %d", st.name, n, st.applies)
		}
		if st.name == "changed rate re-applies only that one" {
			// The kernel was handed the plan applied before (read back from
			// the state file), to rebuild if the new one fails half-way.
			k.mu.Lock()
			prev := k.prevPlans["eth0"]
			k.mu.Unlock()
			if prev == nil || prev.Egress == nil || prev.Egress.RateKbit != 5000 {
				t.Errorf("%s: previous plan given to Apply = %+v; want the 5000 kbit egress plan", st.name, prev)
			}
		}
	}
	state, _ := s.Store.Load("eth0")
	if state == nil || state.Queue.Upload != 6000 || state.Owned.IFB != "ifb4eth0" || state.Source != "/etc/config/sqm" {
		t.Errorf("state after re-apply: %+v", state)
	}
}

func TestStartFailureRollsBack(t *testing.T) {
	k := newFake("eth0", "eth1")
	s, _ := newService(t, k)
	qs := []config.Queue{queue("wan", "eth0", 20000, 5000), queue("lan", "eth1", 1000, 1000)}
	if _, err := s.Start(qs[:1], "/etc/config/sqm", PrepareOptions{}, false); err != nil {
		t.Fatal(err)
	}
	before := k.trees["eth0"]
	k.failApply["eth1"] = errors.New("kernel says no")
	qs[0].Upload = 9000 // eth0 changes, then eth1 fails
	_, err := s.Start(qs, "/etc/config/sqm", PrepareOptions{}, false)
	if err == nil || !strings.Contains(err.Error(), `apply queue "lan" on eth1: kernel says no`) {
		t.Fatalf("err = %v; want the eth1 failure", err)
	}
	if k.trees["eth0"] != before {
		t.Errorf("eth0 not rolled back:\n got %s\nwant %s", k.trees["eth0"], before)
	}
	if _, ok := k.trees["eth1"]; ok {
		t.Error("eth1 has a tree after a failed apply")
	}
	if st, _ := s.Store.Load("eth0"); st == nil || st.Queue.Upload != 5000 {
		t.Errorf("eth0 state after rollback: %+v; want the old upload 5000", st)
	}
	if st, _ := s.Store.Load("eth1"); st != nil {
		t.Errorf("eth1 has state after a failed apply: %+v", st)
	}
}

func TestInterruptedApplyForces(t *testing.T) {
	k := newFake("eth0")
	s, lb := newService(t, k)
	q := queue("wan", "eth0", 20000, 5000)
	// An sqm died after marking and after half-building: the kernel has
	// something (its IFB too), no state describes it.
	if err := s.Store.markPending("eth0", "", []byte(`{}`), time.Now(), "ifb4eth0"); err != nil {
		t.Fatal(err)
	}
	k.trees["eth0"] = "half a tree"
	k.ifbs["ifb4eth0"] = true
	outs, err := s.Start([]config.Queue{q}, "/etc/config/sqm", PrepareOptions{}, false)
	if err != nil {
		t.Fatal(err)
	}
	if actions(outs) != "eth0=applied" || k.count(k.forced, "eth0") != 1 {
		t.Errorf("outcomes %q, forced %d; want applied with force", actions(outs), k.forced["eth0"])
	}
	if !strings.Contains(lb.String(), "interrupted") {
		t.Errorf("log does not mention the interrupted apply:\n%s", lb)
	}
	if got := k.prevIFBs["eth0"]; got != "ifb4eth0" {
		t.Errorf("the kernel was handed previous IFB %q; want ifb4eth0, which the interrupted apply created", got)
	}
	if s.Store.interrupted("eth0") != nil {
		t.Error("pending marker left after a successful apply")
	}
	// A recovery that fails keeps the record of what the interrupted
	// apply left, IFB claim included, for the next start or stop.
	k3 := newFake("eth0")
	s3, _ := newService(t, k3)
	if err := s3.Store.markPending("eth0", "", []byte(`{}`), time.Now(), "ifb4eth0"); err != nil {
		t.Fatal(err)
	}
	k3.trees["eth0"], k3.ifbs["ifb4eth0"] = "half a tree", true
	k3.failApply["eth0"] = errors.New("kernel says no")
	if _, err := s3.Start([]config.Queue{q}, "x", PrepareOptions{}, false); err == nil {
		t.Fatal("failing recovery reported success")
	}
	if p := s3.Store.interrupted("eth0"); p == nil || p.IFB != "ifb4eth0" {
		t.Fatalf("record after a failed recovery: %+v; want it kept with the IFB claim", p)
	}
	if outs, err := s3.Stop(StopOptions{}); err != nil || actions(outs) != "eth0=removed" || k3.ifbs["ifb4eth0"] {
		t.Errorf("stop after a failed recovery: %q, %v, IFB left %v", actions(outs), err, k3.ifbs["ifb4eth0"])
	}
	// Without a marker, a foreign tree is refused unless forced.
	k2 := newFake("eth0")
	s2, _ := newService(t, k2)
	k2.trees["eth0"] = "foreign"
	if _, err := s2.Start([]config.Queue{q}, "x", PrepareOptions{}, false); !errors.Is(err, errFakeForeign) {
		t.Errorf("err = %v; want the kernel's foreign-qdisc error passed through", err)
	}
	if _, err := s2.Start([]config.Queue{q}, "x", PrepareOptions{}, true); err != nil {
		t.Errorf("--force: %v", err)
	}
}

// TestStopInterruptedFirstApply: a first apply killed before it saved a
// state leaves only its pending record. Stop removes what that record
// proves sqm was building (the planned qdiscs by handle, the IFB it
// claimed) and forgets the record; a stop for another config file leaves
// it; a record without a readable plan is reported, not guessed at.
func TestStopInterruptedFirstApply(t *testing.T) {
	k := newFake("eth0")
	s, _ := newService(t, k)
	if _, err := s.Start([]config.Queue{queue("wan", "eth0", 20000, 5000)}, "/etc/config/sqm", PrepareOptions{}, false); err != nil {
		t.Fatal(err)
	}
	st, _ := s.Store.Load("eth0")
	kill := func(planJSON []byte) {
		t.Helper()
		if err := s.Store.Delete("eth0"); err != nil {
			t.Fatal(err)
		}
		if err := s.Store.markPending("eth0", "/etc/config/sqm", planJSON, time.Now(), "ifb4eth0"); err != nil {
			t.Fatal(err)
		}
		k.trees["eth0"], k.ifbs["ifb4eth0"] = "half a tree", true
	}
	kill(st.Plan)
	if outs, err := s.Stop(StopOptions{Source: "/etc/config/other"}); err != nil || len(outs) != 0 || k.count(k.removes, "eth0") != 0 {
		t.Fatalf("stop for another file: outcomes %q, err %v, removes %d; want nothing touched", actions(outs), err, k.count(k.removes, "eth0"))
	}
	outs, err := s.Stop(StopOptions{})
	if err != nil || actions(outs) != "eth0=removed" {
		t.Fatalf("outcomes %q, err %v; want eth0 removed", actions(outs), err)
	}
	o := k.removed["eth0"]
	if !o.Ingress || o.IFB != "ifb4eth0" || o.Plan != nil {
		t.Errorf("removed %+v; want the planned ingress, the claimed IFB, no plan to match (kernel.Interrupted)", o)
	}
	if k.trees["eth0"] != "" || k.ifbs["ifb4eth0"] || s.Store.interrupted("eth0") != nil {
		t.Error("tree, IFB or pending record left after stop")
	}
	// Named explicitly, the same.
	kill(st.Plan)
	if outs, err := s.Stop(StopOptions{Ifaces: []string{"eth0"}}); err != nil || actions(outs) != "eth0=removed" {
		t.Errorf("stop eth0: outcomes %q, err %v", actions(outs), err)
	}
	// A record whose plan cannot be read: said, with the file to check.
	kill([]byte(`{"interface": 5}`))
	if _, err := s.Stop(StopOptions{}); err == nil || !strings.Contains(err.Error(), "eth0.pending.json") {
		t.Errorf("err = %v; want one naming the pending record", err)
	}
	if s.Store.interrupted("eth0") == nil {
		t.Error("unreadable record deleted")
	}
}

func TestStop(t *testing.T) {
	k := newFake("eth0", "eth1")
	s, _ := newService(t, k)
	qs := []config.Queue{queue("wan", "eth0", 20000, 5000), queue("lan", "eth1", 1000, 1000)}
	if _, err := s.Start(qs, "/etc/config/sqm", PrepareOptions{}, false); err != nil {
		t.Fatal(err)
	}
	outs, err := s.Stop(StopOptions{Ifaces: []string{"eth1", "eth5"}})
	if err != nil {
		t.Fatal(err)
	}
	if got := actions(outs); got != "eth5=not-shaped eth1=removed" {
		t.Errorf("outcomes %q", got)
	}
	if _, ok := k.trees["eth1"]; ok || k.ifbs["ifb4eth1"] {
		t.Error("eth1 tree or IFB left after stop")
	}
	if _, ok := k.trees["eth0"]; !ok {
		t.Error("stop eth1 removed eth0's tree")
	}
	outs, err = s.Stop(StopOptions{})
	if err != nil || actions(outs) != "eth0=removed" {
		t.Errorf("stop all: %q, %v", actions(outs), err)
	}
	if all, _ := s.Store.All(); len(all) != 0 {
		t.Errorf("state left: %v", Interfaces(all))
	}
}

func TestReloadRemovesDroppedSections(t *testing.T) {
	k := newFake("eth0", "eth1", "eth2")
	s, _ := newService(t, k)
	qs := []config.Queue{queue("wan", "eth0", 20000, 5000), queue("lan", "eth1", 1000, 1000)}
	if _, err := s.Start(qs, "/etc/config/sqm", PrepareOptions{}, false); err != nil {
		t.Fatal(err)
	}
	// `sqm apply` on eth2 is not the config's business.
	cli := queue("cli", "eth2", 1, 1)
	if _, err := s.Start([]config.Queue{cli}, SourceCLI, PrepareOptions{}, false); err != nil {
		t.Fatal(err)
	}
	qs[1].Enabled = false
	outs, err := s.Reload(qs, "/etc/config/sqm", PrepareOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := actions(outs); got != "eth1=removed eth0=unchanged" {
		t.Errorf("outcomes %q", got)
	}
	if _, ok := k.trees["eth2"]; !ok {
		t.Error("reload removed the cli-applied eth2")
	}
	if k.count(k.applies, "eth0") != 1 {
		t.Error("reload re-applied an unchanged section")
	}
}

func TestCleanStale(t *testing.T) {
	k := newFake("eth0", "ppp0")
	s, _ := newService(t, k)
	qs := []config.Queue{queue("wan", "ppp0", 20000, 5000), queue("lan", "eth0", 1, 1)}
	if _, err := s.Start(qs, "/etc/config/sqm", PrepareOptions{}, false); err != nil {
		t.Fatal(err)
	}
	k.setLink("ppp0", false) // the IFB outlives it
	outs, err := s.CleanStale()
	if err != nil || actions(outs) != "ppp0=stale" {
		t.Fatalf("outcomes %q, %v", actions(outs), err)
	}
	if k.ifbs["ifb4ppp0"] {
		t.Error("IFB of the vanished interface not removed")
	}
	if st, _ := s.Store.Load("ppp0"); st != nil {
		t.Error("stale state kept")
	}
	if st, _ := s.Store.Load("eth0"); st == nil {
		t.Error("live state removed")
	}
}

func TestIndependentApply(t *testing.T) {
	k := newFake("eth0", "eth1", "eth2")
	s, _ := newService(t, k)
	s.Independent = true
	k.failApply["eth1"] = errors.New("kernel says no")
	qs := []config.Queue{queue("a", "eth0", 1, 1), queue("b", "eth1", 1, 1), queue("c", "eth2", 1, 1)}
	outs, err := s.Start(qs, "x", PrepareOptions{}, false)
	if err == nil || !strings.Contains(err.Error(), `queue "b" on eth1`) {
		t.Errorf("err = %v; want the eth1 failure", err)
	}
	if got := actions(outs); got != "eth0=applied eth2=applied" {
		t.Errorf("outcomes %q; want the other sections applied", got)
	}
}

// TestStartTwoSectionsOnOneInterface: config warns that only the first
// enabled section of an interface takes effect; Start used to refuse the
// whole file instead, so nothing started (issue 10 item 6).
func TestStartTwoSectionsOnOneInterface(t *testing.T) {
	k := newFake("eth0", "eth1")
	s, _ := newService(t, k)
	qs := []config.Queue{queue("wan", "eth0", 20000, 5000), queue("wan_copy", "eth0", 1000, 1000), queue("lan", "eth1", 1000, 1000)}
	outs, err := s.Start(qs, "/etc/config/sqm", PrepareOptions{}, false)
	if err != nil {
		t.Fatal(err)
	}
	if got := actions(outs); got != "eth0=skipped eth0=applied eth1=applied" {
		t.Errorf("outcomes %q", got)
	}
	st, err := s.Store.Load("eth0")
	if err != nil || st == nil || st.Section != "wan" {
		t.Fatalf("eth0 state %+v, %v; want section wan", st, err)
	}
	// Reload with the same file changes nothing and keeps wan.
	outs, err = s.Reload(qs, "/etc/config/sqm", PrepareOptions{})
	if err != nil || actions(outs) != "eth0=skipped eth0=unchanged eth1=unchanged" {
		t.Errorf("reload: %q, %v", actions(outs), err)
	}
}

// mtuPlan is fakePlan with the MTU recorded in the plan, so a plan built
// at another MTU differs.
func mtuPlan(q *config.Queue, mtu int) (*plan.Plan, error) {
	p, err := fakePlan(q, mtu)
	if p != nil {
		p.Notes = []string{fmt.Sprintf("mtu %d", mtu)}
	}
	return p, err
}

// TestRollbackRestoresStoredPlan: undo must rebuild the tree that was
// applied (the stored plan), not re-plan the old section at today's MTU
// (issue 10 item 5).
func TestRollbackRestoresStoredPlan(t *testing.T) {
	k := newFake("eth0", "eth1")
	s, _ := newService(t, k)
	s.Plan = mtuPlan
	qs := []config.Queue{queue("wan", "eth0", 20000, 5000), queue("lan", "eth1", 1000, 1000)}
	if _, err := s.Start(qs[:1], "/etc/config/sqm", PrepareOptions{}, false); err != nil {
		t.Fatal(err)
	}
	before := k.trees["eth0"]
	k.mu.Lock()
	k.links["eth0"] = 9000 // e.g. jumbo frames enabled since
	k.mu.Unlock()
	k.failApply["eth1"] = errors.New("kernel says no")
	qs[0].Upload = 9000
	if _, err := s.Start(qs, "/etc/config/sqm", PrepareOptions{}, false); err == nil {
		t.Fatal("no error from the failing eth1")
	}
	if k.trees["eth0"] != before {
		t.Errorf("eth0 after rollback:\n got %s\nwant the applied tree %s", k.trees["eth0"], before)
	}
	if st, _ := s.Store.Load("eth0"); st == nil || !samePlan(st.Plan, json.RawMessage(before)) {
		t.Errorf("eth0 state after rollback does not record the restored plan: %+v", st)
	}
}

// TestSaveFailureRestoresPrevious: when the state cannot be saved after a
// successful apply, the new tree is removed and the previous one rebuilt
// (issue 10 item 5: it was only removed, leaving the interface unshaped).
func TestSaveFailureRestoresPrevious(t *testing.T) {
	k := newFake("eth0")
	s, _ := newService(t, k)
	q := queue("wan", "eth0", 20000, 5000)
	if _, err := s.Start([]config.Queue{q}, "/etc/config/sqm", PrepareOptions{}, false); err != nil {
		t.Fatal(err)
	}
	before := k.trees["eth0"]
	// After the kernel accepts the new tree, make the state file
	// unwritable: a non-empty directory in its place cannot be renamed over.
	k.afterApply = func(iface string) {
		k.afterApply = nil
		path := s.Store.statePath(iface)
		os.Remove(path)
		os.MkdirAll(filepath.Join(path, "block"), 0o755)
	}
	q.Upload = 9000
	_, err := s.Start([]config.Queue{q}, "/etc/config/sqm", PrepareOptions{}, false)
	if err == nil || !strings.Contains(err.Error(), "state") {
		t.Fatalf("err = %v; want the state write failure", err)
	}
	if got := k.trees["eth0"]; got != before {
		t.Errorf("eth0 after a failed state save:\n got %q\nwant the previous tree %s", got, before)
	}
}

// TestDrift: the one drift check, used by the daemon's Check and by
// `sqm status`.
func TestDrift(t *testing.T) {
	k := newFake("eth0")
	s, _ := newService(t, k)
	q := queue("wan", "eth0", 20000, 5000)
	if _, err := s.Start([]config.Queue{q}, "/etc/config/sqm", PrepareOptions{}, false); err != nil {
		t.Fatal(err)
	}
	st, err := s.Store.Load("eth0")
	if err != nil || st == nil {
		t.Fatal(st, err)
	}
	if d := Drift(k, fakePlan, st); d != "" {
		t.Errorf("fresh tree drifts: %q", d)
	}
	k.tamper("eth0")
	if d := Drift(k, fakePlan, st); !strings.Contains(d, "someone else's") {
		t.Errorf("tampered tree: drift %q", d)
	}
	if d := Drift(k, func(*config.Queue, int) (*plan.Plan, error) { return nil, errors.New("nope") }, st); d != "cannot rebuild the applied plan: nope" {
		t.Errorf("planner error: drift %q", d)
	}
	k.setLink("eth0", false)
	if d := Drift(k, fakePlan, st); !strings.Contains(d, "no link eth0") {
		t.Errorf("missing link: drift %q", d)
	}
	if drift, _ := s.Check(); drift["eth0"] != Drift(k, fakePlan, st) {
		t.Errorf("Check %q and Drift disagree", drift)
	}
}

// TestInterfaceNameOneRule: the service (stop/start arguments, state file
// names) and the config reader accept exactly the same names. The
// service's own copy let "a\vb" through, which config refuses.
func TestInterfaceNameOneRule(t *testing.T) {
	for _, n := range []string{"eth0", "", ".", "..", "a/b", "a:b", "a b", "a\tb", "a\vb", "a\fb", "a\rb", "0123456789abcdef", "0123456789abcde", "pppoe-wan"} {
		if got, want := checkIfaceName(n) == nil, config.CheckIfName(n) == nil; got != want {
			t.Errorf("%q: service accepts %v, config accepts %v", n, got, want)
		}
	}
	s, _ := newService(t, newFake())
	if _, err := s.Stop(StopOptions{Ifaces: []string{"a\vb"}}); err == nil {
		t.Error(`Stop("a\vb") accepted a name Linux does not allow`)
	}
}

// TestPendingIsUTC: the pending record is stamped in UTC, like AppliedAt,
// so writing it never loads the local zone database (a file read on the
// start path of every `sqm start`).
func TestPendingIsUTC(t *testing.T) {
	k := newFake("eth0")
	s, _ := newService(t, k)
	s.Now = func() time.Time { return time.Date(2026, 11, 29, 23, 0, 0, 0, time.FixedZone("CET", 3600)) }
	var started string
	k.afterApply = func(iface string) {
		b, err := os.ReadFile(s.Store.pendingPath(iface))
		if err != nil {
			t.Errorf("no pending record during the apply: %v", err)
			return
		}
		var p struct {
			Started string `json:"started"`
		}
		if err := json.Unmarshal(b, &p); err != nil {
			t.Errorf("pending record: %v", err)
		}
		started = p.Started
	}
	if _, err := s.Start([]config.Queue{queue("wan", "eth0", 1000, 500)}, "/etc/config/sqm", PrepareOptions{}, false); err != nil {
		t.Fatal(err)
	}
	if started != "2026-11-29T22:00:00Z" {
		t.Errorf("pending started = %q; want 2026-11-29T22:00:00Z (UTC)", started)
	}
}

// TestRefusedSectionsStandAlone is issue 23 item 1 in the service: a
// refused section does not stop the others, Start and Reload report it as
// an outcome and an error naming file:line, Reload keeps the tree its
// interface had (a typo must not unshape the WAN), status can read what
// was refused, and a run without refusals clears that record.
func TestRefusedSectionsStandAlone(t *testing.T) {
	k := newFake("eth0", "eth1")
	s, _ := newService(t, k)
	const src = "/etc/config/sqm"
	good, wan := queue("lan", "eth1", 1000, 1000), queue("wan", "eth0", 20000, 5000)
	if _, err := s.Start([]config.Queue{wan, good}, src, PrepareOptions{}, false); err != nil {
		t.Fatal(err)
	}
	wanTree := k.trees["eth0"]
	// wan gets a typo: the file now refuses it.
	bad := &config.SectionError{Section: "wan", Interface: "eth0", Pos: config.Position{File: src, Line: 7},
		Errs: []error{errors.New(src + `:9: queue "wan" option download: "85mbit" is not a number of kbit/s`)}}
	good.Download = 2000
	outs, err := s.Reload([]config.Queue{good}, src, PrepareOptions{Refused: []*config.SectionError{bad}})
	if err == nil || !strings.Contains(err.Error(), src+`:9: queue "wan" option download`) || !strings.Contains(err.Error(), `refused 1 section(s): "wan" (`+src+`:7)`) {
		t.Errorf("reload error = %v; want the refusal with file:line", err)
	}
	if got := actions(outs); got != "eth1=applied eth0=refused" {
		t.Errorf("outcomes %q, want eth1 applied and eth0 refused", got)
	}
	if k.trees["eth0"] != wanTree {
		t.Errorf("reload of a refused section changed its interface's tree: %v", k.trees["eth0"])
	}
	if st, _ := s.Store.Load("eth0"); st == nil {
		t.Error("reload forgot the state of the refused section's interface")
	}
	rs, err := s.Store.Refused()
	if err != nil || len(rs) != 1 || rs[0].Section != "wan" || rs[0].Interface != "eth0" || rs[0].SectionPos != src+":7" || rs[0].Source != src ||
		len(rs[0].Errors) != 1 || !strings.Contains(rs[0].Errors[0], ":9:") {
		t.Errorf("refused record %+v, %v", rs, err)
	}
	// The broken option may be the interface itself: the section that
	// shaped the interface is kept by its name.
	bad2 := &config.SectionError{Section: "wan", Pos: config.Position{File: src, Line: 7}, Errs: []error{errors.New("x")}}
	if _, err := s.Reload([]config.Queue{good}, src, PrepareOptions{Refused: []*config.SectionError{bad2}}); err == nil {
		t.Error("no error for a refused section")
	}
	if st, _ := s.Store.Load("eth0"); st == nil || k.trees["eth0"] != wanTree {
		t.Error("a section refused for its interface option lost the tree it had applied")
	}
	// Fixed: reload applies it and forgets the refusal.
	wan.Download = 30000
	outs, err = s.Reload([]config.Queue{wan, good}, src, PrepareOptions{})
	if err != nil || actions(outs) != "eth0=applied eth1=unchanged" {
		t.Errorf("fixed reload: %q, %v", actions(outs), err)
	}
	if rs, err := s.Store.Refused(); len(rs) != 0 || err != nil {
		t.Errorf("refusals left after a clean reload: %+v, %v", rs, err)
	}
	// Start: the same, and the record is kept per source.
	if _, err := s.Start([]config.Queue{good}, src, PrepareOptions{Refused: []*config.SectionError{bad}}, false); err == nil {
		t.Error("start: no error for a refused section")
	}
	if rs, _ := s.Store.Refused(); len(rs) != 1 {
		t.Errorf("start did not record the refusal: %+v", rs)
	}
	if _, err := s.Stop(StopOptions{Source: src}); err != nil {
		t.Fatal(err)
	}
	if rs, _ := s.Store.Refused(); len(rs) != 0 {
		t.Errorf("stop left the refusals of what it stopped: %+v", rs)
	}
}
