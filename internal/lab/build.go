package lab

import (
	"context"
	"fmt"

	"sqm/internal/netns"
)

// newTopology builds the four namespaces, the three veth pairs between
// them, addresses, routes and forwarding, with offloads off on every veth.
// On error everything built so far is removed.
func newTopology(ctx context.Context) (t *topology, err error) {
	t = &topology{}
	defer func() {
		if err != nil {
			t.Close()
			t = nil
		}
	}()
	// netns.Unique names them sqmlab-ROLE-PID-N: unique per process and
	// per run, so two labs at once do not clash.
	for _, n := range []struct {
		p    **netns.NS
		role string
	}{{&t.client, "client"}, {&t.router, "router"}, {&t.isp, "isp"}, {&t.server, "server"}} {
		if err := ctx.Err(); err != nil {
			return t, err
		}
		ns, err := netns.NewUnique("sqmlab-" + n.role)
		if err != nil {
			return t, fmt.Errorf("lab: %w", err)
		}
		*n.p = ns
	}
	links := []struct {
		a, b         *netns.NS
		aDev, bDev   string
		aAddr, bAddr string
	}{
		{t.router, t.client, lanDev, clientDev, "10.77.1.1/24", clientIP + "/24"},
		{t.isp, t.router, ispDown, wanDev, "10.77.2.1/24", "10.77.2.2/24"},
		{t.isp, t.server, ispUp, serverDev, "10.77.3.1/24", serverIP + "/24"},
	}
	for _, l := range links {
		if err := l.a.Veth(l.aDev, l.b, l.bDev); err != nil {
			return t, fmt.Errorf("lab: %w", err)
		}
		for _, e := range []struct {
			ns        *netns.NS
			dev, addr string
		}{{l.a, l.aDev, l.aAddr}, {l.b, l.bDev, l.bAddr}} {
			// Offloads off before the link goes up (see DisableOffloads):
			// with them on, netem would count and pace 64 KB super-packets
			// as one packet each, and its FIFO would hold far more than
			// --buffer full-size packets.
			if err := e.ns.DisableOffloads(e.dev); err != nil {
				return t, fmt.Errorf("lab: %w", err)
			}
			if err := e.ns.AddAddr(e.dev, e.addr); err != nil {
				return t, fmt.Errorf("lab: %w", err)
			}
			if err := e.ns.Up(e.dev); err != nil {
				return t, fmt.Errorf("lab: %w", err)
			}
		}
	}
	for _, r := range []struct {
		ns      *netns.NS
		dst, gw string
		router  bool
	}{
		{t.client, "default", "10.77.1.1", false},
		{t.router, "default", "10.77.2.1", true},
		{t.isp, "10.77.1.0/24", "10.77.2.2", true},
		{t.server, "default", "10.77.3.1", false},
	} {
		if r.router {
			if err := r.ns.Router(); err != nil {
				return t, fmt.Errorf("lab: %w", err)
			}
		}
		if err := r.ns.AddRoute(r.dst, r.gw, ""); err != nil {
			return t, fmt.Errorf("lab: %w", err)
		}
	}
	return t, nil
}
