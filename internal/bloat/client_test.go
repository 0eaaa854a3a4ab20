package bloat

import (
	"context"
	"net"
	"strings"
	"sync"
	"testing"
	"time"
)

// startServer runs a server on loopback and returns its address.
func startServer(t *testing.T, network, addr string, lim Limits) string {
	t.Helper()
	ln, err := net.Listen(network, addr)
	if err != nil {
		t.Skipf("no %s loopback: %v", network, err)
	}
	pc, err := net.ListenPacket("udp"+network[3:], ln.Addr().String())
	if err != nil {
		ln.Close()
		t.Fatalf("listen udp: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := NewServer(lim, t.Logf).Serve(ctx, ln, pc); err != nil {
			t.Errorf("Serve: %v", err)
		}
	}()
	t.Cleanup(func() { cancel(); wg.Wait() })
	return ln.Addr().String()
}

func TestRunLoopback(t *testing.T) {
	tests := []struct {
		name     string
		network  string
		addr     string
		mode     Mode
		streams  int
		wantDown bool
		wantUp   bool
		phases   []string
	}{
		{"rrul-v4", "tcp4", "127.0.0.1:0", ModeRRUL, 8, true, true, []string{"idle-before", "load", "idle-after"}},
		{"speedtest-v6", "tcp6", "[::1]:0", ModeSpeedtest, 4, true, true, []string{"idle-before", "download", "upload", "idle-after"}},
		{"idle-v4", "tcp4", "127.0.0.1:0", ModeIdle, 0, false, false, []string{"idle"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			addr := startServer(t, tt.network, tt.addr, Limits{})
			var progress int
			res, err := Run(context.Background(), Options{
				Addr: addr, Mode: tt.mode, Duration: time.Second, Idle: 300 * time.Millisecond,
				Interval: 50 * time.Millisecond, Streams: 2, Network: tt.network,
				Progress: func(Progress) { progress++ },
			})
			if err != nil {
				t.Fatal(err)
			}
			if got := len(res.Streams); got != tt.streams {
				t.Errorf("%d streams, want %d", got, tt.streams)
			}
			if (res.DownloadMbps > 10) != tt.wantDown || (res.UploadMbps > 10) != tt.wantUp {
				t.Errorf("goodput down %.1f up %.1f Mbit/s; want >10 down=%v up=%v", res.DownloadMbps, res.UploadMbps, tt.wantDown, tt.wantUp)
			}
			var names []string
			for _, p := range res.Phases {
				names = append(names, p.Name)
			}
			if len(names) != len(tt.phases) {
				t.Fatalf("phases %v, want %v", names, tt.phases)
			}
			for i := range names {
				if names[i] != tt.phases[i] {
					t.Errorf("phases %v, want %v", names, tt.phases)
				}
			}
			if res.Idle.Count < 5 || res.Idle.LossPct > 20 {
				t.Errorf("idle latency: %+v", res.Idle)
			}
			if tt.mode != ModeIdle && (res.Loaded.Count < 5 || res.Loaded.MedianMs <= 0) {
				t.Errorf("loaded latency: %+v", res.Loaded)
			}
			if res.Idle.MinMs <= 0 || res.Idle.MedianMs > 50 {
				t.Errorf("loopback idle latency implausible: %+v", res.Idle)
			}
			if len(res.Series.TS) < 10 || len(res.Series.TS) != len(res.Series.DownloadMbps) {
				t.Errorf("series: %d ticks, %d values", len(res.Series.TS), len(res.Series.DownloadMbps))
			}
			for _, s := range res.Streams {
				if len(s.MbpsSeries) != len(res.Series.TS) {
					t.Errorf("stream %s %s series has %d values, want %d", s.Dir, s.Label, len(s.MbpsSeries), len(res.Series.TS))
				}
				if s.Bytes == 0 {
					t.Errorf("stream %s %s moved no data", s.Dir, s.Label)
				}
			}
			for _, pk := range res.Probes {
				if strings.HasPrefix(pk.Kind, "udp") && (pk.ArrivedDSCPUp != pk.DSCP || pk.ArrivedDSCPDown != pk.DSCP) {
					t.Errorf("%s probes marked %d arrived as %d at the server and %d back", pk.Kind, pk.DSCP, pk.ArrivedDSCPUp, pk.ArrivedDSCPDown)
				}
			}
			if progress < 10 {
				t.Errorf("progress called %d times", progress)
			}
			if res.Grade == "" || res.RPM <= 0 {
				t.Errorf("grade %q rpm %v", res.Grade, res.RPM)
			}
			t.Logf("down %.0f up %.0f Mbit/s idle %.3f loaded %.3f ms grade %s rpm %.0f notes %q",
				res.DownloadMbps, res.UploadMbps, res.Idle.MedianMs, res.Loaded.MedianMs, res.Grade, res.RPM, res.Notes)
		})
	}
}
