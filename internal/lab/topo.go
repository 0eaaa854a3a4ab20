package lab

import (
	"errors"
	"fmt"
	"net"
	"os"

	"github.com/florianl/go-tc"

	"sqm/internal/netns"
)

// Addresses and device names inside the lab. Every namespace is private to
// one lab run, so names and addresses only need to be unique within it;
// the namespaces themselves carry the unique, pid-based names.
const (
	clientIP = "10.77.1.2"
	serverIP = "10.77.3.2"

	lanDev    = "lan0" // router, towards the client
	wanDev    = "wan0" // router, towards the isp: the shaped interface
	ispDown   = "dn0"  // isp, towards the router: the download netem
	ispUp     = "up0"  // isp, towards the server: the upload netem
	clientDev = "eth0" // client, towards the router
	serverDev = "eth0" // server, towards the isp
)

// topology is the four namespaces of one lab run.
type topology struct {
	client, router, isp, server *netns.NS
}

func (t *topology) all() []*netns.NS {
	return []*netns.NS{t.client, t.router, t.isp, t.server}
}

// ids are the namespaces' /proc identities ("net:[4026532211]"), for tests
// that check nothing still refers to them.
func (t *topology) ids() []string {
	var s []string
	for _, n := range t.all() {
		if n != nil && n.FD() >= 0 {
			id, _ := os.Readlink(fmt.Sprintf("/proc/self/fd/%d", n.FD()))
			s = append(s, id)
		}
	}
	return s
}

func (t *topology) names() []string {
	var s []string
	for _, n := range t.all() {
		if n != nil {
			s = append(s, n.Name())
		}
	}
	return s
}

// Close deletes the namespaces, and with them every veth, IFB and qdisc
// the lab created.
func (t *topology) Close() error {
	var errs []error
	for _, n := range t.all() {
		if n != nil {
			if err := n.Close(); err != nil {
				errs = append(errs, fmt.Errorf("lab: remove namespace %s: %w", n.Name(), err))
			}
		}
	}
	return errors.Join(errs...)
}

// modem installs the two netem directions in the isp namespace.
func (t *topology) modem(down, up Modem) error {
	return t.isp.Do(func() error {
		conn, err := tc.Open(&tc.Config{})
		if err != nil {
			return fmt.Errorf("lab: open tc netlink socket in %s: %w", t.isp.Name(), err)
		}
		defer conn.Close()
		for _, d := range []struct {
			dev string
			m   Modem
		}{{ispDown, down}, {ispUp, up}} {
			ifi, err := net.InterfaceByName(d.dev)
			if err != nil {
				return fmt.Errorf("lab: find %s in %s: %w", d.dev, t.isp.Name(), err)
			}
			if err := applyModem(conn, uint32(ifi.Index), d.m); err != nil {
				return fmt.Errorf("lab: emulate the modem on %s in %s: %w", d.dev, t.isp.Name(), err)
			}
		}
		return nil
	})
}

// setECN sets net.ipv4.tcp_ecn in the client and server namespaces: 1
// (ask for ECN) when on, else Linux's default 2 (accept it when asked,
// never ask), written anyway so the lab does not depend on what a new
// namespace inherits. The routers in between need nothing: forwarding
// passes the ECN field, and only the AQMs change it. It returns the value
// written.
func (t *topology) setECN(on bool) (int, error) {
	v := 2
	if on {
		v = 1
	}
	for _, n := range []*netns.NS{t.client, t.server} {
		if err := n.SetSysctl("net.ipv4.tcp_ecn", fmt.Sprint(v)); err != nil {
			return 0, fmt.Errorf("lab: endpoints' ECN: %w", err)
		}
	}
	return v, nil
}
