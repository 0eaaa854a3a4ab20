//go:build !sqm_notest

package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"sqm/internal/iperf3"
	"sqm/internal/iperf3/iperf3test"
)

func TestTestIPerf3Usage(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want string
		code int
	}{
		{[]string{"test", "--iperf3", "h", "h2"}, "give no HOST[:PORT] argument too", 2},
		{[]string{"test", "--iperf3", "h", "--secret", "s"}, "--secret is for an 'sqm server'", 2},
		{[]string{"test", "--iperf3", "h", "--mode", "idle"}, "needs no iperf3 server", 2},
		{[]string{"test", "--iperf3", "h:99999"}, `port "99999" is not 1..65535`, 1},
		{[]string{"test", "--iperf3", ":5201"}, "no host", 1},
	} {
		var out, errb bytes.Buffer
		code := run(context.Background(), &Env{Stdout: &out, Stderr: &errb, Getenv: os.Getenv}, tt.args)
		if code != tt.code || !strings.Contains(errb.String(), tt.want) {
			t.Errorf("%v: exit %d, stderr %q; want %d and %q", tt.args, code, errb.String(), tt.code, tt.want)
		}
	}
}

// TestTestIPerf3 runs `sqm test --iperf3` against Debian's iperf3 server on
// loopback: a speedtest whose JSON names the servers, then a run while
// another client holds the server, which must fail saying it is busy.
func TestTestIPerf3(t *testing.T) {
	iperf3test.Require(t)
	port := iperf3test.FreePort(t)
	addr := iperf3test.Serve(t, nil, "127.0.0.1", port)
	args := []string{"test", "--iperf3", addr, "--mode", "speedtest", "--streams", "2", "--duration", "1s", "--idle", "300ms",
		"--interval", "50ms", "--json", "--quiet"}
	var out, errb bytes.Buffer
	code := run(context.Background(), &Env{Stdout: &out, Stderr: &errb, Getenv: os.Getenv}, args)
	if code != 0 && strings.Contains(errb.String(), "ICMP is unavailable") {
		t.Skipf("no ICMP here (not root, no ping_group_range), and an iperf3 host answers nothing else: %s", errb.String())
	}
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	var res struct {
		Down    float64 `json:"download_mbps"`
		Up      float64 `json:"upload_mbps"`
		Servers struct {
			Load    string   `json:"load"`
			Latency []string `json:"latency"`
		} `json:"servers"`
		Streams []struct {
			Dir       string `json:"dir"`
			PeerBytes int64  `json:"peer_bytes"`
		} `json:"streams"`
	}
	if err := json.Unmarshal(out.Bytes(), &res); err != nil {
		t.Fatalf("--json: %v\n%s", err, out.String())
	}
	if res.Servers.Load != "iperf3://"+addr || len(res.Servers.Latency) != 1 || res.Servers.Latency[0] != "icmp://127.0.0.1" {
		t.Errorf("servers %+v; want load iperf3://%s, latency icmp://127.0.0.1", res.Servers, addr)
	}
	if len(res.Streams) != 4 || res.Down <= 0 || res.Up <= 0 {
		t.Errorf("%d streams, download %v, upload %v Mbit/s; want 4 streams and goodput both ways", len(res.Streams), res.Down, res.Up)
	}

	cfg := iperf3.Config{Direction: iperf3.Download, Streams: 1, Duration: 5 * time.Second,
		Settle: 2 * time.Second,
		Dial: func(ctx context.Context, _ int, _ bool) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		}}
	hold, err := iperf3.Start(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer hold.Close()
	go io.Copy(io.Discard, hold.Streams[0].Conn)
	out.Reset()
	errb.Reset()
	code = run(context.Background(), &Env{Stdout: &out, Stderr: &errb, Getenv: os.Getenv}, args)
	if code != 1 || !strings.Contains(errb.String(), "server busy") || !strings.Contains(errb.String(), "download phase") {
		t.Errorf("while another test runs: exit %d, stderr %q; want 1 and a busy server in the download phase", code, errb.String())
	}
	if _, err := hold.End(context.Background(), time.Second, []int64{0}); err != nil {
		t.Fatal(err)
	}

	// Interrupted during the download phase, the run lets go of the server:
	// a control connection left open (a leak) would keep it busy for the
	// test's time plus its 40 s grace.
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(800*time.Millisecond, cancel)
	errb.Reset()
	code = run(ctx, &Env{Stdout: &out, Stderr: &errb, Getenv: os.Getenv}, args)
	if code == 0 || !strings.Contains(errb.String(), "interrupted") {
		t.Errorf("interrupted run: exit %d, stderr %q", code, errb.String())
	}
	next, err := iperf3.Start(context.Background(), cfg)
	if err != nil {
		t.Fatalf("the server is not free after an interrupted run: %v", err)
	}
	next.Close()
}
