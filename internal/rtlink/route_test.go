package rtlink

import (
	"encoding/binary"
	"errors"
	"net/netip"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"sqm/internal/netlink"
	"sqm/internal/netns"
	"sqm/internal/nlattr"
	"sqm/internal/testutil"
)

func u32(v uint32) []byte {
	b := make([]byte, 4)
	binary.NativeEndian.PutUint32(b, v)
	return b
}

func TestDecodeRouteOIF(t *testing.T) {
	hdr := make([]byte, rtmsgLen)
	for _, tc := range []struct {
		name string
		data []byte
		want int
		err  string
	}{
		{"oif after dst", append(append(append([]byte{}, hdr...), nlattr.Attr(rtaDst, []byte{10, 0, 0, 2})...), nlattr.Attr(rtaOIF, u32(7))...), 7, ""},
		{"no oif", append(append([]byte{}, hdr...), nlattr.Attr(rtaDst, []byte{10, 0, 0, 2})...), 0, ""},
		{"short header", hdr[:8], 0, "shorter than struct rtmsg"},
		{"oif of 2 bytes", append(append([]byte{}, hdr...), nlattr.Attr(rtaOIF, []byte{1, 0})...), 0, "RTA_OIF of 2 bytes"},
		{"truncated attribute", append(append([]byte{}, hdr...), 8, 0, 4, 0), 0, "runs past"},
	} {
		got, err := decodeRouteOIF(tc.data)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s: %d, %v; want an error with %q", tc.name, got, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%s: %d, %v; want %d", tc.name, got, err, tc.want)
		}
	}
}

func FuzzDecodeRouteOIF(f *testing.F) {
	f.Add(append(make([]byte, rtmsgLen), nlattr.Attr(rtaOIF, u32(3))...))
	f.Fuzz(func(t *testing.T, data []byte) {
		oif, err := decodeRouteOIF(data)
		if err != nil && oif != 0 {
			t.Fatalf("error %v with oif %d", err, oif)
		}
	})
}

// TestRouteOutKernel asks a namespace's kernel: a LAN address goes out
// its veth, loopback out lo, and an address with no route is the
// kernel's ENETUNREACH.
func TestRouteOutKernel(t *testing.T) {
	testutil.RequireRoot(t)
	a := netns.NewT(t, "rtroute")
	b := netns.NewT(t, "rtroutp")
	if err := a.Veth("rt0", b, "rt1"); err != nil {
		t.Fatal(err)
	}
	if err := a.AddAddr("rt0", "10.88.0.1/24"); err != nil {
		t.Fatal(err)
	}
	if err := a.AddAddr("rt0", "fd88::1/64"); err != nil {
		t.Fatal(err)
	}
	if err := a.Up("lo", "rt0"); err != nil {
		t.Fatal(err)
	}
	c, err := netlink.Dial(netlink.Config{NetNS: a.FD()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	rt0, err := ByName(c, "rt0")
	if err != nil {
		t.Fatal(err)
	}
	lo, err := ByName(c, "lo")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		dst  string
		want int
	}{
		{"10.88.0.2", rt0.Index},
		{"::ffff:10.88.0.9", rt0.Index},
		{"fd88::2", rt0.Index},
		{"127.0.0.1", lo.Index},
		{"::1", lo.Index},
	} {
		got, err := RouteOut(c, netip.MustParseAddr(tc.dst).AsSlice())
		if err != nil || got != tc.want {
			t.Errorf("RouteOut(%s) = %d, %v; want %d", tc.dst, got, err, tc.want)
		}
	}
	if got, err := RouteOut(c, netip.MustParseAddr("192.0.2.1").AsSlice()); !errors.Is(err, unix.ENETUNREACH) {
		t.Errorf("RouteOut(192.0.2.1) with no default route = %d, %v; want ENETUNREACH", got, err)
	}
	if got, err := RouteOut(c, []byte{10, 88, 0}); err == nil {
		t.Errorf("RouteOut of 3 bytes = %d, nil; want an error", got)
	}
}
