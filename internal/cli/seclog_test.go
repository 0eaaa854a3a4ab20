//go:build linux

package cli

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"sqm/internal/config"
	"sqm/internal/kernel"
	"sqm/internal/logger"
	"sqm/internal/netns"
	"sqm/internal/testutil"
)

// TestVerbosity: a section's verbosity option gates the log lines about it
// (its interface or its IFB) with sqm-scripts' levels; lines about nothing
// configured follow the command's level. The option used to be parsed and
// ignored: every command logged at warn, whatever the section said.
func TestVerbosity(t *testing.T) {
	emit := func(log *logger.Logger, trace func(kernel.Op)) {
		ctx := context.Background()
		log.Error("e", "interface", "eth1")
		log.Warn("w", "interface", "eth1")
		log.Info("i", "interface", "eth1")
		log.Debug("d", "interface", "eth1")
		log.Log(ctx, levelTrace, "t", "interface", "eth1")
		trace(kernel.Op{Device: "ifb4eth1", What: "add qdisc cake 1: (parent root) on ifb4eth1"})
		log.Info("other-info", "interface", "eth9")
		log.Warn("other-warn", "interface", "eth9")
		log.Warn("no-interface")
	}
	tests := []struct {
		verbosity int
		want      string // messages shown, in order
	}{
		{0, "other-warn no-interface"},
		{1, "e other-warn no-interface"},
		{2, "e w other-warn no-interface"},
		{5, "e w i other-warn no-interface"},
		{8, "e w i d netlink other-warn no-interface"},
		{10, "e w i d t netlink other-warn no-interface"},
	}
	for _, tt := range tests {
		var out bytes.Buffer
		logs := newSectionLogs(&out, logger.LevelWarn)
		q := config.Defaults()
		q.Name, q.Interface, q.Enabled, q.Verbosity = "wan", "eth1", true, tt.verbosity
		if err := logs.configure([]config.Queue{q}, "", "start-sqm", false); err != nil {
			t.Fatal(err)
		}
		log := logs.logger()
		emit(log, logs.trace(log))
		var got []string
		for _, l := range strings.Split(strings.TrimSpace(out.String()), "\n") {
			for _, f := range strings.Fields(l) {
				if m, ok := strings.CutPrefix(f, "msg="); ok {
					got = append(got, m)
				}
			}
		}
		if g := strings.Join(got, " "); g != tt.want {
			t.Errorf("verbosity %d: shown %q; want %q\n%s", tt.verbosity, g, tt.want, out.String())
		}
		if tt.verbosity >= 8 && !strings.Contains(out.String(), `interface=eth1 device=ifb4eth1 op="add qdisc cake 1: (parent root) on ifb4eth1" result=ok`) {
			t.Errorf("verbosity %d: the IFB's netlink op is not logged under its interface:\n%s", tt.verbosity, out.String())
		}
		if tt.verbosity == 10 && !strings.Contains(out.String(), "level=TRACE msg=t") {
			t.Errorf("trace level not named TRACE:\n%s", out.String())
		}
	}
}

// TestDebugLogFile: debug_logging '1' writes every line about the section,
// whatever its verbosity, to <dir>/<iface>.<name>.log: rewritten by each
// command, appended to (and cut at debugLogMax) by the daemon.
func TestDebugLogFile(t *testing.T) {
	dir := t.TempDir()
	q := config.Defaults()
	q.Name, q.Interface, q.Enabled, q.Verbosity, q.DebugLogging = "wan", "eth1", true, 0, true
	quiet := config.Defaults()
	quiet.Name, quiet.Interface, quiet.Enabled = "lan", "eth2", true
	run := func(file string, appendMode bool, msg string) string {
		var out bytes.Buffer
		logs := newSectionLogs(&out, logger.LevelWarn)
		if err := logs.configure([]config.Queue{q, quiet}, dir, file, appendMode); err != nil {
			t.Fatal(err)
		}
		log := logs.logger()
		debugHeader(log, []config.Queue{q, quiet}, "start")
		log.Debug(msg, "interface", "eth1")
		logs.trace(log)(kernel.Op{Device: "eth1", What: "delete qdisc 1: (parent root)", Err: errors.New("no such file or directory")})
		log.Debug("not-this-one", "interface", "eth2")
		logs.close()
		if out.Len() > 0 {
			t.Errorf("verbosity 0 printed to stderr: %s", out.String())
		}
		b, err := os.ReadFile(filepath.Join(dir, "eth1."+file+".log"))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	first := run("start-sqm", false, "first")
	for _, want := range []string{"level=TRACE msg=\"sqm start\" interface=eth1 section=wan", "level=DEBUG msg=first",
		`op="delete qdisc 1: (parent root)" err="no such file or directory"`} {
		if !strings.Contains(first, want) {
			t.Errorf("debug log lacks %q:\n%s", want, first)
		}
	}
	if strings.Contains(first, "not-this-one") {
		t.Error("another section's line is in eth1's debug log")
	}
	if _, err := os.Stat(filepath.Join(dir, "eth2.start-sqm.log")); !os.IsNotExist(err) {
		t.Errorf("a section without debug_logging got a debug log (%v)", err)
	}
	if second := run("start-sqm", false, "second"); strings.Contains(second, "first") || !strings.Contains(second, "second") {
		t.Errorf("a command's debug log is not rewritten:\n%s", second)
	}
	run("debug", true, "one")
	if both := run("debug", true, "two"); !strings.Contains(both, "msg=one") || !strings.Contains(both, "msg=two") {
		t.Errorf("the daemon's debug log is not appended to:\n%s", both)
	}
	// The daemon's log is cut when it reaches debugLogMax.
	big := filepath.Join(dir, "eth1.debug.log")
	if err := os.WriteFile(big, bytes.Repeat([]byte("x"), debugLogMax), 0o600); err != nil {
		t.Fatal(err)
	}
	after := run("debug", true, "three")
	if len(after) > 4096 || !strings.Contains(after, "was cut at") || !strings.Contains(after, "msg=three") {
		t.Errorf("debug log over %d bytes was not started over (%d bytes now)", debugLogMax, len(after))
	}
}

// TestDebugLoggingNetlink runs `sqm start` and `sqm stop` in a namespace
// with debug_logging '1': the start and stop logs in the state directory
// must list the netlink changes, like sqm-scripts' logged tc commands.
func TestDebugLoggingNetlink(t *testing.T) {
	testutil.RequireRoot(t)
	ns := netns.NewT(t, "sqmdbg")
	if err := ns.Veth("wan0", ns, "wan1"); err != nil {
		t.Fatal(err)
	}
	if err := ns.Up("wan0", "wan1"); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	conf, state := filepath.Join(dir, "sqm"), filepath.Join(dir, "state")
	c := "config queue 'wan'\n\toption enabled '1'\n\toption interface 'wan0'\n\toption download '20000'\n\toption upload '10000'\n" +
		"\toption script 'simple.qos'\n\toption qdisc 'pfifo'\n\toption debug_logging '1'\n\toption verbosity '2'\n"
	if err := os.WriteFile(conf, []byte(c), 0o644); err != nil {
		t.Fatal(err)
	}
	sqm := func(args ...string) {
		t.Helper()
		var out, errb bytes.Buffer
		code := 0
		if err := ns.Do(func() error {
			code = run(context.Background(), &Env{Stdout: &out, Stderr: &errb, Getenv: func(string) string { return "" }}, args)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if code != 0 || errb.Len() > 0 {
			t.Fatalf("sqm %s: status %d, stderr %q (verbosity 2: nothing expected)", strings.Join(args, " "), code, errb.String())
		}
	}
	sqm("start", "--config", conf, "--state-dir", state)
	sqm("stop", "--state-dir", state)
	for file, wants := range map[string][]string{
		"wan0.start-sqm.log": {`msg="sqm start"`, `device=ifb4wan0 op="create ifb ifb4wan0" result=ok`,
			`device=wan0 op="add qdisc htb 1: (parent root) on wan0" result=ok`, `op="add qdisc ingress ffff: (parent ingress) on wan0" result=ok`},
		"wan0.stop-sqm.log": {`msg="sqm stop"`, `device=wan0 op="delete qdisc 1: (parent root)" result=ok`, `op="delete device ifb4wan0" result=ok`},
	} {
		b, err := os.ReadFile(filepath.Join(state, file))
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s:\n%s", file, b)
		for _, w := range wants {
			if !strings.Contains(string(b), w) {
				t.Errorf("%s lacks %q:\n%s", file, w, b)
			}
		}
	}
}

// TestDaemonDebugLog runs `sqm daemon` in a namespace with a section that
// has debug_logging '1' and verbosity '8': its start-up apply must be
// appended to <state>/wan0.start-sqm.log with the netlink changes, and
// appear on stderr at debug level; then SIGTERM-like cancellation stops
// it, and the removal (--stop-on-exit) is in <state>/wan0.stop-sqm.log.
// Those are the files luci-app-sqm's help names; the daemon once wrote
// wan0.debug.log, which nothing tells a LuCI user about.
func TestDaemonDebugLog(t *testing.T) {
	testutil.RequireRoot(t)
	ns := netns.NewT(t, "sqmdd")
	if err := ns.Veth("wan0", ns, "wan1"); err != nil {
		t.Fatal(err)
	}
	if err := ns.Up("wan0", "wan1"); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	conf, state := filepath.Join(dir, "sqm"), filepath.Join(dir, "state")
	c := "config queue 'wan'\n\toption enabled '1'\n\toption interface 'wan0'\n\toption download '0'\n\toption upload '10000'\n" +
		"\toption script 'simple.qos'\n\toption qdisc 'pfifo'\n\toption debug_logging '1'\n\toption verbosity '8'\n"
	if err := os.WriteFile(conf, []byte(c), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var errb lockedBuffer
	done := make(chan int)
	go func() {
		code := -1
		ns.Do(func() error {
			code = run(ctx, &Env{Stdout: &errb, Stderr: &errb, Getenv: func(string) string { return "" }},
				[]string{"daemon", "--config", conf, "--state-dir", state, "--stop-on-exit", "--check-interval", "0", "--poll-interval", "0"})
			return nil
		})
		done <- code
	}()
	// Wait for the start-up apply (the daemon writes state after it).
	log := filepath.Join(state, "wan0.start-sqm.log")
	for i := 0; ; i++ {
		if b, _ := os.ReadFile(filepath.Join(state, "wan0.state.json")); len(b) > 0 {
			break
		}
		if i == 600 {
			cancel()
			t.Fatalf("daemon did not apply wan0 within a minute; its output:\n%s", errb.String())
		}
		sleep100ms()
	}
	cancel()
	if code := <-done; code != 0 {
		t.Fatalf("daemon exit %d:\n%s", code, errb.String())
	}
	b, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`msg="sqm daemon (re)load" interface=wan0`, `op="add qdisc htb 1: (parent root) on wan0" result=ok`,
		`msg=applied interface=wan0`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("wan0.start-sqm.log lacks %q:\n%s", want, b)
		}
	}
	stop, err := os.ReadFile(filepath.Join(state, "wan0.stop-sqm.log"))
	if err != nil {
		t.Fatal(err)
	}
	if want := `op="delete qdisc 1: (parent root)" result=ok`; !strings.Contains(string(stop), want) {
		t.Errorf("wan0.stop-sqm.log lacks %q:\n%s", want, stop)
	}
	if _, err := os.Stat(filepath.Join(state, "wan0.debug.log")); err == nil {
		t.Errorf("the daemon still writes wan0.debug.log, a name LuCI does not know")
	}
	if !strings.Contains(errb.String(), `level=DEBUG msg=netlink interface=wan0`) {
		t.Errorf("verbosity 8 did not show the netlink lines on stderr:\n%s", errb.String())
	}
}

// lockedBuffer is a bytes.Buffer safe for the daemon's goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *lockedBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *lockedBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func sleep100ms() { time.Sleep(100 * time.Millisecond) }

// TestDebugLogRefusesLink: a link planted where a section's debug log goes
// (start-sqm truncates its file, the daemon's appends) is refused, for
// both, and the file it points at is left alone; so is a state directory
// another user could write to. Before debug logs were opened through
// service.OpenStateFile, root truncated the link's target.
func TestDebugLogRefusesLink(t *testing.T) {
	q := config.Defaults()
	q.Name, q.Interface, q.Enabled, q.DebugLogging = "wan", "eth1", true, true
	for _, tt := range []struct {
		file       string
		appendMode bool
	}{{"start-sqm", false}, {"debug", true}} {
		dir := t.TempDir()
		victim := filepath.Join(t.TempDir(), "victim")
		if err := os.WriteFile(victim, []byte("precious\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(victim, filepath.Join(dir, "eth1."+tt.file+".log")); err != nil {
			t.Fatal(err)
		}
		logs := newSectionLogs(&bytes.Buffer{}, logger.LevelWarn)
		err := logs.configure([]config.Queue{q}, dir, tt.file, tt.appendMode)
		if err == nil || !strings.Contains(err.Error(), "symbolic link") {
			t.Errorf("%s log through a planted link: %v; want refusal", tt.file, err)
		}
		logs.logger().Warn("through the link?", "interface", "eth1")
		logs.close()
		if b, _ := os.ReadFile(victim); string(b) != "precious\n" {
			t.Errorf("%s log: the link's target now holds %q", tt.file, b)
		}
		os.Chmod(dir, 0o777)
		os.Remove(filepath.Join(dir, "eth1."+tt.file+".log"))
		err = logs.configure([]config.Queue{q}, dir, tt.file, tt.appendMode)
		if err == nil || !strings.Contains(err.Error(), "writable by every user") {
			t.Errorf("%s log in a world-writable directory: %v; want refusal", tt.file, err)
		}
		logs.close()
	}
}
