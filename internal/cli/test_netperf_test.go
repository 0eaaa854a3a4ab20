//go:build !sqm_notest

package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"sqm/internal/iperf3/iperf3test"
)

func TestTestNetPerfUsage(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want string
		code int
	}{
		{[]string{"test", "--netperf", "h", "h2"}, "--netperf names the load server; give no HOST[:PORT] argument too", 2},
		{[]string{"test", "--netperf", "h", "--iperf3", "h"}, "give one", 2},
		{[]string{"test", "--netperf", "h", "--mode", "idle"}, "needs no netperf server", 2},
		{[]string{"test", "--netperf", "h:99999"}, `netperf server "h:99999": port "99999" is not 1..65535`, 1},
		{[]string{"test", "--netperf", ":12865"}, "no host", 1},
	} {
		var out, errb bytes.Buffer
		code := run(context.Background(), &Env{Stdout: &out, Stderr: &errb, Getenv: os.Getenv}, tt.args)
		if code != tt.code || !strings.Contains(errb.String(), tt.want) {
			t.Errorf("%v: exit %d, stderr %q; want %d and %q", tt.args, code, errb.String(), tt.code, tt.want)
		}
	}
}

// serveNetserver starts Debian's netserver on loopback (extra: its
// flags, e.g. -Z) and waits until it accepts a connection.
func serveNetserver(t *testing.T, extra ...string) string {
	t.Helper()
	for _, bin := range []string{"netperf", "netserver"} {
		if _, err := exec.LookPath(bin); err != nil {
			t.Skipf("needs %s (Debian package netperf, in non-free; scripts/setup.sh installs it)", bin)
		}
	}
	port := iperf3test.FreePort(t)
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	srv := exec.Command("netserver", append([]string{"-D", "-4", "-L", "127.0.0.1", "-p", strconv.Itoa(port)}, extra...)...)
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Process.Kill(); srv.Wait() })
	for deadline := time.Now().Add(5 * time.Second); ; {
		c, err := net.Dial("tcp4", addr)
		if err == nil {
			c.Close()
			return addr
		}
		if time.Now().After(deadline) {
			t.Fatalf("netserver did not listen: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestTestNetPerf runs `sqm test --netperf` against Debian's netserver on
// loopback as a user would: an RRUL run writing a flent file and a plot,
// whose JSON names the servers and has the grade and RPM of any run; then
// against a netserver that wants a passphrase, without it (a clear
// refusal) and with it from the environment.
func TestTestNetPerf(t *testing.T) {
	addr := serveNetserver(t)
	dir := t.TempDir()
	flent, svg := filepath.Join(dir, "run.flent.gz"), filepath.Join(dir, "run.svg")
	args := []string{"test", "--netperf", addr, "--duration", "1s", "--idle", "300ms", "--interval", "50ms",
		"--json", "--quiet", "--flent", flent, "--plot", svg}
	var out, errb bytes.Buffer
	code := run(context.Background(), &Env{Stdout: &out, Stderr: &errb, Getenv: os.Getenv}, args)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	var res struct {
		Down    float64 `json:"download_mbps"`
		Up      float64 `json:"upload_mbps"`
		Grade   string  `json:"grade"`
		RPM     float64 `json:"rpm"`
		Servers struct {
			Load    string   `json:"load"`
			Latency []string `json:"latency"`
		} `json:"servers"`
		Streams []struct {
			Dir       string `json:"dir"`
			DSCP      int    `json:"dscp"`
			PeerBytes int64  `json:"peer_bytes"`
		} `json:"streams"`
	}
	if err := json.Unmarshal(out.Bytes(), &res); err != nil {
		t.Fatalf("--json: %v\n%s", err, out.String())
	}
	if res.Servers.Load != "netperf://"+addr || len(res.Servers.Latency) == 0 {
		t.Errorf("servers %+v; want load netperf://%s and a latency server", res.Servers, addr)
	}
	if len(res.Streams) != 8 || res.Down <= 0 || res.Up <= 0 || res.Grade == "" || res.Grade == "?" || res.RPM <= 0 {
		t.Errorf("%d streams, download %v, upload %v Mbit/s, grade %q, RPM %v; want 8 streams, goodput both ways, a grade and RPM",
			len(res.Streams), res.Down, res.Up, res.Grade, res.RPM)
	}
	for _, s := range res.Streams {
		if s.Dir == "up" && s.PeerBytes == 0 {
			t.Errorf("upload stream (DSCP %d) without the server's count", s.DSCP)
		}
	}
	for _, f := range []string{flent, svg} {
		if st, err := os.Stat(f); err != nil || st.Size() == 0 {
			t.Errorf("%s: %v", f, err)
		}
	}

	locked := serveNetserver(t, "-Z", "sesame")
	base := []string{"test", "--netperf", locked, "--mode", "speedtest", "--streams", "1", "--duration", "1s", "--idle", "0", "--quiet"}
	out.Reset()
	errb.Reset()
	code = run(context.Background(), &Env{Stdout: &out, Stderr: &errb, Getenv: func(string) string { return "" }}, base)
	if code == 0 || !strings.Contains(errb.String(), "closed the control connection") || !strings.Contains(errb.String(), "passphrase") {
		t.Errorf("without the passphrase: exit %d, stderr %q; want a refusal naming the passphrase", code, errb.String())
	}
	out.Reset()
	errb.Reset()
	env := func(k string) string {
		if k == serverSecretEnv {
			return "sesame"
		}
		return ""
	}
	code = run(context.Background(), &Env{Stdout: &out, Stderr: &errb, Getenv: env}, base)
	if code != 0 || !strings.Contains(out.String(), "Download:") {
		t.Errorf("with the passphrase: exit %d, stderr %q", code, errb.String())
	}
}
