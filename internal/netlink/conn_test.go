//go:build linux

package netlink

import (
	"encoding/binary"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"sqm/internal/netns"
	"sqm/internal/nlattr"
	"sqm/internal/testutil"
)

func dial(t *testing.T, cfg Config) *Conn {
	t.Helper()
	c, err := Dial(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// linkNames decodes the IFLA_IFNAME of RTM_NEWLINK replies.
func linkNames(t *testing.T, msgs []Message) []string {
	t.Helper()
	var names []string
	for _, m := range msgs {
		if m.Header.Type != unix.RTM_NEWLINK || len(m.Data) < 16 {
			t.Fatalf("reply type %d of %d bytes, not a link", m.Header.Type, len(m.Data))
		}
		ad := nlattr.NewDecoder(m.Data[16:])
		for ad.Next() {
			if ad.Type() == unix.IFLA_IFNAME {
				names = append(names, ad.String())
			}
		}
		if err := ad.Err(); err != nil {
			t.Fatal(err)
		}
	}
	return names
}

func getLink(index int32) Message {
	b := make([]byte, 16) // struct ifinfomsg
	binary.NativeEndian.PutUint32(b[4:], uint32(index))
	return Message{Header: Header{Type: unix.RTM_GETLINK}, Data: b}
}

// TestReceiveUnblocksOnClose: the link watcher stops by closing its
// socket from another goroutine while Receive waits in the kernel. With
// a blocking descriptor (no poller) the reader would stay blocked.
func TestReceiveUnblocksOnClose(t *testing.T) {
	c, err := Dial(Config{})
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	go func() {
		_, err := c.Receive()
		got <- err
	}()
	time.Sleep(50 * time.Millisecond) // let it block
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-got:
		if !errors.Is(err, ErrClosed) || !errors.Is(err, os.ErrClosed) {
			t.Errorf("Receive after Close: %v, want ErrClosed", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Receive still blocked 5 s after Close")
	}
	if err := c.Close(); !errors.Is(err, ErrClosed) {
		t.Errorf("second Close: %v, want ErrClosed", err)
	}
}

// TestReadDeadline: a Receive with nothing to read ends at the deadline,
// and the Conn works again once the deadline is lifted.
func TestReadDeadline(t *testing.T) {
	c := dial(t, Config{})
	start := time.Now()
	if err := c.SetReadDeadline(start.Add(100 * time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	_, err := c.Receive()
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("Receive: %v, want os.ErrDeadlineExceeded", err)
	}
	if d := time.Since(start); d < 90*time.Millisecond || d > 3*time.Second {
		t.Errorf("Receive returned after %v, want about 100ms", d)
	}
	if err := c.SetReadDeadline(time.Time{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Execute(getLink(1)); err != nil {
		t.Errorf("Execute after the deadline is lifted: %v", err)
	}
}

// TestExecuteHost dumps and looks up links on the host kernel; no
// privileges needed.
func TestExecuteHost(t *testing.T) {
	testutil.RequireHostReplies(t)
	c := dial(t, Config{})
	all, err := c.Execute(Message{Header: Header{Type: unix.RTM_GETLINK, Flags: Dump}, Data: make([]byte, 16)})
	if err != nil {
		t.Fatal(err)
	}
	names := linkNames(t, all)
	if len(names) == 0 || names[0] != "lo" {
		t.Errorf("link dump: %q, want lo first", names)
	}
	one, err := c.Execute(getLink(1))
	if err != nil {
		t.Fatal(err)
	}
	if n := linkNames(t, one); len(n) != 1 || n[0] != "lo" {
		t.Errorf("link 1: %q, want lo", n)
	}
	_, err = c.Execute(getLink(0x7ffffff0))
	if !errors.Is(err, unix.ENODEV) {
		t.Errorf("a missing link: %v, want ENODEV", err)
	}
}

// TestStaleRepliesSkipped: a dump whose replies nobody read (a caller
// that gave up on it) must not be taken for the next request's answer.
// Without the sequence check the next Execute returns the dump instead
// of the one link asked for.
func TestStaleRepliesSkipped(t *testing.T) {
	c := dial(t, Config{})
	all, err := c.Execute(Message{Header: Header{Type: unix.RTM_GETLINK, Flags: Dump}, Data: make([]byte, 16)})
	if err != nil {
		t.Fatal(err)
	}
	want := int32(binary.NativeEndian.Uint32(all[len(all)-1].Data[4:]))
	if _, err := c.send(Message{Header: Header{Type: unix.RTM_GETLINK, Flags: Dump}, Data: make([]byte, 16)}); err != nil {
		t.Fatal(err)
	}
	got, err := c.Execute(getLink(want))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || int32(binary.NativeEndian.Uint32(got[0].Data[4:])) != want {
		t.Fatalf("Execute after an unread dump gave %d messages, the first of ifindex %d; want one, of ifindex %d",
			len(got), int32(binary.NativeEndian.Uint32(got[0].Data[4:])), want)
	}
	if got[0].Header.Sequence != c.seq || got[0].Header.PID != c.port {
		t.Errorf("reply seq %d port %d, request %d port %d", got[0].Header.Sequence, got[0].Header.PID, c.seq, c.port)
	}
}

// TestLargeReplyWhole: with NETLINK_CAP_ACK off, an error echoes the
// whole request, here 40 KB, more than a page or the 32 KB of a dump's
// datagram; recv's buffer reads it whole, and the extended ack after the
// echo names the refused attribute's offset. Needs no privileges: a
// GETLINK with an over-long IFLA_IFALIAS fails validation.
//
// With a buffer too small for it (small), the reply is lost and the
// error says so; the buffer then grows, and the same request read again
// gets its whole reply.
func TestLargeReplyWhole(t *testing.T) {
	for _, small := range []bool{false, true} {
		t.Run(map[bool]string{false: "buffer", true: "small"}[small], func(t *testing.T) { testLargeReply(t, small) })
	}
}

func testLargeReply(t *testing.T, small bool) {
	c := dial(t, Config{})
	if small {
		c.rbuf = make([]byte, 4096)
	}
	if err := c.rc.Control(func(fd uintptr) {
		if err := unix.SetsockoptInt(int(fd), unix.SOL_NETLINK, unix.NETLINK_CAP_ACK, 0); err != nil {
			t.Fatal(err)
		}
	}); err != nil {
		t.Fatal(err)
	}
	data := append(make([]byte, 16), nlattr.Str(unix.IFLA_IFNAME, "lo")...)
	off := headerLen + len(data)
	data = append(data, nlattr.Attr(unix.IFLA_IFALIAS, make([]byte, 40000))...)
	req := Message{Header: Header{Type: unix.RTM_GETLINK}, Data: data}
	_, err := c.Execute(req)
	if small {
		if err == nil || !strings.Contains(err.Error(), "did not fit the 4096-byte buffer") {
			t.Fatalf("Execute with a 4096-byte buffer: %v, want the reply lost and said so", err)
		}
		_, err = c.Execute(req)
	}
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("Execute: %v, want an *Error", err)
	}
	if e.Errno != unix.EINVAL && e.Errno != unix.ERANGE {
		t.Errorf("errno %v, want EINVAL or ERANGE", e.Errno)
	}
	if e.Message == "" {
		t.Skipf("kernel gave no extended ack (%v)", err)
	}
	if e.Offset != uint32(off) {
		t.Errorf("offset %d, want %d (IFLA_IFALIAS): %v", e.Offset, off, err)
	}
}

// TestNetNSAndExtAck opens the socket in a fresh namespace (it must see
// only that namespace's lo, and the test's own thread must stay where it
// was), then asks for a qdisc kind no kernel has: the refusal carries the
// kernel's message.
func TestNetNSAndExtAck(t *testing.T) {
	testutil.RequireRoot(t)
	ns := netns.NewT(t, "nltest")
	before, err := os.Readlink("/proc/thread-self/ns/net")
	if err != nil {
		t.Fatal(err)
	}
	c := dial(t, Config{NetNS: ns.FD()})
	if after, _ := os.Readlink("/proc/thread-self/ns/net"); after != before {
		t.Errorf("Dial left this thread in %s, was %s", after, before)
	}
	all, err := c.Execute(Message{Header: Header{Type: unix.RTM_GETLINK, Flags: Dump}, Data: make([]byte, 16)})
	if err != nil {
		t.Fatal(err)
	}
	if n := linkNames(t, all); len(n) != 1 || n[0] != "lo" {
		t.Fatalf("links in the new namespace: %q, want only lo", n)
	}
	tcm := make([]byte, 20)
	binary.NativeEndian.PutUint32(tcm[4:], uint32(binary.NativeEndian.Uint32(all[0].Data[4:])))
	binary.NativeEndian.PutUint32(tcm[12:], 0xffffffff) // TC_H_ROOT
	_, err = c.Execute(Message{
		Header: Header{Type: unix.RTM_NEWQDISC, Flags: Acknowledge | Create | Excl},
		Data:   append(tcm, nlattr.Str(1, "nosuchqdisc")...), // TCA_KIND
	})
	var e *Error
	if !errors.As(err, &e) || e.Errno != unix.ENOENT {
		t.Fatalf("unknown qdisc kind: %v, want ENOENT", err)
	}
	if e.Message == "" {
		t.Errorf("no extended ack message in %v", err)
	}
	t.Logf("kernel said: %v", err)
}
