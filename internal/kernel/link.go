package kernel

import (
	"errors"
	"fmt"

	"golang.org/x/sys/unix"

	"sqm/internal/rtlink"
)

// ifbTxQLen is the transmit queue length of the IFBs sqm creates: the
// kernel's ifb default. A zero txqueuelen (what a zero LinkAttributes asks
// for) makes the IFB come up with noqueue and breaks the redirect.
const ifbTxQLen = 32

// link is what sqm needs to know about a device.
type link struct {
	_ [0]func() // not comparable: no equality code (docs/testing.md, "Package sizes")

	Name  string
	Index int
	MTU   int
	Kind  string // "ifb", "veth", ... ("" if the kernel does not say)
	Up    bool
	Type  uint16 // ARPHRD_*: 1 is Ethernet
}

// linkByName looks a device up; the error wraps ErrNoLink if it is absent.
func (c *Conn) linkByName(name string) (*link, error) {
	if name == "" {
		return nil, fmt.Errorf("look up device: empty name: %w", ErrNoLink)
	}
	c.lookups++
	l, err := rtlink.ByName(c.raw, name)
	if err != nil {
		if errors.Is(err, unix.ENODEV) || errors.Is(err, unix.ENOENT) || errors.Is(err, rtlink.ErrNotFound) {
			return nil, fmt.Errorf("device %q: %w", name, ErrNoLink)
		}
		return nil, fmt.Errorf("look up device %q: %w", name, err)
	}
	return &link{Name: name, Index: l.Index, MTU: l.MTU, Up: l.Flags&unix.IFF_UP != 0, Type: l.Type, Kind: l.Kind}, nil
}

// LinkMTU returns the device's MTU; the error wraps ErrNoLink if it is
// missing.
func (c *Conn) LinkMTU(iface string) (int, error) {
	l, err := c.linkByName(iface)
	if err != nil {
		return 0, err
	}
	return l.MTU, nil
}

// LinkExists reports whether the device exists.
func (c *Conn) LinkExists(iface string) (bool, error) {
	_, err := c.linkByName(iface)
	if errors.Is(err, ErrNoLink) {
		return false, nil
	}
	return err == nil, err
}

// createIFB adds an IFB device, down.
func (c *Conn) createIFB(name string) (*link, error) {
	if len(name) > 15 {
		return nil, fmt.Errorf("create ifb %q: name longer than 15 characters (IFNAMSIZ)", name)
	}
	err := rtlink.New(c.raw, name, "ifb", ifbTxQLen)
	c.traceOp(name, 0, "create ifb "+name, err)
	if err != nil {
		return nil, explain(fmt.Sprintf("create ifb %q", name), err, ifbHint())
	}
	return c.linkByName(name)
}

// setUp sets a device administratively up.
func (c *Conn) setUp(index int) error {
	err := rtlink.SetUp(c.raw, index)
	c.traceOp("", index, "set link up", err)
	if err != nil {
		return explain(fmt.Sprintf("set device %d up", index), err, "")
	}
	return nil
}

// deleteLink deletes a device by name if it is there and of the expected
// kind; a missing device is not an error.
func (c *Conn) deleteLink(name, kind string) error {
	l, err := c.linkByName(name)
	if errors.Is(err, ErrNoLink) {
		return nil
	}
	if err != nil {
		return err
	}
	if kind != "" && l.Kind != "" && l.Kind != kind {
		return fmt.Errorf("delete device %q: it is a %s, not the %s sqm created; left alone", name, l.Kind, kind)
	}
	err = rtlink.Delete(c.raw, l.Index)
	c.traceOp(name, l.Index, "delete device "+name, err)
	if err != nil && !errors.Is(err, unix.ENODEV) {
		return explain(fmt.Sprintf("delete device %q", name), err, "")
	}
	return nil
}
