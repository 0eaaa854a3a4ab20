//go:build linux

package bloat_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"sqm/internal/bloat"
	"sqm/internal/plot"
	"sqm/internal/report"
)

// netperfTolerance is how far (relative) sqm's goodput through a netserver
// may be from Debian's own netperf client's on the same shaped link, run
// just before or just after it with the same streams (check, as in
// TestIPerf3Load). Over 10 runs on this machine (2 cores shared with other
// work, load average 6-13), sqm's own goodput stayed within 18.71-19.14
// Mbit/s (speedtest) and 17.90-18.73 (RRUL) each way, and differed from
// the nearer netperf reference by -2.0..+2.3 % in every case, from both
// by at most +-3.3 % in all but three: references of 16.91 (+10.2 %),
// 17.62 (+5.7 %) and, once, 10.81 and 11.14 Mbit/s for both directions of
// one RRUL reference run (cause not found; netperfClients logs its
// streams' spans when that happens), while sqm's runs between them read
// 18.3-18.7. A run of eight RRUL references in a row read 16.72-18.79.
// 10 % is three times the spread of agreeing runs and still fails the
// counting errors iperf3Tolerance's comment measured on this link (+25-60 %
// for a download counted by the bytes the server sent, -17 % for a phase
// charged with its tests' setup).
const netperfTolerance = 0.10

// requireNetPerf skips the test when Debian's netperf package is missing.
func requireNetPerf(t testing.TB) {
	t.Helper()
	for _, bin := range []string{"netperf", "netserver"} {
		if _, err := exec.LookPath(bin); err != nil {
			t.Skipf("needs %s (Debian package netperf, in non-free; scripts/setup.sh installs it)", bin)
		}
	}
}

// serveNetPerf starts Debian's netserver in ns A on 10.77.0.1:12865 and
// waits until it accepts a control connection. netserver forks a child
// per control connection; the children end with their connections.
func serveNetPerf(t *testing.T, p *nsPair) {
	t.Helper()
	srv := exec.Command("netserver", "-D", "-4", "-L", "10.77.0.1", "-p", "12865")
	if err := p.a.Start(srv); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Process.Kill(); srv.Wait() })
	deadline := time.Now().Add(5 * time.Second)
	for {
		var c net.Conn
		err := p.b.Do(func() error {
			var err error
			c, err = net.DialTimeout("tcp4", "10.77.0.1:12865", time.Second)
			return err
		})
		if err == nil {
			c.Close()
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("netserver did not listen: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// netperfClients runs Debian's netperf client in ns B the way
// betterspeedtest and flent run it: one process per stream, all at once,
// each `netperf -H 10.77.0.1 -t TEST -l secs -Y dscp,dscp`, and returns
// the aggregate goodput (Mbit/s) per direction: the bytes the receivers
// got (LOCAL_BYTES_RECVD of a TCP_MAERTS, REMOTE_BYTES_RECVD of a
// TCP_STREAM) over the span from the first stream's start to the last
// one's end. Each stream's span is its own ELAPSED_TIME ending at its own
// wall-clock stamp of its end (the NETPERF_ENDING of its final demo-mode
// interval, -D). Summing each process's THROUGHPUT instead would add rates
// over different spans: eight processes launched at once on this shared
// machine start up to a second apart, and their sum read 20.6-23.1 Mbit/s
// through the 20 Mbit/s link in 3 of 5 runs (sqm: 18.6 in all). Ending
// the spans at the processes' exits, as seen here, is no better: an exit
// seen 0.8 s late on the busy machine read a 2-stream download as 16.0.
// tests lists the streams as TCP_MAERTS (down) or TCP_STREAM (up) with
// their DSCP names.
func netperfClients(t *testing.T, p *nsPair, secs int, tests ...[2]string) (down, up float64) {
	t.Helper()
	type out struct {
		bytes      float64
		start, end time.Time
		err        error
	}
	outs := make([]out, len(tests))
	var wg sync.WaitGroup
	for i, tt := range tests {
		key := "REMOTE_BYTES_RECVD"
		if tt[0] == "TCP_MAERTS" {
			key = "LOCAL_BYTES_RECVD"
		}
		args := append(ipNetnsExec(p.b), "netperf", "-P", "0", "-v", "0", "-4", "-H", "10.77.0.1", "-p", "12865",
			"-t", tt[0], "-l", strconv.Itoa(secs), "-f", "m", "-D", "1")
		if tt[1] != "" {
			args = append(args, "-Y", tt[1]+","+tt[1])
		}
		args = append(args, "--", "-k", key+",ELAPSED_TIME")
		wg.Add(1)
		go func() {
			defer wg.Done()
			b, err := exec.Command(args[0], args[1:]...).CombinedOutput()
			o := &outs[i]
			if err != nil {
				o.err = fmt.Errorf("%v: %v\n%s", args, err, b)
				return
			}
			vals := map[string]float64{}
			var ending float64
			for line := range strings.SplitSeq(string(b), "\n") {
				if k, v, ok := strings.Cut(strings.TrimSpace(line), "="); ok {
					f, err := strconv.ParseFloat(v, 64)
					if err != nil {
						continue
					}
					vals[k] = f
					if strings.HasPrefix(k, "NETPERF_ENDING[") {
						ending = max(ending, f)
					}
				}
			}
			el, ok1 := vals["ELAPSED_TIME"]
			n, ok2 := vals[key]
			if !ok1 || !ok2 || el <= 0 || ending == 0 {
				o.err = fmt.Errorf("%v printed no %s, ELAPSED_TIME and NETPERF_ENDING:\n%s", args, key, b)
				return
			}
			o.end = time.UnixMilli(int64(ending * 1000))
			o.bytes, o.start = n, o.end.Add(-time.Duration(el*float64(time.Second)))
		}()
	}
	wg.Wait()
	agg := func(test string) float64 {
		var bytes float64
		var first, last time.Time
		for i, o := range outs {
			if tests[i][0] != test {
				continue
			}
			bytes += o.bytes
			if first.IsZero() || o.start.Before(first) {
				first = o.start
			}
			if o.end.After(last) {
				last = o.end
			}
		}
		if bytes == 0 {
			return 0
		}
		mbps := bytes * 8 / last.Sub(first).Seconds() / 1e6
		if mbps < 10 { // far below the link: say how each stream ran
			for i, o := range outs {
				if tests[i][0] == test {
					t.Logf("%s %s: %.0f bytes from %+.3f to %+.3f s", test, tests[i][1], o.bytes, o.start.Sub(first).Seconds(), o.end.Sub(first).Seconds())
				}
			}
		}
		return mbps
	}
	for _, o := range outs {
		if o.err != nil {
			t.Fatal(o.err)
		}
	}
	return agg("TCP_MAERTS"), agg("TCP_STREAM")
}

// TestNetPerfLoad runs sqm test's speedtest and RRUL shapes with the load
// through Debian's netserver across a namespace link shaped to 20 Mbit/s
// each way by htb (iperf3Link's: ACKs in their own class, 100-packet
// fifos), with Debian's netperf client doing the same streams, as
// betterspeedtest and flent would, just before and after each, and checks
// that sqm's goodput agrees with one of the two within netperfTolerance.
// The speedtest takes its latency from ICMP and netperf UDP_RR tests, the
// RRUL run from ICMP and Debian's irtt server, and each must say which
// servers it used; every upload
// stream must carry the server's count of what it received.
func TestNetPerfLoad(t *testing.T) {
	requireNetPerf(t)
	p := iperf3Link(t)
	serveNetPerf(t, p)
	haveIRTT := false
	if _, err := exec.LookPath("irtt"); err == nil {
		srv := exec.Command("irtt", "server", "-b", "10.77.0.1:2112")
		if err := p.a.Start(srv); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { srv.Process.Kill(); srv.Wait() })
		waitIRTT(t, p, "")
		haveIRTT = true
	}
	const secs = 4
	check := func(name string, got float64, refs ...float64) {
		t.Helper()
		var ds []string
		ok := false
		// A reference far below the link measured something else (see
		// netperfClients, which then logs its streams' spans): sqm must
		// agree with a reference that measured the link.
		for _, want := range refs {
			d := (got - want) / want
			ds = append(ds, fmt.Sprintf("%.2f (%+.1f%%)", want, 100*d))
			ok = ok || (want >= 10 && math.Abs(d) <= netperfTolerance)
		}
		t.Logf("%s: sqm %.2f Mbit/s, netperf before and after %s", name, got, strings.Join(ds, ", "))
		if !ok {
			t.Errorf("%s: sqm %.2f Mbit/s vs netperf's client before and after %s: more than %.0f%% from both",
				name, got, strings.Join(ds, ", "), 100*netperfTolerance)
		}
	}
	run := func(mode bloat.Mode, streams int, irtt bool) *bloat.Result {
		t.Helper()
		o := bloat.Options{NetPerf: "10.77.0.1", Mode: mode, Streams: streams,
			Duration: secs * time.Second, Idle: time.Second, Enter: p.b.Do}
		latency := "icmp://10.77.0.1"
		if irtt {
			o.IRTT, latency = "10.77.0.1", "irtt://10.77.0.1:2112"
		}
		res, err := bloat.Run(context.Background(), o)
		if err != nil {
			t.Fatalf("%s: %v", mode, err)
		}
		if res.Servers == nil || res.Servers.Load != "netperf://10.77.0.1:12865" || !slices.Contains(res.Servers.Latency, latency) {
			t.Errorf("%s: servers %+v, want load netperf://10.77.0.1:12865 and latency %s", mode, res.Servers, latency)
		}
		// Without irtt the UDP probes are netperf UDP_RR tests: they must
		// see the load's queue as the ICMP probes to the same host do.
		var icmp *bloat.ProbeSummary
		for i := range res.Probes {
			if res.Probes[i].Kind == "icmp" {
				icmp = &res.Probes[i]
			}
		}
		for _, ps := range res.Probes {
			t.Logf("%s: %s (%s at %s): idle %.2f loaded %.2f ms, %d of %d answered under load", mode, ps.Kind, ps.Protocol, ps.Server,
				ps.Idle.MedianMs, ps.Loaded.MedianMs, ps.Loaded.Count, ps.Loaded.Sent)
			if ps.Kind == "icmp" {
				continue
			}
			wantProto := "netperf"
			if irtt {
				wantProto = "irtt"
			}
			if ps.Protocol != wantProto || ps.Loaded.Count == 0 {
				t.Errorf("%s: %s: protocol %q, %d loaded samples; want %s probes answered under load", mode, ps.Kind, ps.Protocol, ps.Loaded.Count, wantProto)
			}
			// As in TestNetnsIPerf3IRTT: medians of staggered samples of a
			// swinging queue, so within 40 % of ICMP's.
			if icmp != nil && (ps.Loaded.MedianMs < 0.6*icmp.Loaded.MedianMs || ps.Loaded.MedianMs > 1.4*icmp.Loaded.MedianMs) {
				t.Errorf("%s: %s loaded median %.2f ms vs ICMP's %.2f ms on the same queue", mode, ps.Kind, ps.Loaded.MedianMs, icmp.Loaded.MedianMs)
			}
		}
		if !irtt && !slices.Contains(res.Servers.Latency, "netperf://10.77.0.1:12865") {
			t.Errorf("%s: latency servers %v do not name the netperf server's UDP_RR", mode, res.Servers.Latency)
		}
		if res.Loaded.Count == 0 || res.Idle.Count == 0 {
			t.Errorf("%s: no latency samples (idle %d, loaded %d)", mode, res.Idle.Count, res.Loaded.Count)
		}
		// Probe loss in the full fifo is the link's; a note about the
		// netperf tests (one that did not start, ended early, or whose
		// results were missing) is a failure of the load.
		for _, n := range res.Notes {
			if strings.Contains(n, "netperf") {
				t.Errorf("%s: note %q", mode, n)
			}
		}
		for _, s := range res.Streams {
			if s.Bytes == 0 || (s.Dir == bloat.DirUp && (s.PeerBytes == 0 || s.Bytes > s.PeerBytes)) {
				t.Errorf("%s: stream %s %s: bytes %d, server's count %d", mode, s.Dir, s.Label, s.Bytes, s.PeerBytes)
			}
		}
		t.Logf("%s: down %.2f up %.2f Mbit/s, idle %.1f ms, loaded %.1f ms", mode, res.DownloadMbps, res.UploadMbps,
			res.Idle.MedianMs, res.Loaded.MedianMs)
		return res
	}

	be2 := func(test string) [][2]string { return [][2]string{{test, ""}, {test, ""}} }
	down1, _ := netperfClients(t, p, secs, be2("TCP_MAERTS")...)
	_, up1 := netperfClients(t, p, secs, be2("TCP_STREAM")...)
	st := run(bloat.ModeSpeedtest, 2, false)
	if n := len(st.Streams); n != 4 {
		t.Errorf("speedtest: %d streams, want 2 down and 2 up", n)
	}
	down2, _ := netperfClients(t, p, secs, be2("TCP_MAERTS")...)
	_, up2 := netperfClients(t, p, secs, be2("TCP_STREAM")...)
	check("speedtest download", st.DownloadMbps, down1, down2)
	check("speedtest upload", st.UploadMbps, up1, up2)

	// flent's rrul: four streams each way, marked BE, BK (CS1), CS5, EF.
	var rrul [][2]string
	for _, test := range []string{"TCP_MAERTS", "TCP_STREAM"} {
		for _, m := range []string{"", "CS1", "CS5", "EF"} {
			rrul = append(rrul, [2]string{test, m})
		}
	}
	down1, up1 = netperfClients(t, p, secs, rrul...)
	rr := run(bloat.ModeRRUL, 0, haveIRTT)
	if n := len(rr.Streams); n != 8 {
		t.Errorf("rrul: %d streams, want 4 down and 4 up", n)
	}
	down2, up2 = netperfClients(t, p, secs, rrul...)
	check("rrul download", rr.DownloadMbps, down1, down2)
	check("rrul upload", rr.UploadMbps, up1, up2)
	checkNetPerfReports(t, st, rr)
	if !haveIRTT {
		t.Skip("no irtt binary: the RRUL run took ICMP latency instead (scripts/setup.sh installs irtt)")
	}
}

// checkNetPerfReports: a run whose load went through netserver gets what
// every other server kind's does: a grade and an RPM, a plot, and (RRUL)
// a flent file whose series carry the streams and probes and whose note
// names the netperf server.
func checkNetPerfReports(t *testing.T, runs ...*bloat.Result) {
	t.Helper()
	for _, r := range runs {
		if r.Grade == "" || !(r.RPM > 0) || r.RPMBand == "" {
			t.Errorf("%s: grade %q, RPM %v (%q)", r.Mode, r.Grade, r.RPM, r.RPMBand)
		}
		var svg bytes.Buffer
		if err := plot.Write(&svg, "run.svg", r); err != nil || !bytes.Contains(svg.Bytes(), []byte("<svg")) {
			t.Errorf("%s: plot: %v (%d bytes)", r.Mode, err, svg.Len())
		}
		if r.Mode != bloat.ModeRRUL {
			continue
		}
		var fl bytes.Buffer
		if err := report.Flent(&fl, r, "run.flent.gz"); err != nil {
			t.Fatalf("flent file: %v", err)
		}
		zr, err := gzip.NewReader(&fl)
		if err != nil {
			t.Fatal(err)
		}
		var doc struct {
			Results map[string][]*float64 `json:"results"`
			Meta    struct {
				Note string `json:"NOTE"`
			} `json:"metadata"`
		}
		if err := json.NewDecoder(zr).Decode(&doc); err != nil {
			t.Fatalf("flent file: %v", err)
		}
		if !strings.Contains(doc.Meta.Note, "netperf://10.77.0.1") {
			t.Errorf("flent file: NOTE %q does not name the netperf server", doc.Meta.Note)
		}
		for _, name := range []string{"TCP download BE", "TCP download EF", "TCP upload BK", "TCP upload CS5", "Ping (ms) ICMP"} {
			n := 0
			for _, v := range doc.Results[name] {
				if v != nil && *v > 0 {
					n++
				}
			}
			if n == 0 {
				t.Errorf("flent file: series %q has no values", name)
			}
		}
	}
}
