//go:build linux

package bloat_test

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"sqm/internal/bloat"
	"sqm/internal/iperf3/iperf3test"
	"sqm/internal/netns"
	"sqm/internal/testutil"
)

// TestAccuracy compares sqm test with the tools people trust, in one run:
// goodput against iperf3 (same stream count and duration, both directions)
// and idle median latency against ping, on loopback and across a namespace
// pair shaped to 50 Mbit/s with htb. It logs the figures and asserts
// nothing: it is a measurement on the host kernel, which has no netem, so
// the idle RTT is tens of microseconds and says little. TestVMAccuracy is
// the assertion (20 ms of netem delay). This runs only when asked for by name
// (go test -run TestAccuracy -v) or with SQM_ACCURACY=1, as root;
// SQM_ACCURACY_SECONDS sets the load duration (default 10).
func TestAccuracy(t *testing.T) {
	if f := flag.Lookup("test.run"); os.Getenv("SQM_ACCURACY") == "" && (f == nil || !strings.Contains(f.Value.String(), "Accuracy")) {
		t.Skip("measurement, not a test: run it with -run TestAccuracy or SQM_ACCURACY=1 (root, iperf3 and ping installed); takes about 3 minutes")
	}
	testutil.RequireRoot(t)
	for _, tool := range []string{"iperf3", "ping"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("needs %s", tool)
		}
	}
	secs := 10
	if s, err := strconv.Atoi(os.Getenv("SQM_ACCURACY_SECONDS")); err == nil && s > 0 {
		secs = s
	}
	type setup struct {
		name             string
		ip               string
		srvNS, cliNS     *netns.NS // nil = the test's namespace
		enter            func(func() error) error
		serverListenAddr string
	}
	p := newNSPair(t, 50)
	setups := []setup{
		{name: "loopback", ip: "127.0.0.1", serverListenAddr: "127.0.0.1:0"},
		{name: "netns+htb50", ip: "10.77.0.1", srvNS: p.a, cliNS: p.b, serverListenAddr: "10.77.0.1:0",
			enter: p.b.Do},
	}
	var lines []string
	for _, s := range setups {
		inNS := func(ns *netns.NS, args ...string) *exec.Cmd {
			args = append(ipNetnsExec(ns), args...)
			return exec.Command(args[0], args[1:]...)
		}
		var iperfCPU []float64
		iperf := func(reverse bool) float64 {
			defer iperf3test.ServeOnce(t, ipNetnsExec(s.srvNS), s.ip, 5299)()
			args := []string{"iperf3", "-c", s.ip, "-p", "5299", "-P", "4", "-t", strconv.Itoa(secs), "-J"}
			if reverse {
				args = append(args, "-R")
			}
			out, err := inNS(s.cliNS, args...).Output()
			if err != nil {
				t.Fatalf("iperf3: %v\n%s", err, out)
			}
			var r struct {
				End struct {
					SumReceived struct {
						BPS float64 `json:"bits_per_second"`
					} `json:"sum_received"`
					CPU struct {
						Host   float64 `json:"host_total"`
						Remote float64 `json:"remote_total"`
					} `json:"cpu_utilization_percent"`
				} `json:"end"`
			}
			if err := json.Unmarshal(out, &r); err != nil {
				t.Fatalf("iperf3 json: %v", err)
			}
			iperfCPU = append(iperfCPU, r.End.CPU.Host+r.End.CPU.Remote)
			return r.End.SumReceived.BPS / 1e6
		}
		pingMedian := func(n int) float64 {
			out, err := inNS(s.cliNS, "ping", "-n", "-i", "0.2", "-c", strconv.Itoa(n), s.ip).Output()
			if err != nil {
				t.Fatalf("ping: %v\n%s", err, out)
			}
			var v []float64
			for _, m := range regexp.MustCompile(`time=([0-9.]+) ms`).FindAllStringSubmatch(string(out), -1) {
				f, _ := strconv.ParseFloat(m[1], 64)
				v = append(v, f)
			}
			sort.Float64s(v)
			if len(v) == 0 {
				t.Fatalf("no ping replies:\n%s", out)
			}
			return v[len(v)/2]
		}
		var addr string
		addr = serveIn(t, s.srvNS, s.serverListenAddr)
		// CPU of this process (client and server both run in it) per
		// second of load, to compare with iperf3's own report.
		var ru0, ru1 unix.Rusage
		unix.Getrusage(unix.RUSAGE_SELF, &ru0)
		res, err := bloat.Run(context.Background(), bloat.Options{Addr: addr, Mode: bloat.ModeSpeedtest, Streams: 4,
			Duration: time.Duration(secs) * time.Second, Idle: -1, NoICMP: true, Enter: s.enter})
		if err != nil {
			t.Fatal(err)
		}
		unix.Getrusage(unix.RUSAGE_SELF, &ru1)
		cpu := float64(ru1.Utime.Nano()+ru1.Stime.Nano()-ru0.Utime.Nano()-ru0.Stime.Nano()) / 1e9
		cpuPct := 100 * cpu / (2 * float64(secs))
		ipDown, ipUp := iperf(true), iperf(false)
		nPing := 5 * secs
		pMed := pingMedian(nPing)
		idle, err := bloat.Run(context.Background(), bloat.Options{Addr: addr, Mode: bloat.ModeIdle,
			Duration: time.Duration(nPing) * 200 * time.Millisecond, Enter: s.enter})
		if err != nil {
			t.Fatal(err)
		}
		kind := map[string]float64{}
		for _, pk := range idle.Probes {
			kind[pk.Kind] = pk.Idle.MedianMs
		}
		// Latency under load: ping runs alongside an RRUL run; compare the
		// medians of the samples sent during the load phase.
		pingCmd := inNS(s.cliNS, "ping", "-n", "-D", "-i", "0.2", "-w", strconv.Itoa(secs+4), s.ip)
		var pingOut strings.Builder
		pingCmd.Stdout = &pingOut
		if err := pingCmd.Start(); err != nil {
			t.Fatal(err)
		}
		rrul, err := bloat.Run(context.Background(), bloat.Options{Addr: addr, Duration: time.Duration(secs) * time.Second,
			Idle: 2 * time.Second, Enter: s.enter})
		pingCmd.Wait()
		if err != nil {
			t.Fatal(err)
		}
		loadFrom := float64(rrul.Start.UnixNano())/1e9 + rrul.IdleS
		loadTo := loadFrom + rrul.LoadS
		var loadedPing []float64
		for _, m := range regexp.MustCompile(`\[([0-9.]+)\].*time=([0-9.]+) ms`).FindAllStringSubmatch(pingOut.String(), -1) {
			ts, _ := strconv.ParseFloat(m[1], 64)
			v, _ := strconv.ParseFloat(m[2], 64)
			// -D stamps the reply; the request left v ms earlier.
			if sent := ts - v/1000; sent >= loadFrom && sent < loadTo {
				loadedPing = append(loadedPing, v)
			}
		}
		sort.Float64s(loadedPing)
		loadedKind := map[string]float64{}
		for _, pk := range rrul.Probes {
			loadedKind[pk.Kind] = pk.Loaded.MedianMs
		}
		lpMed := 0.0
		if len(loadedPing) > 0 {
			lpMed = loadedPing[len(loadedPing)/2]
		}

		pct := func(a, b float64) float64 { return 100 * (a - b) / b }
		lines = append(lines,
			fmt.Sprintf("%-12s download: sqm %9.2f  iperf3 %9.2f Mbit/s (%+.1f%%)", s.name, res.DownloadMbps, ipDown, pct(res.DownloadMbps, ipDown)),
			fmt.Sprintf("%-12s upload:   sqm %9.2f  iperf3 %9.2f Mbit/s (%+.1f%%)", s.name, res.UploadMbps, ipUp, pct(res.UploadMbps, ipUp)),
			fmt.Sprintf("%-12s idle median: ping %.3f ms, sqm icmp %.3f ms (%+.3f), sqm udp %.3f ms (%+.3f)", s.name,
				pMed, kind["icmp"], kind["icmp"]-pMed, kind["udp-be"], kind["udp-be"]-pMed),
			fmt.Sprintf("%-12s rrul loaded median: ping %.3f ms (%d samples), sqm icmp %.3f (%+.3f), udp-be %.3f (%+.3f), udp-ef %.3f, udp-bk %.3f",
				s.name, lpMed, len(loadedPing), loadedKind["icmp"], loadedKind["icmp"]-lpMed, loadedKind["udp-be"], loadedKind["udp-be"]-lpMed,
				loadedKind["udp-ef"], loadedKind["udp-bk"]),
			fmt.Sprintf("%-12s cpu (client+server, %% of one core): sqm %.1f%% averaged over down+up; iperf3 %.1f%% down, %.1f%% up",
				s.name, cpuPct, iperfCPU[0], iperfCPU[1]))
	}
	t.Logf("accuracy, %d s per load run, 4 streams:\n%s", secs, strings.Join(lines, "\n"))
}
