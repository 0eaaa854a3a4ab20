package service

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"sqm/internal/config"
	"sqm/internal/linkwatch"
)

// daemonRig runs a Daemon over a fake kernel with a JSON "config file" and
// short timers, so the real select loop, debounce and polling are tested.
type daemonRig struct {
	t      *testing.T
	k      *fakeKernel
	svc    *Service
	logs   *logBuf
	cfg    string
	events chan linkwatch.Event
	hup    chan os.Signal
	cancel context.CancelFunc
	done   chan error
}

func jsonLoad(path string) (*config.File, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var qs []config.Queue
	if err := json.Unmarshal(b, &qs); err != nil {
		return nil, fmt.Errorf("%s:1: %w", path, err)
	}
	return &config.File{Path: path, Queues: qs}, nil
}

func (r *daemonRig) writeConfig(qs ...config.Queue) {
	b, _ := json.Marshal(qs)
	r.writeRaw(string(b))
}

func (r *daemonRig) writeRaw(s string) {
	tmp := r.cfg + ".tmp"
	if err := os.WriteFile(tmp, []byte(s), 0o600); err != nil {
		r.t.Fatal(err)
	}
	if err := os.Rename(tmp, r.cfg); err != nil {
		r.t.Fatal(err)
	}
}

func startDaemon(t *testing.T, k *fakeKernel, restore bool, qs ...config.Queue) *daemonRig {
	t.Helper()
	return startDaemonWith(t, k, restore, func(*Daemon) {}, qs...)
}

// startDaemonWith is startDaemon with set changing the Daemon before it runs.
func startDaemonWith(t *testing.T, k *fakeKernel, restore bool, set func(*Daemon), qs ...config.Queue) *daemonRig {
	t.Helper()
	svc, lb := newService(t, k)
	svc.Now = time.Now
	r := &daemonRig{t: t, k: k, svc: svc, logs: lb, cfg: filepath.Join(t.TempDir(), "sqm.json"),
		events: make(chan linkwatch.Event, 64), hup: make(chan os.Signal, 1), done: make(chan error, 1)}
	r.writeConfig(qs...)
	var mu sync.Mutex
	d := &Daemon{
		Svc: svc, ConfigPath: r.cfg, Load: jsonLoad,
		Lock:   func() (func(), error) { mu.Lock(); return mu.Unlock, nil },
		Events: r.events, Reload: r.hup,
		Debounce: 100 * time.Millisecond, CheckEvery: 150 * time.Millisecond, PollEvery: 50 * time.Millisecond,
		Restore: restore, Log: svc.Log,
	}
	set(d)
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	go func() { r.done <- d.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-r.done:
		case <-time.After(5 * time.Second):
			t.Error("daemon did not stop within 5 s of cancel")
		}
	})
	return r
}

// eventually polls cond for up to 3 s.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(3 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for: %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestDaemonAppliesWhenInterfaceAppearsDebounced(t *testing.T) {
	k := newFake("eth0")
	r := startDaemon(t, k, true, queue("wan", "ppp0", 20000, 5000), queue("lan", "eth0", 1000, 1000))
	eventually(t, "eth0 applied at start", func() bool { return k.count(k.applies, "eth0") == 1 })
	eventually(t, "start logs that ppp0 waits", func() bool { return strings.Contains(r.logs.String(), "waiting") })
	// PPPoE comes up: a burst of events (new link, flags, up) is one apply.
	k.setLink("ppp0", true)
	appeared := time.Now()
	for i := 0; i < 10; i++ {
		r.events <- linkwatch.Event{Name: "ppp0", Index: 9, Up: i > 5}
		time.Sleep(5 * time.Millisecond)
	}
	r.events <- linkwatch.Event{Name: "unrelated0", Index: 10, Up: true}
	eventually(t, "ppp0 applied", func() bool { return k.count(k.applies, "ppp0") >= 1 })
	t.Logf("applied %v after the interface appeared (debounce 100ms)", time.Since(appeared))
	// The first event is handled at once, the rest of the burst after the
	// debounce: that pass finds the tree in place and changes nothing.
	eventually(t, "burst handled after the debounce", func() bool {
		return strings.Contains(r.logs.String(), `msg="link event" event=`) && k.count(k.matches, "ppp0") >= 1
	})
	time.Sleep(300 * time.Millisecond)
	if n := k.count(k.applies, "ppp0"); n != 1 {
		t.Errorf("%d applies for one burst of 10 events; want 1", n)
	}

	// It goes away: state and IFB are cleaned; it comes back: re-applied.
	k.setLink("ppp0", false)
	r.events <- linkwatch.Event{Name: "ppp0", Index: 9, Deleted: true}
	eventually(t, "ppp0 state cleaned", func() bool { st, _ := r.svc.Store.Load("ppp0"); return st == nil })
	k.setLink("ppp0", true)
	r.events <- linkwatch.Event{Name: "ppp0", Index: 11, Up: true}
	eventually(t, "ppp0 re-applied", func() bool { return k.count(k.applies, "ppp0") == 2 })
}

func TestDaemonReload(t *testing.T) {
	k := newFake("eth0", "eth1")
	wan, lan := queue("wan", "eth0", 20000, 5000), queue("lan", "eth1", 1000, 1000)
	r := startDaemon(t, k, true, wan, lan)
	eventually(t, "applied at start", func() bool { return k.count(k.applies, "eth0") == 1 && k.count(k.applies, "eth1") == 1 })

	// A broken config on SIGHUP keeps the running shaping and says where.
	r.writeRaw("{ this is not a config")
	r.hup <- os.Interrupt
	eventually(t, "error logged", func() bool { return strings.Contains(r.logs.String(), "config not reloaded") })
	if !strings.Contains(r.logs.String(), r.cfg+":1") {
		t.Errorf("error does not name file and line:\n%s", r.logs)
	}
	if _, ok := k.trees["eth0"]; !ok || k.count(k.removes, "eth0") != 0 {
		t.Error("broken config removed shaping")
	}

	// A changed file (no signal: mtime poll) re-applies only what changed
	// and removes the disabled section.
	lan.Enabled = false
	wan.Upload = 6000
	r.writeConfig(wan, lan)
	eventually(t, "reloaded", func() bool {
		st, _ := r.svc.Store.Load("eth0")
		return k.count(k.applies, "eth0") == 2 && k.count(k.removes, "eth1") == 1 && st != nil && st.Queue.Upload == 6000
	})
}

func TestDaemonDrift(t *testing.T) {
	tests := []struct {
		name    string
		restore bool
	}{{"restore", true}, {"report only", false}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			k := newFake("eth0")
			r := startDaemon(t, k, tt.restore, queue("wan", "eth0", 20000, 5000))
			eventually(t, "applied", func() bool { return k.count(k.applies, "eth0") == 1 })
			k.tamper("eth0") // someone ran `tc qdisc replace dev eth0 root ...`
			if tt.restore {
				eventually(t, "restored", func() bool { return k.count(k.applies, "eth0") == 2 })
				if k.count(k.forced, "eth0") != 1 {
					t.Error("restore did not force over the foreign qdisc")
				}
				return
			}
			eventually(t, "drift reported", func() bool { return strings.Contains(r.logs.String(), "not restoring") })
			time.Sleep(500 * time.Millisecond) // several check periods
			if n := strings.Count(r.logs.String(), "not restoring"); n != 1 {
				t.Errorf("drift reported %d times; want once per distinct difference", n)
			}
			if k.count(k.applies, "eth0") != 1 {
				t.Error("report-only mode re-applied")
			}
		})
	}
}

func TestDaemonQuietWhenIdle(t *testing.T) {
	k := newFake("eth0")
	r := startDaemon(t, k, true, queue("wan", "eth0", 20000, 5000))
	eventually(t, "start logged", func() bool { return strings.Contains(r.logs.String(), "msg=applied") })
	time.Sleep(100 * time.Millisecond)
	before := r.logs.String()
	time.Sleep(600 * time.Millisecond) // ~4 drift checks, ~12 config polls
	if after := r.logs.String(); after != before {
		t.Errorf("daemon logged while nothing happened:\n%s", strings.TrimPrefix(after, before))
	}
}

func TestDaemonStopOnExit(t *testing.T) {
	k := newFake("eth0")
	svc, _ := newService(t, k)
	cfg := filepath.Join(t.TempDir(), "c.json")
	b, _ := json.Marshal([]config.Queue{queue("wan", "eth0", 1, 1)})
	os.WriteFile(cfg, b, 0o600)
	for _, stop := range []bool{false, true} {
		d := &Daemon{Svc: svc, ConfigPath: cfg, Load: jsonLoad, StopOnExit: stop,
			Lock: func() (func(), error) { return func() {}, nil }, CheckEvery: -1, PollEvery: -1}
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		err := d.Run(ctx)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		_, shaped := k.trees["eth0"]
		if shaped == stop {
			t.Errorf("StopOnExit=%v: shaped after exit = %v", stop, shaped)
		}
	}
}

// TestDaemonSurvivesUnreadableConfig is issue 23 item 1: a config that
// cannot be read at start (missing, or not UCI) must not end the daemon
// (procd gives up after a few respawns and the WAN stays unshaped); it
// logs, waits, and shapes once the file is there.
func TestDaemonSurvivesUnreadableConfig(t *testing.T) {
	for _, name := range []string{"missing", "not a config"} {
		t.Run(name, func(t *testing.T) {
			k := newFake("eth0")
			cfg := filepath.Join(t.TempDir(), "sqm.json")
			if name != "missing" {
				os.WriteFile(cfg, []byte("{ not"), 0o600)
			}
			r := startDaemonWith(t, k, true, func(d *Daemon) { d.ConfigPath = cfg })
			eventually(t, "error logged", func() bool { return strings.Contains(r.logs.String(), "config not loaded; waiting") })
			select {
			case err := <-r.done:
				r.done <- err
				t.Fatalf("daemon ended on a config problem: %v", err)
			default:
			}
			b, _ := json.Marshal([]config.Queue{queue("wan", "eth0", 1, 1)})
			os.WriteFile(cfg+".tmp", b, 0o600)
			os.Rename(cfg+".tmp", cfg)
			eventually(t, "shaped once the file is fixed", func() bool { return k.count(k.applies, "eth0") == 1 })
		})
	}
}

// TestDaemonRefusedSection: with a real UCI file, the daemon shapes the
// good section, keeps running, reports the broken one (log, Last, the
// status record) and shapes it as soon as it is fixed (SIGHUP or the
// poll).
func TestDaemonRefusedSection(t *testing.T) {
	const good = "config queue 'lan'\n\toption enabled '1'\n\toption interface 'eth1'\n\toption script 'simplest'\n"
	const old = "config queue 'old'\n\toption enabled '0'\n\toption interface 'eth2'\n\toption script 'hfsc_lite.qos'\n"
	wan := func(download string) string {
		return "config queue 'wan'\n\toption enabled '1'\n\toption interface 'eth0'\n\toption script 'simplest'\n\toption download '" + download + "'\n"
	}
	for _, how := range []string{"SIGHUP", "poll"} {
		t.Run(how, func(t *testing.T) {
			k := newFake("eth0", "eth1")
			cfg := filepath.Join(t.TempDir(), "sqm")
			write := func(s string) {
				os.WriteFile(cfg+".tmp", []byte(s), 0o600)
				os.Rename(cfg+".tmp", cfg)
			}
			write(old + good + wan("85mbit"))
			var dm *Daemon
			r := startDaemonWith(t, k, true, func(d *Daemon) {
				d.ConfigPath, d.Load, dm = cfg, config.Load, d
				if how == "SIGHUP" {
					d.PollEvery = -1
				}
			})
			eventually(t, "good section shaped", func() bool { return k.count(k.applies, "eth1") == 1 })
			eventually(t, "refusal logged", func() bool { return strings.Contains(r.logs.String(), cfg+`:13: queue \"wan\" option download`) })
			if k.count(k.applies, "eth0") != 0 {
				t.Error("the broken section was applied")
			}
			if strings.Contains(r.logs.String(), "level=ERROR") && strings.Contains(r.logs.String(), "hfsc_lite") {
				t.Errorf("the disabled section was reported as an error:\n%s", r.logs)
			}
			if last := dm.Last(); last.Err == nil || last.Outcomes["eth0"].Action != ActRefused {
				t.Errorf("Last() = %+v; want eth0 refused and the error", last)
			}
			if rs, _ := r.svc.Store.Refused(); len(rs) != 1 || rs[0].Section != "wan" {
				t.Errorf("status record %+v", rs)
			}
			write(old + good + wan("85000"))
			if how == "SIGHUP" {
				r.hup <- os.Interrupt
			}
			eventually(t, "fixed section shaped", func() bool { return k.count(k.applies, "eth0") == 1 })
			eventually(t, "status record cleared after the fix", func() bool { rs, _ := r.svc.Store.Refused(); return len(rs) == 0 })
			select {
			case err := <-r.done:
				r.done <- err
				t.Fatalf("daemon ended: %v", err)
			default:
			}
		})
	}
}

// TestDaemonResync: when the kernel dropped link events (ENOBUFS), the
// daemon re-checks every configured section.
func TestDaemonResync(t *testing.T) {
	k := newFake("eth0")
	r := startDaemon(t, k, true, queue("wan", "eth0", 1000, 1000), queue("lte", "wwan0", 1000, 1000))
	eventually(t, "eth0 applied", func() bool { return k.count(k.applies, "eth0") == 1 })
	k.setLink("wwan0", true) // its events were lost
	r.events <- linkwatch.Event{Resync: true}
	eventually(t, "wwan0 applied after resync", func() bool { return k.count(k.applies, "wwan0") == 1 })
	if n := k.count(k.applies, "eth0"); n != 1 {
		t.Errorf("resync re-applied the unchanged eth0 (%d applies)", n)
	}
}

// TestDaemonShapesAppearingInterfaceAtOnce: an interface that appears is
// shaped by its first event, not after the debounce: with a debounce of an
// hour it must still be shaped (the test's 3 s wait would time out).
func TestDaemonShapesAppearingInterfaceAtOnce(t *testing.T) {
	k := newFake()
	// No drift check: it would rebuild the re-created interface's tree
	// and compare trees itself, blurring what the link events did.
	r := startDaemonWith(t, k, false, func(d *Daemon) { d.Debounce, d.CheckEvery = time.Hour, -1 }, queue("wan", "ppp0", 20000, 5000))
	eventually(t, "start logs that ppp0 waits", func() bool { return strings.Contains(r.logs.String(), "waiting") })
	k.setLink("ppp0", true)
	r.events <- linkwatch.Event{Name: "ppp0", Index: 9}
	eventually(t, "ppp0 applied without waiting for the debounce", func() bool { return k.count(k.applies, "ppp0") == 1 })

	// Re-created (PPPoE reconnect), in the order the kernel reports it:
	// the old one goes down, is deleted, the new one (a new index)
	// appears and comes up. The new one is shaped at once as well, though
	// the old one's last events came within the debounce.
	r.events <- linkwatch.Event{Name: "ppp0", Index: 9}
	k.setLink("ppp0", false)
	r.events <- linkwatch.Event{Name: "ppp0", Index: 9, Deleted: true}
	k.setLink("ppp0", true)
	r.events <- linkwatch.Event{Name: "ppp0", Index: 12}
	eventually(t, "re-created ppp0 applied without waiting for the debounce", func() bool { return k.count(k.applies, "ppp0") == 2 })

	// More events for the same incarnation within the debounce are
	// debounced: no handling (no comparison with the kernel) now.
	time.Sleep(100 * time.Millisecond)
	compared := k.count(k.matches, "ppp0")
	r.events <- linkwatch.Event{Name: "ppp0", Index: 12, Up: true}
	time.Sleep(200 * time.Millisecond)
	if n := k.count(k.matches, "ppp0"); n != compared {
		t.Errorf("an event within the debounce for the same ifindex was handled at once (%d comparisons, want %d)", n, compared)
	}
}

// TestDaemonLinkEventDoesNotForce: an interface that appears with a qdisc
// sqm did not install is left alone, with restore on (the default) as
// well: start refuses foreign trees unless --force, and so does the daemon.
func TestDaemonLinkEventDoesNotForce(t *testing.T) {
	for _, restore := range []bool{true, false} {
		t.Run(fmt.Sprintf("restore=%v", restore), func(t *testing.T) {
			k := newFake()
			r := startDaemon(t, k, restore, queue("wan", "eth9", 20000, 5000))
			eventually(t, "start logs that eth9 waits", func() bool { return strings.Contains(r.logs.String(), "waiting") })
			k.setLink("eth9", true)
			k.mu.Lock()
			k.trees["eth9"] = "an administrator's htb"
			k.mu.Unlock()
			r.events <- linkwatch.Event{Name: "eth9", Index: 4, Up: true}
			eventually(t, "refusal logged", func() bool { return strings.Contains(r.logs.String(), errFakeForeign.Error()) })
			if n := k.count(k.forced, "eth9"); n != 0 {
				t.Errorf("link event forced over a foreign qdisc %d times", n)
			}
			k.mu.Lock()
			defer k.mu.Unlock()
			if k.trees["eth9"] != "an administrator's htb" {
				t.Errorf("foreign tree replaced: %q", k.trees["eth9"])
			}
		})
	}
}

// TestDaemonShutdownIsNotAnError: on SIGTERM the link watcher closes its
// channel as the context ends; the daemon must not log that as "link
// watching stopped" (an ERROR). Both are ready at once, and select picks
// at random, so 50 rounds make a miss before the fix about 2^-50 likely.
func TestDaemonShutdownIsNotAnError(t *testing.T) {
	k := newFake("eth0")
	svc, lb := newService(t, k)
	cfg := filepath.Join(t.TempDir(), "c.json")
	b, _ := json.Marshal([]config.Queue{queue("wan", "eth0", 1, 1)})
	os.WriteFile(cfg, b, 0o600)
	for range 50 {
		ev := make(chan linkwatch.Event)
		close(ev)
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		d := &Daemon{Svc: svc, ConfigPath: cfg, Load: jsonLoad, Events: ev, Log: svc.Log,
			Lock: func() (func(), error) { return func() {}, nil }, CheckEvery: -1, PollEvery: -1}
		if err := d.Run(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if strings.Contains(lb.String(), "level=ERROR") {
		t.Errorf("shutdown logged an error:\n%s", lb)
	}
}

// TestDaemonDeferredIsNotAnError: a Lock refused with ErrDeferred (a tune
// from the page holds the shaping) skips the operation, logs it as
// information and records it for the page; another Lock error is an error.
func TestDaemonDeferredIsNotAnError(t *testing.T) {
	for _, c := range []struct {
		err   error
		level string
	}{
		{fmt.Errorf("%w: tuning", ErrDeferred), "level=INFO msg=\"reload deferred\""},
		{errors.New("lock: timeout"), "level=ERROR msg=\"reload skipped\""},
	} {
		k := newFake("eth0")
		svc, lb := newService(t, k)
		d := &Daemon{Svc: svc, Log: svc.Log, Lock: func() (func(), error) { return nil, c.err }}
		if _, err := d.locked("reload", func() ([]Outcome, error) { t.Fatal("ran without the lock"); return nil, nil }, false); !errors.Is(err, c.err) {
			t.Errorf("locked: %v; want %v", err, c.err)
		}
		if !strings.Contains(lb.String(), c.level) {
			t.Errorf("%v: log lacks %s:\n%s", c.err, c.level, lb)
		}
		if last := d.Last(); !errors.Is(last.Err, c.err) {
			t.Errorf("%v: last outcome's error %v", c.err, last.Err)
		}
	}
}
