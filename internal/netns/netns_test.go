package netns

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"sqm/internal/testutil"
)

func TestUnique(t *testing.T) {
	a, b := Unique("x"), Unique("x")
	if a == b || !strings.HasPrefix(a, fmt.Sprintf("x-%d-", os.Getpid())) {
		t.Errorf("Unique gave %q and %q", a, b)
	}
}

func TestBadInput(t *testing.T) {
	for _, name := range []string{"", "a/b", ".."} {
		if _, err := New(name); err == nil {
			t.Errorf("New(%q): want error", name)
		}
	}
	n := &NS{name: "x", fd: -1}
	if err := n.AddRoute("nonsense", "", "eth0"); err == nil {
		t.Error("AddRoute(nonsense): want error")
	}
	if err := n.AddRoute("10.0.0.0/8", "fd00::1", ""); err == nil || !strings.Contains(err.Error(), "mixes") {
		t.Errorf("AddRoute mixing families: err = %v", err)
	}
	if err := n.AddAddr("eth0", "10.0.0.1"); err == nil {
		t.Error("AddAddr without prefix length: want error")
	}
	if err := n.Do(func() error { return nil }); err == nil {
		t.Error("Do on a closed namespace: want error")
	}
}

func TestNewAndClose(t *testing.T) {
	testutil.RequireRoot(t)
	n, err := NewUnique("sqmtest")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := New(n.Name()); err == nil || !strings.Contains(err.Error(), "already exists") {
		t.Errorf("second New(%s): err = %v, want 'already exists'", n.Name(), err)
	}
	// iproute2 sees it and can run commands in it.
	if ip, err := exec.LookPath("ip"); err == nil {
		out, err := exec.Command(ip, "netns", "exec", n.Name(), "ip", "-o", "link", "show").CombinedOutput()
		if err != nil || !strings.Contains(string(out), "lo:") || strings.Count(string(out), "\n") != 1 {
			t.Errorf("ip netns exec %s ip link: %v: %s", n.Name(), err, out)
		}
	}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(n.Path()); !os.IsNotExist(err) {
		t.Errorf("%s still exists after Close: %v", n.Path(), err)
	}
	if err := n.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

// nsInode is the namespace identity as /proc/PID/ns/net shows it.
func nsInode(t *testing.T, path string) string {
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("net:[%d]", st.Ino)
}

func TestStartInside(t *testing.T) {
	testutil.RequireRoot(t)
	n := NewT(t, "sqmtest")
	out, err := n.Output(exec.Command("readlink", "/proc/self/ns/net"))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := strings.TrimSpace(string(out)), nsInode(t, n.Path()); got != want {
		t.Errorf("child runs in %s, want %s", got, want)
	}
	// The calling goroutine's own namespace is untouched.
	self, _ := os.Readlink("/proc/thread-self/ns/net")
	if self == nsInode(t, n.Path()) {
		t.Error("caller's thread was left inside the namespace")
	}
	_, err = n.Output(exec.Command("sh", "-c", "echo oops >&2; exit 3"))
	if err == nil || !strings.Contains(err.Error(), "oops") {
		t.Errorf("failing command: err = %v, want stderr in it", err)
	}
	cmd := exec.Command("true")
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := n.Start(cmd); err == nil {
		t.Error("Pdeathsig: want error")
	}
}

// TestTopology builds client -- router -- server with IPv4 and IPv6,
// routes and forwarding, and moves TCP data end to end through the router.
func TestTopology(t *testing.T) {
	testutil.RequireRoot(t)
	topology(t)
}

// TestVMTopology runs the same inside the VM, where the lab and the
// measurement tests build their namespaces.
func TestVMTopology(t *testing.T) {
	testutil.RequireVM(t)
	topology(t)
}

func topology(t *testing.T) {
	client, router, server := NewT(t, "sqmc"), NewT(t, "sqmr"), NewT(t, "sqms")
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	// Sysctls first: links copy conf/default when they are created.
	must(router.Router())
	for _, ns := range []*NS{client, server} {
		must(ns.SetSysctl("net.ipv6.conf.default.accept_dad", "0"))
	}
	must(client.Veth("c0", router, "r0"))
	must(router.Veth("r1", server, "s0"))
	must(client.AddAddr("c0", "10.9.1.2/24"))
	must(client.AddAddr("c0", "fd00:9:1::2/64"))
	must(router.AddAddr("r0", "10.9.1.1/24"))
	must(router.AddAddr("r0", "fd00:9:1::1/64"))
	must(router.AddAddr("r1", "10.9.2.1/24"))
	must(router.AddAddr("r1", "fd00:9:2::1/64"))
	must(server.AddAddr("s0", "10.9.2.2/24"))
	must(server.AddAddr("s0", "fd00:9:2::2/64"))
	// Offloads off before the links go up: switching them on an up veth
	// resets it and delays the first IPv6 packets by about a second.
	for _, dev := range []string{"r0", "r1"} {
		must(router.DisableOffloads(dev))
		for _, o := range []Offload{TSO, GSO, GRO} {
			on, err := router.OffloadOn(dev, o)
			must(err)
			if on {
				t.Errorf("%s %s still on after DisableOffloads", dev, o)
			}
		}
	}
	must(client.Up("lo", "c0"))
	must(router.Up("lo", "r0", "r1"))
	must(server.Up("lo", "s0"))
	// Without this the first IPv6 packet waits about 1 s for neighbour
	// discovery while the link-local addresses are still tentative.
	for ns, links := range map[*NS][]string{client: {"c0"}, router: {"r0", "r1"}, server: {"s0"}} {
		for _, l := range links {
			must(ns.WaitReady(l, 5*time.Second))
		}
	}
	must(client.AddRoute("default", "10.9.1.1", ""))
	must(client.AddRoute("default", "fd00:9:1::1", "c0"))
	must(server.AddRoute("10.9.1.0/24", "10.9.2.1", "s0"))
	must(server.AddRoute("fd00:9:1::/64", "fd00:9:2::1", ""))
	if v, err := router.Sysctl("net.ipv4.ip_forward"); err != nil || v != "1" {
		t.Errorf("router ip_forward = %q, %v", v, err)
	}
	if v, err := client.Sysctl("net.ipv4.ip_forward"); err != nil || v != "0" {
		t.Errorf("client ip_forward = %q, %v (sysctl leaked out of the router?)", v, err)
	}

	for _, addr := range []string{"10.9.2.2", "fd00:9:2::2"} {
		t.Run(addr, func(t *testing.T) {
			var ln net.Listener
			must(server.Do(func() (err error) {
				ln, err = net.Listen("tcp", net.JoinHostPort(addr, "0"))
				return err
			}))
			defer ln.Close()
			got := make(chan string, 1)
			go func() {
				c, err := ln.Accept()
				if err != nil {
					got <- err.Error()
					return
				}
				defer c.Close()
				b, _ := io.ReadAll(c)
				got <- string(b) + " from " + c.RemoteAddr().(*net.TCPAddr).IP.String()
			}()
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			var conn net.Conn
			start := time.Now()
			must(client.Do(func() (err error) {
				conn, err = (&net.Dialer{}).DialContext(ctx, "tcp", ln.Addr().String())
				return err
			}))
			conn.Write([]byte("hello"))
			conn.Close()
			want := "hello from 10.9.1.2"
			if strings.Contains(addr, ":") {
				want = "hello from fd00:9:1::2"
			}
			// Logged, not asserted: timing depends on the machine's load.
			// Over a second here means the first packets waited (links or
			// addresses not ready).
			t.Logf("connect took %v", time.Since(start))
			select {
			case g := <-got:
				if g != want {
					t.Errorf("server got %q, want %q", g, want)
				}
			case <-ctx.Done():
				t.Fatal("timeout waiting for the server")
			}
		})
	}
}
