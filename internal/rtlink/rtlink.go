// Package rtlink reads and changes network devices over rtnetlink
// (RTM_GETLINK, RTM_NEWLINK, RTM_DELLINK) on sqm's own netlink socket
// (internal/netlink): the few link operations sqm needs (look a device
// up, create an IFB, set it up, delete it, decode link events). It replaces jsimonetti/rtnetlink, whose
// general message types cost the router binary about 0.15 MB for these.
package rtlink

import (
	"encoding/binary"
	"errors"
	"fmt"

	"golang.org/x/sys/unix"

	"sqm/internal/netlink"
	"sqm/internal/nlattr"
)

// Link is what sqm needs to know about a device.
type Link struct {
	Index int
	Type  uint16 // ARPHRD_*: 1 is Ethernet
	Flags uint32 // IFF_*
	Name  string
	MTU   int
	Kind  string // IFLA_INFO_KIND: "ifb", "veth", ... ("" if the kernel does not say)
}

// ifinfomsgLen is sizeof(struct ifinfomsg): family, pad, type, index,
// flags, change.
const ifinfomsgLen = 16

// IFLA_* attributes sqm reads or sends (linux/if_link.h).
const (
	iflaIfname   = 3
	iflaMTU      = 4
	iflaTxQLen   = 13
	iflaLinkInfo = 18
	iflaInfoKind = 1
)

func ifinfomsg(index int, flags, change uint32) []byte {
	b := make([]byte, ifinfomsgLen) // family AF_UNSPEC
	binary.NativeEndian.PutUint32(b[4:], uint32(int32(index)))
	binary.NativeEndian.PutUint32(b[8:], flags)
	binary.NativeEndian.PutUint32(b[12:], change)
	return b
}

// Decode reads an RTM_NEWLINK or RTM_DELLINK message's payload.
func Decode(data []byte) (Link, error) {
	if len(data) < ifinfomsgLen {
		return Link{}, fmt.Errorf("rtlink: link message of %d bytes, shorter than struct ifinfomsg", len(data))
	}
	l := Link{
		Type:  binary.NativeEndian.Uint16(data[2:]),
		Index: int(int32(binary.NativeEndian.Uint32(data[4:]))),
		Flags: binary.NativeEndian.Uint32(data[8:]),
	}
	ad := nlattr.NewDecoder(data[ifinfomsgLen:])
	for ad.Next() {
		switch ad.Type() {
		case iflaIfname:
			l.Name = ad.String()
		case iflaMTU:
			l.MTU = int(ad.Uint32())
		case iflaLinkInfo:
			nd := nlattr.NewDecoder(ad.Bytes())
			for nd.Next() {
				if nd.Type() == iflaInfoKind {
					l.Kind = nd.String()
				}
			}
			if err := nd.Err(); err != nil {
				return Link{}, fmt.Errorf("rtlink: link %d: IFLA_LINKINFO: %w", l.Index, err)
			}
		}
	}
	if err := ad.Err(); err != nil {
		return Link{}, fmt.Errorf("rtlink: link %d: %w", l.Index, err)
	}
	return l, nil
}

// get runs one RTM_GETLINK and decodes the link replies.
func get(c *netlink.Conn, flags uint16, data []byte) ([]Link, error) {
	msgs, err := c.Execute(netlink.Message{
		Header: netlink.Header{Type: unix.RTM_GETLINK, Flags: netlink.Request | flags},
		Data:   data,
	})
	if err != nil {
		return nil, err
	}
	var out []Link
	for _, m := range msgs {
		if m.Header.Type != unix.RTM_NEWLINK {
			continue
		}
		l, err := Decode(m.Data)
		if err != nil {
			return nil, err
		}
		out = append(out, l)
	}
	return out, nil
}

// ErrNotFound: the kernel answered without the device asked for.
var ErrNotFound = errors.New("rtlink: no such device")

// ByName looks a device up by name with one RTM_GETLINK (no dump of every
// link, which is slow on big routers). A missing device is the kernel's
// ENODEV (errors.Is(err, unix.ENODEV)) or ErrNotFound.
func ByName(c *netlink.Conn, name string) (Link, error) {
	ls, err := get(c, 0, append(ifinfomsg(0, 0, 0), nlattr.Str(iflaIfname, name)...))
	if err != nil {
		return Link{}, err
	}
	for _, l := range ls {
		if l.Name == name {
			return l, nil
		}
	}
	return Link{}, ErrNotFound
}

// ByIndex looks a device up by ifindex.
func ByIndex(c *netlink.Conn, index int) (Link, error) {
	ls, err := get(c, 0, ifinfomsg(index, 0, 0))
	if err != nil {
		return Link{}, err
	}
	for _, l := range ls {
		if l.Index == index {
			return l, nil
		}
	}
	return Link{}, ErrNotFound
}

// List returns every device.
func List(c *netlink.Conn) ([]Link, error) {
	return get(c, netlink.Dump, ifinfomsg(0, 0, 0))
}

// New creates a device of the kind (down); txQLen 0 leaves the kernel's
// default for the kind.
func New(c *netlink.Conn, name, kind string, txQLen uint32) error {
	attrs := nlattr.Str(iflaIfname, name)
	if txQLen != 0 {
		attrs = append(attrs, nlattr.U32(iflaTxQLen, txQLen)...)
	}
	attrs = append(attrs, nlattr.Nest(iflaLinkInfo, nlattr.Str(iflaInfoKind, kind))...)
	return execAck(c, unix.RTM_NEWLINK, netlink.Create|netlink.Excl, append(ifinfomsg(0, 0, 0), attrs...))
}

// SetUp sets a device administratively up.
func SetUp(c *netlink.Conn, index int) error {
	return execAck(c, unix.RTM_NEWLINK, 0, ifinfomsg(index, unix.IFF_UP, unix.IFF_UP))
}

// Delete deletes a device.
func Delete(c *netlink.Conn, index int) error {
	return execAck(c, unix.RTM_DELLINK, 0, ifinfomsg(index, 0, 0))
}

func execAck(c *netlink.Conn, typ, flags uint16, data []byte) error {
	_, err := c.Execute(netlink.Message{
		Header: netlink.Header{Type: typ, Flags: netlink.Request | netlink.Acknowledge | flags},
		Data:   data,
	})
	return err
}

// Lookup is ByName on a socket of its own in the caller's network
// namespace, for callers that hold no connection (sqm plan, apply
// --dry-run, the link watcher's Exists). It needs no privileges. It is
// what net.InterfaceByName did for them, without linking package net
// (about 0.3 MB of the router build on mipsle).
func Lookup(name string) (Link, error) {
	c, err := netlink.Dial(netlink.Config{})
	if err != nil {
		return Link{}, err
	}
	defer c.Close()
	return ByName(c, name)
}
