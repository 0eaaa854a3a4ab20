//go:build linux

package rpm_test

// goresponsiveness (github.com/network-quality/goresponsiveness), a
// responsiveness client nobody here wrote, against `sqm server --rpm`
// with a secret across the bloated namespace link, next to `sqm test
// --rpm` and ping on the same link. Opt-in: it needs the client, which
// is never part of this tree, and about a minute and a half.
//
//	GORESPONSIVENESS=/path/to/networkQuality (its binary) or
//	GORESPONSIVENESS=/path/to/checkout (built here with go build)
//	go test -run TestGoresponsiveness -v ./internal/rpm
//
// GORESPONSIVENESS_ARGS adds arguments (e.g. --debug, --rpm.parallel);
// GORESPONSIVENESS_OUT names a file for its whole output.

import (
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"sqm/internal/rpm"
)

// goresponsivenessBinary is the client named by $GORESPONSIVENESS, built
// first if it names a source directory; the test skips without it.
func goresponsivenessBinary(t *testing.T) string {
	t.Helper()
	p := os.Getenv("GORESPONSIVENESS")
	if p == "" {
		t.Skip("set GORESPONSIVENESS to goresponsiveness's binary or checkout to run it against sqm server --rpm")
	}
	fi, err := os.Stat(p)
	if err != nil {
		t.Fatalf("GORESPONSIVENESS: %v", err)
	}
	if !fi.IsDir() {
		return p
	}
	bin := filepath.Join(t.TempDir(), "networkQuality")
	cmd := exec.Command("go", "build", "-o", bin, ".")
	cmd.Dir = p
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building goresponsiveness in %s: %v\n%s", p, err, out)
	}
	return bin
}

// grResult is what goresponsiveness prints for one direction.
type grResult struct {
	mbps  float64
	conns int
	p90   float64 // RPM
	tm    float64 // RPM, trimmed mean
}

var (
	grThroughput = regexp.MustCompile(`Throughput: ([\d.]+) Mbps .*using (\d+) parallel connections`)
	grRPM        = regexp.MustCompile(`RPM:\s+(\S+) \((P90|Single-Sided)`)
)

// parseGoresponsiveness reads the Download:, Upload: and Final sections
// of its text output.
func parseGoresponsiveness(out string) (down, up, final grResult) {
	cur := &final
	num := func(s string) float64 {
		v, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return math.NaN() // "+Inf" parses; "NaN" too: both fail the bounds
		}
		return v
	}
	for _, l := range strings.Split(out, "\n") {
		switch strings.TrimSpace(l) {
		case "Download:":
			cur = &down
			continue
		case "Upload:":
			cur = &up
			continue
		}
		if strings.HasPrefix(l, "Final RPM:") {
			cur = &final
		}
		if m := grThroughput.FindStringSubmatch(l); m != nil {
			cur.mbps = num(m[1])
			cur.conns, _ = strconv.Atoi(m[2])
		}
		if m := grRPM.FindStringSubmatch(l); m != nil {
			if m[2] == "P90" {
				cur.p90 = num(m[1])
			} else {
				cur.tm = num(m[1])
			}
		}
	}
	return
}

// TestGoresponsiveness: goresponsiveness must report both directions'
// throughput near the link's rate with load connections in use, finite
// RPMs for each direction, and a final RPM (its trimmed mean, the
// draft's statistic; its P90 is a high percentile of round trips and
// only checked finite) near both `sqm test --rpm`'s and 60000 over
// ping's loaded RTT in its own run. The bounds:
//   - goodput 0.5..1.05 x the 10 Mbit/s rate, as for sqm test (runRPM);
//   - goresponsiveness loads one direction at a time, so its probes cross
//     one full FIFO where sqm test's (both directions at once) cross two:
//     its RPM is expected above sqm test's, up to about twice; 0.5..4 x;
//   - ping's loaded RTT is the median of its replies above 10 ms (the
//     idle link answers in well under 1 ms; goresponsiveness spends part
//     of its run idle, measuring the baseline and between directions).
//     Self probes on a loaded connection take 3.5-10 x ping on this link
//     (docs/rpm.md, "Where a probe's time goes") and foreign ones about
//     2 x, so a mean over both is 2-6 x ping: 0.15..1.25 x 60000/ping.
//     An RPM above that would mean it measured an idle path.
func TestGoresponsiveness(t *testing.T) {
	bin := goresponsivenessBinary(t)
	l := newLink(t)
	sf := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(sf, []byte("goresponsiveness test secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	addr := startSQMServer(t, l, "--secret-file", sf)
	ours := runRPM(t, l, "--rpm", addr, "--insecure", "--secret-file", sf)

	u := "https://" + addr + rpm.PathPrefix("goresponsiveness test secret") + rpm.WellKnownPath
	p := startPing(t, l)
	start := time.Now()
	cmd := exec.Command(bin, append([]string{"--url", u, "--rpm.timeout", "20"}, strings.Fields(os.Getenv("GORESPONSIVENESS_ARGS"))...)...)
	var buf strings.Builder
	cmd.Stdout, cmd.Stderr = &buf, &buf
	err := l.cli.Run(cmd)
	out := buf.String()
	end := time.Now()
	pings := p.stop()
	if err != nil {
		t.Fatalf("goresponsiveness: %v\n%s", err, out)
	}
	var rtts []float64
	for _, s := range pings {
		if s.sent.After(start) && s.sent.Before(end) && s.rtt > 10 {
			rtts = append(rtts, s.rtt)
		}
	}
	ping := median(rtts)
	down, up, final := parseGoresponsiveness(out)
	t.Logf("goresponsiveness: down %.2f Mbit/s on %d connections, RPM %.0f (P90) %.0f (trimmed mean); up %.2f Mbit/s on %d, RPM %.0f / %.0f; final RPM %.0f (P90) %.0f (trimmed mean); ping's loaded median %.1f ms over its run (60000/ping %.0f); sqm test --rpm: %.0f RPM (loaded RTT %.0f ms)",
		down.mbps, down.conns, down.p90, down.tm, up.mbps, up.conns, up.p90, up.tm, final.p90, final.tm, ping, 60000/ping, ours.RPM, ours.LoadedRTTMs)
	for _, d := range []struct {
		name string
		r    grResult
	}{{"download", down}, {"upload", up}} {
		if d.r.conns == 0 || !(d.r.mbps >= 0.5*rateMbit && d.r.mbps <= 1.05*rateMbit) {
			t.Errorf("%s: %.2f Mbit/s on %d connections; want 0.5..1.05 x %d Mbit/s", d.name, d.r.mbps, d.r.conns, rateMbit)
		}
		// Its per-direction trimmed mean is NaN now and then with
		// both directions working (the upload's, in 2 of 5 runs): a
		// statistic of goresponsiveness's own over a direction's last
		// intervals, not checked here.
		if math.IsInf(d.r.p90, 0) || math.IsNaN(d.r.p90) || d.r.p90 <= 0 {
			t.Errorf("%s: RPM %v (P90); want finite", d.name, d.r.p90)
		}
	}
	if math.IsInf(final.p90, 0) || math.IsNaN(final.p90) || final.p90 <= 0 {
		t.Errorf("final RPM %v (P90); want finite", final.p90)
	}
	if r := final.tm / ours.RPM; !(r >= 0.5 && r <= 4) {
		t.Errorf("final RPM %.0f (trimmed mean) is %.2f x sqm test --rpm's %.0f; want 0.5..4", final.tm, r, ours.RPM)
	}
	if r := final.tm / (60000 / ping); !(r >= 0.15 && r <= 1.25) {
		t.Errorf("final RPM %.0f (trimmed mean) is %.2f x 60000/ping's loaded RTT (%.0f); want 0.15..1.25", final.tm, r, 60000/ping)
	}
	if f := os.Getenv("GORESPONSIVENESS_OUT"); f != "" {
		os.WriteFile(f, []byte(out), 0o644)
	} else if t.Failed() {
		t.Logf("goresponsiveness output:\n%s", out)
	}
}
