package rpm_test

// The RPM server against clients that behave as the ones in the field do
// (goresponsiveness: a fresh connection per foreign probe, left open) and
// as hostile ones might (zero flow-control windows, many addresses in one
// /64), on loopback.

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/http2/hpack"

	"sqm/internal/rpm"
)

// serve starts rpm.Serve on a loopback port, its listener wrapped by wrap
// if given, and returns the address.
func serve(t *testing.T, o rpm.ServerOptions, wrap func(net.Listener) net.Listener) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	ln, err := rpm.Listen(ctx, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	if wrap != nil {
		ln = wrap(ln)
	}
	if o.Logf == nil {
		o.Logf = t.Logf
	}
	done := make(chan error, 1)
	go func() { done <- rpm.Serve(ctx, ln, o) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return addr
}

// h2Client is an HTTP/2-only client with a transport (so connections) of
// its own, as goresponsiveness makes one per load connection and per
// foreign probe.
func h2Client() *http.Client {
	tr := &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, Protocols: new(http.Protocols)}
	tr.Protocols.SetHTTP2(true)
	return &http.Client{Transport: tr}
}

// throttled reads or produces data in 16 KB steps at most every 5 ms, so
// that loopback load does not eat the machine's cores.
type throttled struct {
	n    *atomic.Int64
	stop <-chan struct{}
}

func (r throttled) Read(p []byte) (int, error) {
	select {
	case <-r.stop:
		return 0, io.EOF
	case <-time.After(5 * time.Millisecond):
	}
	p = p[:min(len(p), 16<<10)]
	clear(p)
	r.n.Add(int64(len(p)))
	return len(p), nil
}

// TestGoresponsivenessPattern plays goresponsiveness's way of testing
// against the server: load connections that stay (downloads first, then
// chunked uploads), while every foreign probe is a new TLS connection
// that the client never closes. Before connections past the per-address
// cap could take an idle one's place, probes beyond the 64th failed and
// the upload connections were refused ("0 parallel connections").
func TestGoresponsivenessPattern(t *testing.T) {
	addr := serve(t, rpm.ServerOptions{}, nil)
	base := "https://" + addr
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var errMu sync.Mutex
	var errs []string
	fail := func(format string, a ...any) {
		errMu.Lock()
		errs = append(errs, fmt.Sprintf(format, a...))
		errMu.Unlock()
	}
	const loads = 16
	var down [loads]atomic.Int64
	loadClients := make([]*http.Client, loads)
	for i := range loads {
		loadClients[i] = h2Client()
		resp, err := loadClients[i].Get(base + rpm.PathLarge)
		if err != nil {
			t.Fatalf("download %d: %v", i, err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer resp.Body.Close()
			buf := make([]byte, 16<<10)
			for {
				select {
				case <-stop:
					return
				case <-time.After(5 * time.Millisecond):
				}
				n, err := resp.Body.Read(buf)
				down[i].Add(int64(n))
				if err != nil {
					fail("download %d: %v", i, err)
					return
				}
			}
		}()
	}
	probe := func(c *http.Client, what string) {
		resp, err := c.Get(base + rpm.PathSmall)
		if err != nil {
			fail("%s: %v", what, err)
			return
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK || string(b) != "x" {
			fail("%s: %s %q %v", what, resp.Status, b, err)
		}
	}
	// Four times the per-address connection cap of foreign probes, each
	// on a connection of its own left open, with a self probe on a load
	// connection after each.
	for i := range 256 {
		probe(h2Client(), fmt.Sprintf("foreign probe %d", i))
		probe(loadClients[i%loads], fmt.Sprintf("self probe %d", i))
	}
	var up [loads]atomic.Int64
	upStop := make(chan struct{})
	for i := range loads {
		c := h2Client()
		wg.Add(1)
		go func() {
			defer wg.Done()
			// No length: the body goes chunked (DATA frames until
			// END_STREAM), as goresponsiveness's counting reader does.
			resp, err := c.Post(base+rpm.PathUpload, "application/octet-stream", io.NopCloser(throttled{&up[i], upStop}))
			if err != nil {
				fail("upload %d: %v", i, err)
				return
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				fail("upload %d: %s", i, resp.Status)
			}
		}()
		probe(h2Client(), fmt.Sprintf("foreign probe during uploads %d", i))
	}
	for i := range 64 {
		probe(h2Client(), fmt.Sprintf("foreign probe during uploads %d", loads+i))
	}
	// Wait until every upload has moved data before ending them.
	deadline := time.Now().Add(30 * time.Second)
	for i := 0; i < loads && time.Now().Before(deadline); {
		if up[i].Load() < 64<<10 {
			time.Sleep(10 * time.Millisecond)
			continue
		}
		i++
	}
	close(upStop)
	close(stop)
	wg.Wait()
	for i := range loads {
		if down[i].Load() == 0 || up[i].Load() < 64<<10 {
			t.Errorf("load connection %d moved %d bytes down, %d up", i, down[i].Load(), up[i].Load())
		}
	}
	if len(errs) > 0 {
		t.Errorf("%d failures, the first: %s", len(errs), strings.Join(errs[:min(len(errs), 5)], "; "))
	}
}

// fakePeers hands out connections that claim the next of addrs as their
// remote address, so the per-address rules can be tested on loopback.
type fakePeers struct {
	net.Listener
	addrs chan string
}

type fakePeerConn struct {
	net.Conn
	remote net.Addr
}

func (c fakePeerConn) RemoteAddr() net.Addr { return c.remote }

func (l *fakePeers) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	a, err := net.ResolveTCPAddr("tcp", <-l.addrs)
	if err != nil {
		c.Close()
		return nil, err
	}
	return fakePeerConn{c, a}, nil
}

// TestPerAddrIsPerSlash64 holds connections busy (a download each) from
// addresses inside one IPv6 /64: past the per-address cap they must be
// refused as one peer, while an address in the next /64 is served. Before
// the server counted IPv6 per /64 (peerkey), each address had a cap of
// its own.
func TestPerAddrIsPerSlash64(t *testing.T) {
	peers := &fakePeers{addrs: make(chan string, 1)}
	addr := serve(t, rpm.ServerOptions{PerAddr: 2}, func(ln net.Listener) net.Listener { peers.Listener = ln; return peers })
	download := func(from string) error {
		peers.addrs <- from
		c := h2Client()
		ctx, cancel := context.WithCancel(context.Background())
		t.Cleanup(cancel)
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+addr+rpm.PathLarge, nil)
		resp, err := c.Do(req)
		if err != nil {
			return err
		}
		t.Cleanup(func() { resp.Body.Close() })
		_, err = io.ReadFull(resp.Body, make([]byte, 1000))
		return err
	}
	for _, a := range []string{"[2001:db8:1:2::1]:1000", "[2001:db8:1:2:ffff::2]:1000"} {
		if err := download(a); err != nil {
			t.Fatalf("from %s: %v", a, err)
		}
	}
	if err := download("[2001:db8:1:2::3]:1000"); err == nil {
		t.Error("a third busy connection from one /64 was served with a cap of 2 per address")
	}
	if err := download("[2001:db8:1:3::1]:1000"); err != nil {
		t.Errorf("the next /64 was refused: %v", err)
	}
}

// h2Raw is a bare HTTP/2 connection for what no polite client does. The
// frame layer (RFC 9113 section 4) is written here rather than taken from
// golang.org/x/net/http2, which would pull x/text into go.mod for tests
// alone; header blocks use x/net's hpack.
type h2Raw struct {
	c  *tls.Conn
	hb bytes.Buffer
	he *hpack.Encoder
}

// Frame types and flags used here.
const (
	frData, frHeaders, frRST, frSettings, frPing, frGoAway = 0, 1, 3, 4, 6, 7
	flEndStream, flAck, flEndHeaders, flPadded, flPriority = 1, 1, 4, 8, 0x20
)

func (h *h2Raw) write(typ, flags byte, id uint32, payload []byte) error {
	n := len(payload)
	hdr := []byte{byte(n >> 16), byte(n >> 8), byte(n), typ, flags, byte(id >> 24), byte(id >> 16), byte(id >> 8), byte(id)}
	_, err := h.c.Write(append(hdr, payload...))
	return err
}

type frame struct {
	typ, flags byte
	id         uint32
	payload    []byte
}

func (h *h2Raw) read() (frame, error) {
	var hdr [9]byte
	if _, err := io.ReadFull(h.c, hdr[:]); err != nil {
		return frame{}, err
	}
	f := frame{typ: hdr[3], flags: hdr[4], id: binary.BigEndian.Uint32(hdr[5:]) & 0x7fffffff}
	f.payload = make([]byte, int(hdr[0])<<16|int(hdr[1])<<8|int(hdr[2]))
	_, err := io.ReadFull(h.c, f.payload)
	return f, err
}

// dialZeroWindow opens a TLS connection and says HTTP/2 with an initial
// stream window of 0: the server may send no DATA on any stream.
func dialZeroWindow(t *testing.T, addr string) *h2Raw {
	t.Helper()
	c, err := tls.Dial("tcp", addr, &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"h2"}})
	if err != nil {
		t.Fatal(err)
	}
	if p := c.ConnectionState().NegotiatedProtocol; p != "h2" {
		t.Fatalf("ALPN %q", p)
	}
	if _, err := io.WriteString(c, "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	h := &h2Raw{c: c}
	h.he = hpack.NewEncoder(&h.hb)
	// SETTINGS_INITIAL_WINDOW_SIZE (4) = 0
	if err := h.write(frSettings, 0, 0, []byte{0, 4, 0, 0, 0, 0}); err != nil {
		t.Fatal(err)
	}
	return h
}

// get opens stream id with a GET of path, ending the stream (no body).
func (h *h2Raw) get(id uint32, host, path string) error {
	h.hb.Reset()
	for _, f := range [][2]string{{":method", "GET"}, {":scheme", "https"}, {":authority", host}, {":path", path}} {
		h.he.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
	}
	return h.write(frHeaders, flEndStream|flEndHeaders, id, h.hb.Bytes())
}

// streams opens n zero-window GETs of path and reads frames until each
// has either its response headers (its handler is running, blocked on the
// window, or done) or a reset, and counts them by status. With untilReset
// it goes on until every stream is reset or ended, which only a server
// that times stalled streams out does.
func (h *h2Raw) streams(t *testing.T, n int, host, path string, untilReset bool) map[string]int {
	t.Helper()
	for i := range n {
		if err := h.get(uint32(2*i+1), host, path); err != nil {
			t.Fatal(err)
		}
	}
	got := map[string]int{}
	open := map[uint32]bool{}
	for i := range n {
		open[uint32(2*i+1)] = true
	}
	seen := map[uint32]bool{}
	dec := hpack.NewDecoder(4096, nil)
	for len(seen) < n || (untilReset && len(open) > 0) {
		f, err := h.read()
		if err != nil {
			t.Fatalf("reading frames (%d of %d streams answered, %d open): %v", len(seen), n, len(open), err)
		}
		switch f.typ {
		case frSettings:
			if f.flags&flAck == 0 {
				h.write(frSettings, flAck, 0, nil)
			}
		case frPing:
			if f.flags&flAck == 0 {
				h.write(frPing, flAck, 0, f.payload)
			}
		case frHeaders:
			p := f.payload
			if f.flags&flPadded != 0 {
				p = p[1 : len(p)-int(p[0])]
			}
			if f.flags&flPriority != 0 {
				p = p[5:]
			}
			status := "?"
			fields, err := dec.DecodeFull(p)
			if err != nil {
				t.Fatalf("HPACK: %v", err)
			}
			for _, hf := range fields {
				if hf.Name == ":status" {
					status = hf.Value
				}
			}
			got[status]++
			seen[f.id] = true
			if f.flags&flEndStream != 0 {
				delete(open, f.id)
			}
		case frData:
			if f.flags&flEndStream != 0 {
				delete(open, f.id)
			}
		case frRST:
			got[fmt.Sprintf("reset %d", binary.BigEndian.Uint32(f.payload))]++
			seen[f.id] = true
			delete(open, f.id)
		case frGoAway:
			t.Fatalf("GOAWAY (code %d) with %d of %d streams answered", binary.BigEndian.Uint32(f.payload[4:]), len(seen), n)
		}
	}
	return got
}

// TestZeroWindowStreamsTimeOut opens downloads whose window the client
// never opens: each must be reset once it has moved nothing for the stall
// limit (10 s), releasing its goroutine, instead of holding it until
// --max-duration (here 5 minutes).
func TestZeroWindowStreamsTimeOut(t *testing.T) {
	if testing.Short() {
		t.Skip("waits for the 10 s stall limit")
	}
	addr := serve(t, rpm.ServerOptions{MaxDuration: 5 * time.Minute}, nil)
	h := dialZeroWindow(t, addr)
	defer h.c.Close()
	// The test gives up well before MaxDuration: only a stall limit ends
	// the streams in time.
	h.c.SetReadDeadline(time.Now().Add(60 * time.Second))
	got := h.streams(t, 8, addr, rpm.PathLarge, true)
	if got["200"] != 8 || got["reset 2"] != 8 {
		t.Errorf("8 stalled downloads: %v; want each answered 200 then reset", got)
	}
	t.Logf("%v", got)
}

// TestRequestsPerAddr: four connections from one address opening 100
// zero-window requests each get at most the per-address limit of
// requests in progress (256) and 503s or resets for the rest, not 400
// parked handlers (each a goroutine holding its response).
func TestRequestsPerAddr(t *testing.T) {
	addr := serve(t, rpm.ServerOptions{}, nil)
	got := map[string]int{}
	for range 4 {
		h := dialZeroWindow(t, addr)
		defer h.c.Close()
		h.c.SetReadDeadline(time.Now().Add(30 * time.Second))
		for k, v := range h.streams(t, 100, addr, rpm.PathSmall, false) {
			got[k] += v
		}
	}
	if got["200"] > 256 || got["200"] == 0 || got["503"] == 0 {
		t.Errorf("4 x 100 zero-window requests from one address: %v; want at most 256 answered 200, the rest 503", got)
	}
	t.Logf("%v", got)
}

// TestFreshConnectionKept: at the per-address cap, a new connection takes
// the place of an idle one that has served a request, never of one that
// has not yet sent its first (net/http calls an HTTP/2 connection idle
// from its preface on). On a bloated link a new load connection's first
// request queues for a while; goresponsiveness's foreign probes, a new
// connection each, used to evict it in that time, and its uploads never
// started ("0 parallel connections").
func TestFreshConnectionKept(t *testing.T) {
	peers := &fakePeers{addrs: make(chan string, 1)}
	addr := serve(t, rpm.ServerOptions{PerAddr: 2}, func(ln net.Listener) net.Listener { peers.Listener = ln; return peers })
	const from = "192.0.2.9:1000"
	peers.addrs <- from
	used := h2Client() // A: one request, then idle
	resp, err := used.Get("https://" + addr + rpm.PathSmall)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	peers.addrs <- from
	fresh := dialZeroWindow(t, addr) // B: preface, no request yet
	defer fresh.c.Close()
	fresh.c.SetReadDeadline(time.Now().Add(30 * time.Second))
	// The server has B once it answers B's settings.
	if f, err := fresh.read(); err != nil || f.typ != frSettings {
		t.Fatalf("no settings from the server: %v %v", f, err)
	}
	peers.addrs <- from
	probe := h2Client() // C: takes A's place
	resp, err = probe.Get("https://" + addr + rpm.PathSmall)
	if err != nil {
		t.Fatalf("a connection past the cap with an idle used one to replace: %v", err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	peers.addrs <- from
	if c, err := tls.Dial("tcp", addr, &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"h2"}}); err == nil {
		// D: C is idle and used now, so D may take its place; what
		// must not happen is B being closed.
		c.Close()
	}
	got := fresh.streams(t, 1, addr, rpm.PathSmall, false)
	if got["200"] != 1 {
		t.Errorf("the connection that had not sent its first request yet: %v; want it served", got)
	}
}
