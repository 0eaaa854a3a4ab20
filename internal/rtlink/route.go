package rtlink

import (
	"encoding/binary"
	"fmt"
	"net/netip"

	"golang.org/x/sys/unix"

	"sqm/internal/netlink"
	"sqm/internal/nlattr"
)

// rtmsgLen is sizeof(struct rtmsg): family, dst_len, src_len, tos, table,
// protocol, scope, type, flags.
const rtmsgLen = 12

// RTA_* attributes of a route (linux/rtnetlink.h).
const (
	rtaDst = 1
	rtaOIF = 4
)

// RouteOut asks the kernel which device it would send a packet to dst
// through (one RTM_GETROUTE, as `ip route get` does) and returns that
// device's ifindex. No route is the kernel's error (ENETUNREACH).
func RouteOut(c *netlink.Conn, dst netip.Addr) (int, error) {
	dst = dst.Unmap().WithZone("")
	if !dst.IsValid() {
		return 0, fmt.Errorf("rtlink: route to an invalid address")
	}
	fam := byte(unix.AF_INET)
	if dst.Is6() {
		fam = unix.AF_INET6
	}
	req := make([]byte, rtmsgLen)
	req[0], req[1] = fam, byte(dst.BitLen())
	msgs, err := c.Execute(netlink.Message{
		Header: netlink.Header{Type: unix.RTM_GETROUTE, Flags: netlink.Request},
		Data:   append(req, nlattr.Attr(rtaDst, dst.AsSlice())...),
	})
	if err != nil {
		return 0, fmt.Errorf("rtlink: route to %s: %w", dst, err)
	}
	for _, m := range msgs {
		if m.Header.Type != unix.RTM_NEWROUTE {
			continue
		}
		oif, err := decodeRouteOIF(m.Data)
		if err != nil {
			return 0, fmt.Errorf("rtlink: route to %s: %w", dst, err)
		}
		if oif != 0 {
			return oif, nil
		}
	}
	return 0, fmt.Errorf("rtlink: route to %s: the kernel named no output device", dst)
}

// decodeRouteOIF reads RTA_OIF from an RTM_NEWROUTE payload (0: none).
func decodeRouteOIF(data []byte) (int, error) {
	if len(data) < rtmsgLen {
		return 0, fmt.Errorf("route message of %d bytes, shorter than struct rtmsg", len(data))
	}
	ad := nlattr.NewDecoder(data[rtmsgLen:])
	oif := 0
	for ad.Next() {
		if ad.Type() == rtaOIF {
			b := ad.Bytes()
			if len(b) != 4 {
				return 0, fmt.Errorf("RTA_OIF of %d bytes, want 4", len(b))
			}
			oif = int(binary.NativeEndian.Uint32(b))
		}
	}
	if err := ad.Err(); err != nil {
		return 0, err
	}
	return oif, nil
}
