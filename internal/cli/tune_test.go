//go:build linux && !sqm_notest

package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"sqm/internal/config"
	"sqm/internal/tune"
)

// simTuneLink is the simulated seed-004 line behind the command: it records
// what the command asked of the shaping.
type simTuneLink struct {
	*tune.SimLink
	restored, closed int
	applied          []config.Queue
	cancelAfter      int // cancel the run's context after this many loads (0: never)
	cancel           context.CancelFunc
	loads            int
	secret           string // the tester's secret the command resolved
}

func (l *simTuneLink) now() time.Time { return l.SimLink.Now() }
func (l *simTuneLink) apply(q config.Queue) error {
	l.applied = append(l.applied, q)
	return nil
}
func (l *simTuneLink) restore() error { l.restored++; return nil }
func (l *simTuneLink) close()         { l.closed++ }
func (l *simTuneLink) Load(ctx context.Context, d tune.Dir) (tune.Measurement, error) {
	l.loads++
	if l.cancelAfter > 0 && l.loads >= l.cancelAfter {
		l.cancel()
		return tune.Measurement{}, ctx.Err()
	}
	return l.SimLink.Load(ctx, d)
}

var tuneConfig = `# my line: ADSL, tuned by hand in 2014
config queue 'wan'
	option enabled '1'
	option interface 'eth9'
	option download '6089' # start
	option upload '737'
	option qdisc 'cake'
	option script 'piece_of_cake.qos'
	option linklayer 'atm'
	option overhead '44'
	option my_note 'kept'
`

func runTune(t *testing.T, ctx context.Context, link *simTuneLink, args ...string) (code int, stdout, stderr, cfg string, opened int) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "sqm")
	if err := os.WriteFile(path, []byte(tuneConfig), 0o600); err != nil {
		t.Fatal(err)
	}
	old := openTuneLink
	t.Cleanup(func() { openTuneLink = old })
	openTuneLink = func(env *Env, fs *flag.FlagSet, o tuneLinkOptions) (tuneLink, error) {
		opened++
		q, bo := o.q, o.bo
		link.secret = bo.Secret
		if q.Interface != "eth9" || q.LinkLayer != "atm" || q.Overhead != 44 || bo.Addr != "192.0.2.7" {
			t.Errorf("link opened for %+v / %q", q, bo.Addr)
		}
		return link, nil
	}
	var out, errb bytes.Buffer
	env := &Env{Stdout: &out, Stderr: &errb, Getenv: func(string) string { return "" }}
	code = run(ctx, env, append([]string{"tune", "--config", path, "--state-dir", t.TempDir()}, args...))
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return code, out.String(), errb.String(), string(b), opened
}

func seed004Link() *simTuneLink {
	return &simTuneLink{SimLink: &tune.SimLink{DownKbit: 7616, UpKbit: 864, ATM: true, Overhead: 44, ShaperATM: true, ShaperOverhead: 44,
		BufferPkts: 300, BaseMs: 29, JitterMs: 0.5, Seed: 4}}
}

func TestTuneJSON(t *testing.T) {
	link := seed004Link()
	code, out, errs, cfg, _ := runTune(t, context.Background(), link, "--json", "192.0.2.7")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(out), &m); err != nil {
		t.Fatalf("stdout is not one JSON object: %v\n%s", err, out)
	}
	for _, k := range []string{"download_kbit", "upload_kbit", "linklayer", "overhead", "target_ms", "seconds", "points"} {
		if _, ok := m[k]; !ok {
			t.Errorf("no %q in %s", k, out)
		}
	}
	if m["linklayer"] != "atm" || m["overhead"].(float64) != 44 {
		t.Errorf("linklayer/overhead %v/%v, want the section's atm/44", m["linklayer"], m["overhead"])
	}
	if link.restored != 1 || len(link.applied) != 0 || link.closed != 1 {
		t.Errorf("restored %d, applied %d, closed %d; want the old shaping restored once and the link closed", link.restored, len(link.applied), link.closed)
	}
	if cfg != tuneConfig {
		t.Error("config changed without --write")
	}
	if !strings.Contains(errs, "sqm tune: sweep") || !strings.Contains(errs, "restored") {
		t.Errorf("no progress on stderr: %q", errs)
	}
}

func TestTuneWriteAndPlot(t *testing.T) {
	link := seed004Link()
	plotPath := filepath.Join(t.TempDir(), "curve.svg")
	code, out, errs, cfg, _ := runTune(t, context.Background(), link, "--write", "--quiet", "--plot", plotPath, "192.0.2.7")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	// Config warnings (the unknown option) are printed as by every
	// command; progress is not.
	if strings.Contains(errs, "sqm tune:") || !strings.Contains(errs, "my_note") {
		t.Errorf("--quiet: stderr %q", errs)
	}
	if len(link.applied) != 1 || link.restored != 0 {
		t.Fatalf("applied %d, restored %d: want the written rates applied instead of the old ones", len(link.applied), link.restored)
	}
	q := link.applied[0]
	want := strings.Replace(strings.Replace(tuneConfig, "'6089'", fmt.Sprintf("'%d'", q.Download), 1), "'737'", fmt.Sprintf("'%d'", q.Upload), 1)
	if cfg != want {
		t.Errorf("config after --write:\n%s\nwant:\n%s", cfg, want)
	}
	if !strings.Contains(out, "<- chosen") || !strings.Contains(out, "wrote") {
		t.Errorf("stdout: %s", out)
	}
	if b, err := os.ReadFile(plotPath); err != nil || !bytes.Contains(b, []byte("<svg")) {
		t.Errorf("plot: %v", err)
	}
}

// TestTuneDetectWrite: --detect finds the line's real overhead (32, where
// the section says 44), shapes with it, and --write stores it with the
// rates, the rest of the file untouched.
func TestTuneDetectWrite(t *testing.T) {
	link := seed004Link()
	link.Overhead = 32
	code, out, errs, cfg, _ := runTune(t, context.Background(), link, "--detect", "--write", "192.0.2.7")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	if len(link.applied) != 1 {
		t.Fatalf("applied %d times, want once", len(link.applied))
	}
	q := link.applied[0]
	if q.LinkLayer != "atm" || q.Overhead != 32 || link.ShaperOverhead != 32 || !link.ShaperATM {
		t.Errorf("applied %s %d, shaped with atm=%v %d; want atm 32", q.LinkLayer, q.Overhead, link.ShaperATM, link.ShaperOverhead)
	}
	want := strings.NewReplacer("'6089'", fmt.Sprintf("'%d'", q.Download), "'737'", fmt.Sprintf("'%d'", q.Upload),
		"option overhead '44'", "option overhead '32'").Replace(tuneConfig)
	if cfg != want {
		t.Errorf("config after --detect --write:\n%s\nwant:\n%s", cfg, want)
	}
	if !strings.Contains(out, "overhead 32 (detected)") || !strings.Contains(out, "configured atm overhead 44, measured 32") {
		t.Errorf("stdout does not say what was detected:\n%s", out)
	}
	if !strings.Contains(errs, "echoes") && !strings.Contains(errs, "linklayer") {
		t.Errorf("no detection progress on stderr: %q", errs)
	}
}

func TestTuneDetectUsage(t *testing.T) {
	for _, args := range [][]string{
		{"--detect", "--linklayer", "192.0.2.7"},
		{"--detect", "--sizes", "60-70", "192.0.2.7"},
		{"--detect", "--repeat", "0", "192.0.2.7"},
	} {
		code, _, errs, cfg, opened := runTune(t, context.Background(), seed004Link(), args...)
		if code != 2 || opened != 0 || cfg != tuneConfig {
			t.Errorf("%q: exit %d, link opened %d times, config changed %v; stderr %q", args, code, opened, cfg != tuneConfig, errs)
		}
	}
}

// TestTuneInterrupted: Ctrl-C mid-sweep puts the old shaping back, writes
// nothing and exits non-zero.
func TestTuneInterrupted(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	link := seed004Link()
	link.cancelAfter, link.cancel = 5, cancel
	code, out, errs, cfg, _ := runTune(t, ctx, link, "--write", "192.0.2.7")
	if code != 1 || out != "" || !strings.Contains(errs, "interrupted") {
		t.Errorf("exit %d, stdout %q, stderr %q", code, out, errs)
	}
	if link.restored != 1 || len(link.applied) != 0 || cfg != tuneConfig {
		t.Errorf("restored %d, applied %d, config changed %v", link.restored, len(link.applied), cfg != tuneConfig)
	}
}

// TestTuneBadInput: bad flags and config selections are refused before
// the link is opened (no shaping changed).
func TestTuneBadInput(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{}, "exactly one server"},
		{[]string{"--profile", "fast", "192.0.2.7"}, `unknown profile "fast"`},
		{[]string{"--profile", "gaming", "--target", "5", "192.0.2.7"}, "exclude each other"},
		{[]string{"--target", "-3", "192.0.2.7"}, "positive number"},
		{[]string{"--duration", "100ms", "192.0.2.7"}, "at least 1s"},
		{[]string{"--plot", "x.gif", "192.0.2.7"}, ".svg or .png"},
		{[]string{"--section", "lte", "192.0.2.7"}, `no queue section "lte"`},
		{[]string{"--secret", "x", "--secret-file", "/nonexistent", "192.0.2.7"}, "not both"},
		{[]string{"--secret", "x", "--iperf3", "192.0.2.7"}, "iperf3 servers' authentication is not supported"},
	} {
		code, out, errs, _, opened := runTune(t, context.Background(), seed004Link(), tt.args...)
		if code != 2 || out != "" || !strings.Contains(errs, tt.want) || opened != 0 {
			t.Errorf("%q: exit %d, stdout %q, stderr %q, link opened %d times; want exit 2 and %q", tt.args, code, out, errs, opened, tt.want)
		}
	}
}

// TestTuneWriteRefused: a section whose rate shares a line with another
// command cannot be edited safely; the result is still shown, the file
// left alone, the old shaping restored, and the exit status says so.
func TestTuneWriteRefused(t *testing.T) {
	link := seed004Link()
	old := tuneConfig
	t.Cleanup(func() { tuneConfig = old })
	tuneConfig = strings.Replace(tuneConfig, "\toption upload '737'\n", "\toption upload '737'; option my_other 'x'\n", 1)
	code, out, errs, cfg, _ := runTune(t, context.Background(), link, "--write", "192.0.2.7")
	if code != 1 || !strings.Contains(out, "<- chosen") || !strings.Contains(out, "uci set") || !strings.Contains(errs, "--write") {
		t.Errorf("exit %d, stdout %q, stderr %q", code, out, errs)
	}
	if cfg != tuneConfig || link.restored != 1 || len(link.applied) != 0 {
		t.Errorf("config changed %v, restored %d, applied %d", cfg != tuneConfig, link.restored, len(link.applied))
	}
}

// TestTuneSecretFile: sqm tune takes the server's secret as sqm test does,
// from a file (not only --secret, which every user sees in ps), and
// passes it to the tester.
func TestTuneSecretFile(t *testing.T) {
	f := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(f, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	link := seed004Link()
	code, _, errs, _, _ := runTune(t, context.Background(), link, "--quiet", "--secret-file", f, "192.0.2.7")
	if code != 0 || link.secret != "s3cret" {
		t.Fatalf("exit %d, secret %q: want 0 and the file's secret\n%s", code, link.secret, errs)
	}
	if strings.Contains(errs, "visible to every user") {
		t.Errorf("a secret from a file warned about ps: %s", errs)
	}
}
