//go:build linux

package bloat_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"sqm/internal/bloat"
	"sqm/internal/iperf3/iperf3test"
	"sqm/internal/netns"
)

// iperf3Tolerance is how far (relative) sqm's goodput through an iperf3
// server may be from iperf3's own client on the same shaped link, run just
// before or just after it (check). Both are limited by the same htb at 20 Mbit/s and count what
// the receiver got over the time the streams ran; they differ in when that
// time starts and stops and in the run itself. Over 13 runs on this
// machine (2 cores shared with other work, load average 13-21) the
// difference was within +-1 % in most runs, with outliers of -5.9 % and
// +3.9 % (speedtest download) when one of the two runs was starved of CPU.
// 10 % leaves room for that and still fails on a counting error: taking the
// server's sent bytes for a download (+25-60 % here), charging an iperf3
// test's setup to the phase (-17 % when it took 0.7 s of 4), or losing a
// direction of a bidirectional test.
const iperf3Tolerance = 0.10

// iperf3Client runs Debian's iperf3 client in ns B and returns the
// received goodput, down and up in Mbit/s (for a one-way test, the other
// is 0).
func iperf3Client(t *testing.T, p *nsPair, secs, streams int, flag string) (down, up float64) {
	t.Helper()
	args := append(ipNetnsExec(p.b), "iperf3", "-c", "10.77.0.1", "-p", "5201",
		"-t", strconv.Itoa(secs), "-P", strconv.Itoa(streams), "-J")
	if flag != "" {
		args = append(args, flag)
	}
	var out []byte
	var err error
	var r struct {
		Error string `json:"error"`
		End   struct {
			Recv *struct {
				BPS float64 `json:"bits_per_second"`
			} `json:"sum_received"`
			RecvReverse *struct {
				BPS float64 `json:"bits_per_second"`
			} `json:"sum_received_bidir_reverse"`
		} `json:"end"`
	}
	// The server re-opens its listening socket after each test: a client
	// started in that gap is refused, and one that connects while the
	// server is still ending the previous test is told it is busy (iperf3
	// 3.12's client then exits 0 with only "error" in its JSON, which read
	// as 0 Mbit/s once in 20 runs). iperf3's own client retries neither.
	for range 20 {
		out, err = exec.Command(args[0], args[1:]...).Output()
		r.Error, r.End.Recv, r.End.RecvReverse = "", nil, nil
		if err == nil {
			if jerr := json.Unmarshal(out, &r); jerr != nil {
				t.Fatalf("iperf3 -J: %v\n%s", jerr, out)
			}
		}
		if !strings.Contains(string(out), "unable to connect to server") && !strings.Contains(r.Error, "server is busy") {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("%v: %v\n%s", args, err, out)
	}
	if r.Error != "" || r.End.Recv == nil {
		t.Fatalf("%v: iperf3 reported no result (error %q):\n%s", args, r.Error, out)
	}
	switch flag {
	case "-R":
		return r.End.Recv.BPS / 1e6, 0
	case "--bidir":
		if r.End.RecvReverse == nil {
			t.Fatalf("iperf3 --bidir gave no sum_received_bidir_reverse:\n%s", out)
		}
		return r.End.RecvReverse.BPS / 1e6, r.End.Recv.BPS / 1e6
	}
	return 0, r.End.Recv.BPS / 1e6
}

// iperf3Link is newNSPair's link at 20 Mbit/s each way with, under each
// htb, TCP packets under 128 bytes (ACKs, SACKs) in a class of their own
// and everything else in a 100-packet fifo (60 ms at 20 Mbit/s). In a
// bidirectional test the downloads' ACKs otherwise wait in the uploads'
// fifo, and how the downloads fare then swings from run to run for
// iperf3's own client alone (9-14 Mbit/s over 10 runs with the veth's
// 1000-packet fifo, 10-12.5 with a 100-packet one), which no comparison
// between two runs can absorb. (Those runs were made while netns.Link
// still let TCP's GSO packets into the fifos, which made their length in
// bytes vary from run to run; the separate class stays, since ACKs behind
// data is a real bottleneck's behaviour too.) The probes (ICMP, 84 bytes)
// still queue behind the data.
func iperf3Link(t *testing.T) *nsPair {
	t.Helper()
	p := newNSPair(t, 20)
	for _, s := range []struct {
		ns  *netns.NS
		dev string
	}{{p.a, "vbA"}, {p.b, "vbB"}} {
		if err := s.ns.HTBClass(s.dev, "1:10", 2000, 20000, 0); err != nil {
			t.Fatal(err)
		}
		if err := s.ns.HTBClass(s.dev, "1:20", 18000, 20000, 1); err != nil {
			t.Fatal(err)
		}
		if err := s.ns.TC(
			[]string{"qdisc", "add", "dev", s.dev, "parent", "1:10", "handle", "10:", "pfifo", "limit", "100"},
			[]string{"qdisc", "add", "dev", s.dev, "parent", "1:20", "handle", "20:", "pfifo", "limit", "100"},
			[]string{"filter", "add", "dev", s.dev, "parent", "1:", "protocol", "ip", "prio", "1", "u32",
				"match", "ip", "protocol", "6", "0xff", "match", "u16", "0x0000", "0xff80", "at", "2", "flowid", "1:10"},
			[]string{"filter", "add", "dev", s.dev, "parent", "1:", "protocol", "all", "prio", "2", "u32", "match", "u32", "0", "0", "flowid", "1:20"},
		); err != nil {
			t.Fatal(err)
		}
	}
	return p
}

// TestIPerf3Load runs sqm test's speedtest and RRUL shapes with the load
// through Debian's `iperf3 -s` across a namespace link shaped to 20 Mbit/s
// each way by htb, with iperf3's own client on the same link with the same
// streams and time before and after each, and checks that sqm's goodput
// agrees with one of the two within iperf3Tolerance. The run must also say which servers it used, have
// latency from ICMP (the only probe an iperf3 host answers) and keep both
// sides' byte counts for each stream.
func TestIPerf3Load(t *testing.T) {
	iperf3test.Require(t)
	p := iperf3Link(t)
	iperf3test.Serve(t, ipNetnsExec(p.a), "10.77.0.1", 5201)
	const secs = 4
	// check compares sqm's goodput with iperf3's own client run just before
	// and just after it on the same link: sqm's run must agree with one of
	// them. A 4 s run that the shared machine starves of CPU for part of it
	// (another package's tests, another build) moves that run's goodput by
	// up to 15 % (seen once as a failure with one reference; -5.9 and +4.6 %
	// in other runs), and it is the reference as often as sqm: with a
	// reference on each side, a disturbance of one reference leaves the
	// other, while a counting error in sqm moves it away from both.
	check := func(name string, got float64, refs ...float64) {
		t.Helper()
		var ds []string
		ok := false
		for _, want := range refs {
			d := (got - want) / want
			ds = append(ds, fmt.Sprintf("%.2f (%+.1f%%)", want, 100*d))
			if want < 10 {
				t.Errorf("%s: iperf3's client got %.2f Mbit/s, far below the 20 Mbit/s link", name, want)
			}
			ok = ok || math.Abs(d) <= iperf3Tolerance
		}
		t.Logf("%s: sqm %.2f Mbit/s, iperf3 before and after %s", name, got, strings.Join(ds, ", "))
		if !ok {
			t.Errorf("%s: sqm %.2f Mbit/s vs iperf3's client before and after %s: more than %.0f%% from both",
				name, got, strings.Join(ds, ", "), 100*iperf3Tolerance)
		}
	}
	run := func(mode bloat.Mode, streams int) *bloat.Result {
		t.Helper()
		res, err := bloat.Run(context.Background(), bloat.Options{IPerf3: "10.77.0.1", Mode: mode, Streams: streams,
			Duration: secs * time.Second, Idle: time.Second, Enter: p.b.Do})
		if err != nil {
			t.Fatalf("%s: %v", mode, err)
		}
		if res.Servers == nil || res.Servers.Load != "iperf3://10.77.0.1:5201" || !slices.Contains(res.Servers.Latency, "icmp://10.77.0.1") {
			t.Errorf("%s: servers %+v, want load iperf3://10.77.0.1:5201 and latency icmp://10.77.0.1", mode, res.Servers)
		}
		if res.Loaded.Count == 0 || res.Idle.Count == 0 {
			t.Errorf("%s: no latency samples (idle %d, loaded %d)", mode, res.Idle.Count, res.Loaded.Count)
		}
		for _, s := range res.Streams {
			if s.PeerBytes == 0 || s.Bytes == 0 || s.Bytes > s.PeerBytes+1 && s.Dir == bloat.DirDown {
				t.Errorf("%s: stream %s %s: bytes %d, server's count %d", mode, s.Dir, s.Label, s.Bytes, s.PeerBytes)
			}
		}
		t.Logf("%s: down %.2f up %.2f Mbit/s, idle %.1f ms, loaded %.1f ms, notes %q", mode, res.DownloadMbps, res.UploadMbps,
			res.Idle.MedianMs, res.Loaded.MedianMs, res.Notes)
		for _, s := range res.Streams {
			var ph bloat.Phase
			for _, q := range res.Phases {
				if s.StartS >= q.StartS && s.StartS < q.EndS {
					ph = q
				}
			}
			t.Logf("%s: %s %s started %.0f ms into %s, ran %.2f s: %d bytes, server's count %d", mode, s.Dir, s.Label,
				1000*(s.StartS-ph.StartS), ph.Name, s.EndS-s.StartS, s.Bytes, s.PeerBytes)
		}
		return res
	}

	down1, _ := iperf3Client(t, p, secs, 2, "-R")
	_, up1 := iperf3Client(t, p, secs, 2, "")
	st := run(bloat.ModeSpeedtest, 2)
	if n := len(st.Streams); n != 4 {
		t.Errorf("speedtest: %d streams, want 2 down and 2 up", n)
	}
	down2, _ := iperf3Client(t, p, secs, 2, "-R")
	_, up2 := iperf3Client(t, p, secs, 2, "")
	check("speedtest download", st.DownloadMbps, down1, down2)
	check("speedtest upload", st.UploadMbps, up1, up2)

	down1, up1 = iperf3Client(t, p, secs, 4, "--bidir")
	rr := run(bloat.ModeRRUL, 0)
	if n := len(rr.Streams); n != 8 {
		t.Errorf("rrul: %d streams, want 4 down and 4 up", n)
	}
	down2, up2 = iperf3Client(t, p, secs, 4, "--bidir")
	check("rrul download", rr.DownloadMbps, down1, down2)
	check("rrul upload", rr.UploadMbps, up1, up2)
}
