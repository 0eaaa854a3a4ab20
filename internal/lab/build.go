package lab

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"os"

	"github.com/jsimonetti/rtnetlink/v2"
	"github.com/jsimonetti/rtnetlink/v2/driver"
	"golang.org/x/sys/unix"
)

// newTopology builds the four namespaces, the three veth pairs between
// them, addresses, routes and forwarding, with offloads off on every veth.
// On error everything built so far is removed.
func newTopology(ctx context.Context) (t *topology, err error) {
	// pid plus a random suffix: unique per process and per run.
	var rnd [2]byte
	_, _ = rand.Read(rnd[:])
	prefix := fmt.Sprintf("sqmlab-%d-%s-", os.Getpid(), hex.EncodeToString(rnd[:]))
	t = &topology{}
	defer func() {
		if err != nil {
			t.Close()
			t = nil
		}
	}()
	for _, n := range []struct {
		p    *namespace
		name string
	}{{&t.client, "client"}, {&t.router, "router"}, {&t.isp, "isp"}, {&t.server, "server"}} {
		if err := ctx.Err(); err != nil {
			return t, err
		}
		ns, err := newNetNS(prefix + n.name)
		if err != nil {
			return t, err
		}
		*n.p = ns
	}
	nets := []struct {
		a, b         namespace
		aDev, bDev   string
		aAddr, bAddr string // a is .1, b is .2 of 10.77.N.0/24
	}{
		{t.router, t.client, lanDev, clientDev, "10.77.1.1", clientIP},
		{t.isp, t.router, ispDown, wanDev, "10.77.2.1", "10.77.2.2"},
		{t.isp, t.server, ispUp, serverDev, "10.77.3.1", serverIP},
	}
	for _, l := range nets {
		if err := veth(l.a, l.aDev, l.b, l.bDev); err != nil {
			return t, err
		}
		for _, e := range []struct {
			ns        namespace
			dev, addr string
		}{{l.a, l.aDev, l.aAddr}, {l.b, l.bDev, l.bAddr}} {
			err := e.ns.Do(func() error {
				if err := offloadsOff(e.dev); err != nil {
					return err
				}
				if err := addAddr(e.dev, e.addr, 24); err != nil {
					return err
				}
				return linkUp(e.dev)
			})
			if err != nil {
				return t, fmt.Errorf("lab: set up %s in %s: %w", e.dev, e.ns.Name(), err)
			}
		}
	}
	routes := []struct {
		ns       namespace
		dst      string // "" is the default route
		gw       string
		forwards bool
	}{
		{t.client, "", "10.77.1.1", false},
		{t.router, "", "10.77.2.1", true},
		{t.isp, "10.77.1.0", "10.77.2.2", true},
		{t.server, "", "10.77.3.1", false},
	}
	for _, r := range routes {
		err := r.ns.Do(func() error {
			if r.forwards {
				if err := setSysctl("net/ipv4/ip_forward", "1"); err != nil {
					return err
				}
			}
			return addRoute(r.dst, r.gw)
		})
		if err != nil {
			return t, fmt.Errorf("lab: routing in %s: %w", r.ns.Name(), err)
		}
	}
	return t, nil
}

// veth creates a veth pair with one end aDev in a and the other bDev in b.
// It is created inside a with the peer placed straight into b, so the
// names never meet in a shared namespace.
func veth(a namespace, aDev string, b namespace, bDev string) error {
	bns, ok := b.(*netNS)
	if !ok {
		return fmt.Errorf("lab: veth: namespace %s has no file descriptor", b.Name())
	}
	err := a.Do(func() error {
		c, err := rtnetlink.Dial(nil)
		if err != nil {
			return err
		}
		defer c.Close()
		return c.Link.New(&rtnetlink.LinkMessage{
			Family: unix.AF_UNSPEC,
			Attributes: &rtnetlink.LinkAttributes{
				Name: aDev,
				Info: &rtnetlink.LinkInfo{Kind: "veth", Data: &driver.Veth{
					PeerInfo: &rtnetlink.LinkMessage{
						Family:     unix.AF_UNSPEC,
						Attributes: &rtnetlink.LinkAttributes{Name: bDev, NetNS: rtnetlink.NetNSForFD(uint32(bns.fd))},
					},
				}},
			},
		})
	})
	if err != nil {
		return fmt.Errorf("lab: create veth %s (%s) -- %s (%s): %w", aDev, a.Name(), bDev, b.Name(), err)
	}
	return nil
}

func linkUp(dev string) error {
	ifi, err := net.InterfaceByName(dev)
	if err != nil {
		return err
	}
	c, err := rtnetlink.Dial(nil)
	if err != nil {
		return err
	}
	defer c.Close()
	return c.Link.Set(&rtnetlink.LinkMessage{Family: unix.AF_UNSPEC, Index: uint32(ifi.Index),
		Flags: unix.IFF_UP, Change: unix.IFF_UP})
}

func addAddr(dev, addr string, plen uint8) error {
	ifi, err := net.InterfaceByName(dev)
	if err != nil {
		return err
	}
	c, err := rtnetlink.Dial(nil)
	if err != nil {
		return err
	}
	defer c.Close()
	ip := net.ParseIP(addr).To4()
	mask := net.CIDRMask(int(plen), 32)
	bcast := make(net.IP, 4)
	for i := range ip {
		bcast[i] = ip[i] | ^mask[i]
	}
	return c.Address.New(&rtnetlink.AddressMessage{
		Family: unix.AF_INET, PrefixLength: plen, Scope: unix.RT_SCOPE_UNIVERSE, Index: uint32(ifi.Index),
		Attributes: &rtnetlink.AddressAttributes{Address: ip, Local: ip, Broadcast: bcast},
	})
}

// addRoute adds dst/24 (or the default route when dst is "") via gw.
func addRoute(dst, gw string) error {
	c, err := rtnetlink.Dial(nil)
	if err != nil {
		return err
	}
	defer c.Close()
	m := &rtnetlink.RouteMessage{Family: unix.AF_INET, Table: unix.RT_TABLE_MAIN, Protocol: unix.RTPROT_BOOT,
		Scope: unix.RT_SCOPE_UNIVERSE, Type: unix.RTN_UNICAST,
		Attributes: rtnetlink.RouteAttributes{Gateway: net.ParseIP(gw).To4()}}
	if dst != "" {
		m.DstLength = 24
		m.Attributes.Dst = net.ParseIP(dst).To4()
	}
	return c.Route.Add(m)
}
