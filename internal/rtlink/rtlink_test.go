package rtlink

import (
	"encoding/binary"
	"errors"
	"testing"

	"golang.org/x/sys/unix"

	"sqm/internal/netlink"
	"sqm/internal/netns"
	"sqm/internal/nlattr"
	"sqm/internal/testutil"
)

func TestDecode(t *testing.T) {
	msg := make([]byte, 16)
	binary.NativeEndian.PutUint16(msg[2:], 1)  // ARPHRD_ETHER
	binary.NativeEndian.PutUint32(msg[4:], 42) // index
	binary.NativeEndian.PutUint32(msg[8:], unix.IFF_UP|unix.IFF_RUNNING)
	mtu := make([]byte, 4)
	binary.NativeEndian.PutUint32(mtu, 1492)
	msg = append(msg, nlattr.Attr(iflaIfname, []byte("ifb4wan\x00"))...)
	msg = append(msg, nlattr.Attr(iflaMTU, mtu)...)
	msg = append(msg, nlattr.Attr(iflaLinkInfo|0x8000, nlattr.Attr(iflaInfoKind, []byte("ifb\x00")))...)
	l, err := Decode(msg)
	if err != nil {
		t.Fatal(err)
	}
	want := Link{Index: 42, Type: 1, Flags: unix.IFF_UP | unix.IFF_RUNNING, Name: "ifb4wan", MTU: 1492, Kind: "ifb"}
	if l != want {
		t.Errorf("Decode = %+v, want %+v", l, want)
	}
	if _, err := Decode(msg[:10]); err == nil {
		t.Error("a message shorter than ifinfomsg decoded")
	}
	bad := append(msg[:16:16], 0xff, 0, 3, 0) // attribute longer than the message
	if _, err := Decode(bad); err == nil {
		t.Error("a bad attribute decoded")
	}
}

// TestHostKernel creates an IFB in a fresh namespace, finds it by name,
// index and listing, sets it up and deletes it.
func TestHostKernel(t *testing.T) {
	testutil.RequireRoot(t)
	ns := netns.NewT(t, "rtlink")
	c, err := netlink.Dial(netlink.Config{NetNS: ns.FD()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := New(c, "ifbtest0", "ifb", 32); err != nil {
		t.Fatalf("New: %v", err)
	}
	l, err := ByName(c, "ifbtest0")
	if err != nil {
		t.Fatal(err)
	}
	if l.Kind != "ifb" || l.Index == 0 || l.MTU != 1500 || l.Flags&unix.IFF_UP != 0 {
		t.Errorf("new ifb: %+v", l)
	}
	if err := New(c, "ifbtest0", "ifb", 32); !errors.Is(err, unix.EEXIST) {
		t.Errorf("second New: %v, want EEXIST", err)
	}
	if err := SetUp(c, l.Index); err != nil {
		t.Fatal(err)
	}
	if l2, err := ByIndex(c, l.Index); err != nil || l2.Name != "ifbtest0" || l2.Flags&unix.IFF_UP == 0 {
		t.Errorf("ByIndex after SetUp: %+v, %v", l2, err)
	}
	all, err := List(c)
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, x := range all {
		names[x.Name] = true
	}
	if !names["lo"] || !names["ifbtest0"] || len(all) != 2 {
		t.Errorf("List: %+v", all)
	}
	if err := Delete(c, l.Index); err != nil {
		t.Fatal(err)
	}
	if _, err := ByName(c, "ifbtest0"); !errors.Is(err, unix.ENODEV) {
		t.Errorf("ByName after Delete: %v, want ENODEV", err)
	}
}
