package rtlink

import (
	"encoding/binary"
	"fmt"

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
// device's ifindex. dst is the address's 4 (IPv4) or 16 (IPv6) bytes, as
// netip.Addr.AsSlice gives them; an IPv4-mapped IPv6 address is asked as
// the IPv4 address it maps. Bytes, not a netip.Addr, so that the router
// build, which links this package, does not link net/netip (its init
// alone brings package unique, about 10 KB). Errors do not name the
// address: the caller knows how to print it. No route is the kernel's
// error (ENETUNREACH).
func RouteOut(c *netlink.Conn, dst []byte) (int, error) {
	if len(dst) == 16 && isV4Mapped(dst) {
		dst = dst[12:]
	}
	fam := byte(unix.AF_INET)
	switch len(dst) {
	case 4:
	case 16:
		fam = unix.AF_INET6
	default:
		return 0, fmt.Errorf("rtlink: route to an address of %d bytes, want 4 or 16", len(dst))
	}
	req := make([]byte, rtmsgLen)
	req[0], req[1] = fam, byte(8*len(dst))
	msgs, err := c.Execute(netlink.Message{
		Header: netlink.Header{Type: unix.RTM_GETROUTE, Flags: netlink.Request},
		Data:   append(req, nlattr.Attr(rtaDst, dst)...),
	})
	if err != nil {
		return 0, fmt.Errorf("rtlink: route lookup: %w", err)
	}
	for _, m := range msgs {
		if m.Header.Type != unix.RTM_NEWROUTE {
			continue
		}
		oif, err := decodeRouteOIF(m.Data)
		if err != nil {
			return 0, fmt.Errorf("rtlink: route lookup: %w", err)
		}
		if oif != 0 {
			return oif, nil
		}
	}
	return 0, fmt.Errorf("rtlink: route lookup: the kernel named no output device")
}

// isV4Mapped reports whether a 16-byte address is ::ffff:a.b.c.d.
func isV4Mapped(a []byte) bool {
	for _, b := range a[:10] {
		if b != 0 {
			return false
		}
	}
	return a[10] == 0xff && a[11] == 0xff
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
