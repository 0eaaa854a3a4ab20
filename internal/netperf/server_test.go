package netperf_test

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"sqm/internal/bloat"
	"sqm/internal/netperf"
	"sqm/internal/testutil"
)

// needTools skips unless each tool is in PATH.
func needTools(t *testing.T, tools ...string) {
	t.Helper()
	for _, tool := range tools {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("needs %s (scripts/setup.sh installs it): %v", tool, err)
		}
	}
}

// loopServer runs a netperf server on 127.0.0.1 sharing the admission of a
// bufferbloat server with lim, until the test ends; it returns the port
// and the bufferbloat server (the Gate).
func loopServer(t *testing.T, lim bloat.Limits) (*netperf.Server, *bloat.Server, int) {
	t.Helper()
	gate := bloat.NewServer(lim, t.Logf)
	lim = gate.Limits()
	s := netperf.NewServer(netperf.ServerConfig{Gate: gate, MaxDuration: lim.MaxDuration, MaxTests: lim.MaxStreams,
		HandshakeTimeout: lim.HandshakeTimeout, Secret: lim.Secret, SetDSCP: bloat.SetDSCP})
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
		if !s.Idle() {
			t.Error("the server still holds a run after Serve returned")
		}
	})
	return s, gate, ln.Addr().(*net.TCPAddr).Port
}

// runNetperf runs Debian's netperf against port with -k output and
// returns its keys, or its combined output and error.
func runNetperf(t *testing.T, port int, args ...string) (map[string]string, string, error) {
	t.Helper()
	cmd := exec.Command("netperf", append([]string{"-P", "0", "-v", "0", "-4", "-H", "127.0.0.1", "-p", strconv.Itoa(port)}, args...)...)
	out, err := cmd.CombinedOutput()
	kv := map[string]string{}
	for _, line := range strings.Split(string(out), "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), "="); ok {
			kv[k] = v
		}
	}
	return kv, string(out), err
}

const keys = "THROUGHPUT,ELAPSED_TIME,LOCAL_BYTES_SENT,LOCAL_BYTES_RECVD,REMOTE_BYTES_SENT,REMOTE_BYTES_RECVD,TRANSACTION_RATE,REMOTE_SOCKET_TOS,REMOTE_CONG_CONTROL"

// TestServerNetperfClient runs each test kind the server serves with
// Debian's netperf on loopback: what the server says it received or sent
// must be what the client sent or received, to the byte for TCP.
func TestServerNetperfClient(t *testing.T) {
	needTools(t, "netperf")
	s, gate, port := loopServer(t, bloat.Limits{})
	// The client stops counting at its own clock: in a TCP_MAERTS the
	// server has sent more, up to what the socket buffers hold (tcp_wmem
	// and tcp_rmem allow 4 and 6 MiB; 32 MiB is loose), and in an RR test
	// its last answer may arrive after the client stopped. In a
	// TCP_STREAM the server may count up to one send more than the
	// client, whose last send the timer interrupted after it had
	// queued part of it (netperf then does not count it; up to 13 KB of
	// 16 KB sends seen).
	for _, tc := range []struct {
		test string
		// counters of one direction's two ends: the first may be up
		// to slack bytes more than the second, never less
		pairs []pair
	}{
		{"TCP_STREAM", []pair{{"REMOTE_BYTES_RECVD", "LOCAL_BYTES_SENT", 64 << 10}}},
		{"TCP_MAERTS", []pair{{"REMOTE_BYTES_SENT", "LOCAL_BYTES_RECVD", 32 << 20}}},
		{"TCP_RR", []pair{{"LOCAL_BYTES_SENT", "REMOTE_BYTES_RECVD", 1}, {"REMOTE_BYTES_SENT", "LOCAL_BYTES_RECVD", 1}}},
		{"UDP_RR", []pair{{"LOCAL_BYTES_SENT", "REMOTE_BYTES_RECVD", 1}, {"REMOTE_BYTES_SENT", "LOCAL_BYTES_RECVD", 1}}},
	} {
		t.Run(tc.test, func(t *testing.T) {
			kv, out, err := runNetperf(t, port, "-Y", "CS1,CS1", "-t", tc.test, "-l", "1", "--", "-k", keys)
			if err != nil {
				t.Fatalf("netperf: %v\n%s", err, out)
			}
			for _, p := range tc.pairs {
				hi, _ := strconv.ParseUint(kv[p.hi], 10, 64)
				lo, _ := strconv.ParseUint(kv[p.lo], 10, 64)
				if lo == 0 || hi < lo || hi-lo > p.slack {
					t.Errorf("%s=%q, %s=%q: want the second non-zero and at most %d bytes less than the first\n%s",
						p.hi, kv[p.hi], p.lo, kv[p.lo], p.slack, out)
				}
			}
			// -Y CS1: the server marks its data socket with DSCP 8,
			// TOS 0x20, and says so.
			if kv["REMOTE_SOCKET_TOS"] != "0x20" {
				t.Errorf("REMOTE_SOCKET_TOS=%q, want 0x20\n%s", kv["REMOTE_SOCKET_TOS"], out)
			}
			// qemu-user (make bigendian) does not translate
			// getsockopt(TCP_CONGESTION): the server reads nothing there.
			if tc.test != "UDP_RR" && kv["REMOTE_CONG_CONTROL"] == "" && os.Getenv(testutil.QEMUUserEnv) != "1" {
				t.Errorf("no REMOTE_CONG_CONTROL\n%s", out)
			}
		})
	}
	// Every run over, the address's session slot is free again.
	end, why := gate.AdmitSession(context.Background(), netip.MustParseAddr("127.0.0.1"), time.Now())
	if why != "" {
		t.Fatalf("after the tests, a session for 127.0.0.1 is refused: %s", why)
	}
	end()
	if !s.Idle() {
		t.Error("the server holds a run after its tests ended")
	}
}

type pair struct {
	hi, lo string
	slack  uint64
}

// TestServerNetperfRefusals checks what a stock netperf client is told:
// the errno it prints for each refusal.
func TestServerNetperfRefusals(t *testing.T) {
	needTools(t, "netperf")
	const secret = "correct horse"
	_, _, port := loopServer(t, bloat.Limits{Secret: secret, MaxDuration: 3 * time.Second})
	pass := netperf.Passphrase(secret)
	for _, tc := range []struct {
		name string
		args []string
		want string // in the output; "" for a test that runs
	}{
		{"no passphrase", []string{"-l", "1"}, "remote error 13"},
		{"wrong passphrase", []string{"-Z", "x" + pass[1:], "-l", "1"}, "remote error 13"},
		{"the secret itself", []string{"-Z", secret, "-l", "1"}, "remote error 13"},
		{"over max duration", []string{"-Z", pass, "-l", "5"}, "remote error 22"},
		{"by byte count", []string{"-Z", pass, "-l", "-100000"}, "remote error 22"},
		{"connection test", []string{"-Z", pass, "-t", "TCP_CRR", "-l", "1"}, "remote error 93"},
		{"UDP_STREAM", []string{"-Z", pass, "-t", "UDP_STREAM", "-l", "1"}, "remote error 93"},
		{"passphrase", []string{"-Z", pass, "-l", "1"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			kv, out, err := runNetperf(t, port, append(tc.args, "--", "-k", keys)...)
			if tc.want == "" {
				if n, _ := strconv.ParseUint(kv["REMOTE_BYTES_RECVD"], 10, 64); err != nil || n == 0 {
					t.Fatalf("netperf %v: %v\n%s", tc.args, err, out)
				}
				return
			}
			if err == nil || !strings.Contains(out, tc.want) {
				t.Fatalf("netperf %v: %v, want a failure saying %q:\n%s", tc.args, err, tc.want, out)
			}
		})
	}
}

// request sends an omni request on a new control connection from local
// (an address of lo) and returns the connection and the response.
func request(t *testing.T, port int, local string, r netperf.OmniRequest) (net.Conn, netperf.Message) {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(local)}, Timeout: 5 * time.Second}
	c, err := d.Dial("tcp4", "127.0.0.1:"+strconv.Itoa(port))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	m, err := r.Message()
	if err != nil {
		t.Fatal(err)
	}
	c.SetDeadline(time.Now().Add(5 * time.Second))
	if err := netperf.WriteMessage(c, &m); err != nil {
		t.Fatal(err)
	}
	resp, err := netperf.ReadMessage(c)
	if err != nil {
		t.Fatalf("reading the response: %v", err)
	}
	return c, resp
}

// streamRequest is what netperf -t TCP_STREAM -l secs asks for.
func streamRequest(secs int32) netperf.OmniRequest {
	return netperf.OmniRequest{SendBufSize: -1, SendSize: -1, RequestSize: -1, RecvBufSize: -1, RecvSize: -1, ResponseSize: -1,
		TestLength: secs, Family: netperf.FamilyInet, SocketType: netperf.SockStream, Protocol: netperf.ProtoTCP,
		Direction: netperf.DirRecv, SocketPrio: -1, SocketTOS: -1}
}

// TestServerDataSocketPeerOnly: a test's data port takes a connection
// only from the control connection's address; another address is closed
// at once and does not take the test's place.
func TestServerDataSocketPeerOnly(t *testing.T) {
	needLoopbackAliases(t)
	_, _, port := loopServer(t, bloat.Limits{})
	c, resp := request(t, port, "127.0.0.1", streamRequest(2))
	if resp.Errno() != 0 {
		t.Fatalf("refused: errno %d", resp.Errno())
	}
	r, err := netperf.DecodeOmniResponse(&resp)
	if err != nil {
		t.Fatal(err)
	}
	data := "127.0.0.1:" + strconv.Itoa(int(r.DataPort))
	// A stranger (127.0.0.2, another address of lo) connects first.
	sd := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.2")}}
	s, err := sd.Dial("tcp4", data)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	s.SetReadDeadline(time.Now().Add(3 * time.Second))
	if n, err := s.Read(make([]byte, 1)); n != 0 || isTimeout(err) {
		t.Fatalf("a stranger's data connection: read %d, %v; want it closed at once", n, err)
	}
	d, err := net.Dial("tcp4", data)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	payload := bytes.Repeat([]byte("sqm"), 1<<18)
	if _, err := d.Write(payload); err != nil {
		t.Fatal(err)
	}
	d.(*net.TCPConn).CloseWrite()
	d.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.Copy(io.Discard, d); err != nil {
		t.Fatalf("waiting for the server's close: %v", err)
	}
	c.SetDeadline(time.Now().Add(5 * time.Second))
	m, err := netperf.ReadMessage(c)
	if err != nil {
		t.Fatal(err)
	}
	res, err := netperf.DecodeOmniResults(&m)
	if err != nil || m.Errno() != 0 {
		t.Fatalf("results: errno %d, %v", m.Errno(), err)
	}
	if res.BytesReceived != uint64(len(payload)) {
		t.Errorf("the server received %d bytes, the client sent %d", res.BytesReceived, len(payload))
	}
}

// needLoopbackAliases skips where 127.0.0.2 and .3 are not addresses of
// lo (Linux has all of 127/8 there; macOS and the BSDs only 127.0.0.1).
func needLoopbackAliases(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("needs 127.0.0.2 and 127.0.0.3 on lo, as Linux has them, to play a second address")
	}
}

func isTimeout(err error) bool {
	ne, ok := err.(net.Error)
	return ok && ne.Timeout()
}

// TestServerSharesLimits: a netperf run holds one of the bufferbloat
// server's session slots for its address, its tests count against
// MaxStreams, and other addresses are refused while the slots are taken.
func TestServerSharesLimits(t *testing.T) {
	needLoopbackAliases(t)
	_, gate, port := loopServer(t, bloat.Limits{MaxClients: 1, MaxStreams: 2})
	busy := int32(16) // EBUSY in Linux's generic numbering, which the server sends on every arch
	c1, r1 := request(t, port, "127.0.0.1", streamRequest(30))
	c2, r2 := request(t, port, "127.0.0.1", streamRequest(30))
	if r1.Errno() != 0 || r2.Errno() != 0 {
		t.Fatalf("the first two tests of an address: errno %d and %d, want both run", r1.Errno(), r2.Errno())
	}
	if _, r := request(t, port, "127.0.0.1", streamRequest(30)); r.Errno() != busy {
		t.Errorf("a third test at once (limit 2): errno %d, want EBUSY (%d)", r.Errno(), busy)
	}
	if _, r := request(t, port, "127.0.0.2", streamRequest(1)); r.Errno() != busy {
		t.Errorf("another address while the only slot is taken: errno %d, want EBUSY (%d)", r.Errno(), busy)
	}
	other := netip.MustParseAddr("127.0.0.3")
	if end, why := gate.AdmitSession(context.Background(), other, time.Now()); why == "" {
		end()
		t.Fatal("an sqm test session was admitted while a netperf run holds the only slot")
	}
	// A test ends when its control connection closes (netperf killed);
	// the run, and its slot, when the last one does.
	c1.Close()
	time.Sleep(200 * time.Millisecond)
	if end, why := gate.AdmitSession(context.Background(), other, time.Now()); why == "" {
		end()
		t.Fatal("the slot came free while one of the run's tests still runs")
	}
	c2.Close()
	deadline := time.Now().Add(5 * time.Second)
	for {
		end, why := gate.AdmitSession(context.Background(), other, time.Now())
		if why == "" {
			end()
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("5 s after the run's last test ended, another address is still refused: %s", why)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
