package netns

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"
	"unsafe"

	"github.com/jsimonetti/rtnetlink/v2"
	"github.com/jsimonetti/rtnetlink/v2/driver"
	"golang.org/x/sys/unix"
)

// withConn runs fn with an rtnetlink connection inside n.
func (n *NS) withConn(fn func(c *rtnetlink.Conn) error) error {
	c, err := n.Dial()
	if err != nil {
		return err
	}
	defer c.Close()
	return fn(c)
}

// Veth creates a veth pair: name in n and peerName in peer. A nil peer
// means the namespace of the calling process. Interface names are at most
// 15 bytes.
func (n *NS) Veth(name string, peer *NS, peerName string) error {
	for _, s := range []string{name, peerName} {
		if len(s) == 0 || len(s) > unix.IFNAMSIZ-1 {
			return fmt.Errorf("netns: veth %s/%s: interface name %q must be 1 to 15 bytes", name, peerName, s)
		}
	}
	peerAttrs := &rtnetlink.LinkAttributes{Name: peerName}
	if peer != nil {
		peerAttrs.NetNS = rtnetlink.NetNSForFD(uint32(peer.fd))
	} else {
		self, err := os.Open("/proc/self/ns/net")
		if err != nil {
			return fmt.Errorf("netns: veth %s: %w", name, err)
		}
		defer self.Close()
		peerAttrs.NetNS = rtnetlink.NetNSForFD(uint32(self.Fd()))
	}
	return n.withConn(func(c *rtnetlink.Conn) error {
		err := c.Link.New(&rtnetlink.LinkMessage{
			Family: unix.AF_UNSPEC,
			Attributes: &rtnetlink.LinkAttributes{
				Name: name,
				Info: &rtnetlink.LinkInfo{Kind: "veth", Data: &driver.Veth{
					PeerInfo: &rtnetlink.LinkMessage{Family: unix.AF_UNSPEC, Attributes: peerAttrs},
				}},
			},
		})
		if err != nil {
			return fmt.Errorf("netns: create veth %s (in %s) <-> %s: %w", name, n.name, peerName, hint(err))
		}
		return nil
	})
}

// Index returns the interface index of link name inside n.
func (n *NS) Index(name string) (uint32, error) {
	var idx uint32
	err := n.withConn(func(c *rtnetlink.Conn) error {
		var err error
		idx, err = index(c, name)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("netns: %s: %w", n.name, err)
	}
	return idx, nil
}

func index(c *rtnetlink.Conn, name string) (uint32, error) {
	links, err := c.Link.List()
	if err != nil {
		return 0, fmt.Errorf("list links: %w", err)
	}
	var names []string
	for _, l := range links {
		if l.Attributes == nil {
			continue
		}
		if l.Attributes.Name == name {
			return l.Index, nil
		}
		names = append(names, l.Attributes.Name)
	}
	return 0, fmt.Errorf("no link %q (have %s)", name, strings.Join(names, ", "))
}

// Up brings links up (use "lo" for loopback).
func (n *NS) Up(names ...string) error {
	return n.withConn(func(c *rtnetlink.Conn) error {
		for _, name := range names {
			idx, err := index(c, name)
			if err != nil {
				return fmt.Errorf("netns: up %s in %s: %w", name, n.name, err)
			}
			if err := c.Link.Set(&rtnetlink.LinkMessage{
				Family: unix.AF_UNSPEC, Index: idx, Flags: unix.IFF_UP, Change: unix.IFF_UP,
			}); err != nil {
				return fmt.Errorf("netns: up %s in %s: %w", name, n.name, hint(err))
			}
		}
		return nil
	})
}

// AddAddr adds an address in CIDR form ("10.0.1.1/24", "fd00:1::1/64") to
// link name. IPv6 addresses are added without duplicate address detection
// (IFA_F_NODAD), so they are usable at once.
func (n *NS) AddAddr(name, cidr string) error {
	p, err := netip.ParsePrefix(cidr)
	if err != nil {
		return fmt.Errorf("netns: address %q: %w: want CIDR like 10.0.1.1/24 or fd00::1/64", cidr, err)
	}
	return n.withConn(func(c *rtnetlink.Conn) error {
		idx, err := index(c, name)
		if err != nil {
			return fmt.Errorf("netns: add %s to %s in %s: %w", cidr, name, n.name, err)
		}
		ip := net.IP(p.Addr().AsSlice())
		msg := &rtnetlink.AddressMessage{
			Family: unix.AF_INET, PrefixLength: uint8(p.Bits()), Scope: unix.RT_SCOPE_UNIVERSE, Index: idx,
			Attributes: &rtnetlink.AddressAttributes{Address: ip, Local: ip},
		}
		if p.Addr().Is6() {
			msg.Family = unix.AF_INET6
			msg.Flags = unix.IFA_F_NODAD
			msg.Attributes.Local = nil
			msg.Attributes.Flags = unix.IFA_F_NODAD
		} else if p.Bits() < 31 {
			msg.Attributes.Broadcast = broadcast(p)
		}
		if err := c.Address.New(msg); err != nil {
			return fmt.Errorf("netns: add %s to %s in %s: %w", cidr, name, n.name, hint(err))
		}
		return nil
	})
}

func broadcast(p netip.Prefix) net.IP {
	a := p.Masked().Addr().As4()
	for i := p.Bits(); i < 32; i++ {
		a[i/8] |= 1 << (7 - i%8)
	}
	return net.IP(a[:])
}

// AddRoute adds a route to dst ("default" or a CIDR) via gateway gw. An
// empty gw makes a direct route out of link dev; dev may be empty when gw
// is given.
func (n *NS) AddRoute(dst, gw, dev string) error {
	var family uint8 = unix.AF_INET
	msg := &rtnetlink.RouteMessage{
		Table: unix.RT_TABLE_MAIN, Protocol: unix.RTPROT_BOOT,
		Scope: unix.RT_SCOPE_UNIVERSE, Type: unix.RTN_UNICAST,
	}
	var v6 *bool
	setFamily := func(is6 bool) error {
		if v6 != nil && *v6 != is6 {
			return fmt.Errorf("netns: route %s via %s: mixes IPv4 and IPv6", dst, gw)
		}
		v6 = &is6
		return nil
	}
	if dst != "default" {
		p, err := netip.ParsePrefix(dst)
		if err != nil {
			return fmt.Errorf("netns: route destination %q: %w: want \"default\" or a CIDR", dst, err)
		}
		msg.DstLength = uint8(p.Bits())
		msg.Attributes.Dst = net.IP(p.Masked().Addr().AsSlice())
		if err := setFamily(p.Addr().Is6()); err != nil {
			return err
		}
	}
	if gw != "" {
		a, err := netip.ParseAddr(gw)
		if err != nil {
			return fmt.Errorf("netns: route gateway %q: %w", gw, err)
		}
		msg.Attributes.Gateway = net.IP(a.AsSlice())
		if err := setFamily(a.Is6()); err != nil {
			return err
		}
	} else if dev == "" {
		return fmt.Errorf("netns: route %s: needs a gateway or a device", dst)
	} else {
		msg.Scope = unix.RT_SCOPE_LINK
	}
	if v6 != nil && *v6 {
		family = unix.AF_INET6
	}
	msg.Family = family
	return n.withConn(func(c *rtnetlink.Conn) error {
		if dev != "" {
			idx, err := index(c, dev)
			if err != nil {
				return fmt.Errorf("netns: route %s in %s: %w", dst, n.name, err)
			}
			msg.Attributes.OutIface = idx
		}
		if err := c.Route.Add(msg); err != nil {
			return fmt.Errorf("netns: route %s via %q dev %q in %s: %w", dst, gw, dev, n.name, hint(err))
		}
		return nil
	})
}

// SetSysctl writes a sysctl inside the namespace; key uses dots or
// slashes ("net.ipv4.ip_forward", "net/ipv6/conf/all/accept_dad"). Only
// the net.* tree is per namespace.
func (n *NS) SetSysctl(key, value string) error {
	path := sysctlPath(key)
	return n.Do(func() error {
		if err := os.WriteFile(path, []byte(value), 0o644); err != nil {
			return fmt.Errorf("netns: sysctl %s=%s in %s: %w", key, value, n.name, hint(err))
		}
		return nil
	})
}

// Sysctl reads a sysctl inside the namespace.
func (n *NS) Sysctl(key string) (string, error) {
	var v string
	err := n.Do(func() error {
		b, err := os.ReadFile(sysctlPath(key))
		if err != nil {
			return fmt.Errorf("netns: sysctl %s in %s: %w", key, n.name, err)
		}
		v = strings.TrimSpace(string(b))
		return nil
	})
	return v, err
}

func sysctlPath(key string) string {
	if !strings.Contains(key, "/") {
		key = strings.ReplaceAll(key, ".", "/")
	}
	return filepath.Join("/proc/sys", key)
}

// Router turns on IPv4 and IPv6 forwarding and turns off IPv6 duplicate
// address detection, for a namespace that routes between its links.
func (n *NS) Router() error {
	for _, kv := range [][2]string{
		{"net.ipv4.ip_forward", "1"},
		{"net.ipv6.conf.all.forwarding", "1"},
		{"net.ipv6.conf.all.accept_dad", "0"},
		{"net.ipv6.conf.default.accept_dad", "0"},
	} {
		if err := n.SetSysctl(kv[0], kv[1]); err != nil {
			return err
		}
	}
	return nil
}

// Offload names an ethtool offload this package can switch.
type Offload string

const (
	TSO Offload = "tso"
	GSO Offload = "gso"
	GRO Offload = "gro"
)

// ethtool commands (linux/ethtool.h).
var offloadCmds = map[Offload][2]uint32{
	TSO: {0x1e, 0x1f}, // ETHTOOL_GTSO, ETHTOOL_STSO
	GSO: {0x23, 0x24}, // ETHTOOL_GGSO, ETHTOOL_SGSO
	GRO: {0x2b, 0x2c}, // ETHTOOL_GGRO, ETHTOOL_SGRO
}

// DisableOffloads turns TSO, GSO and GRO off on link name. Shaping tests
// need this: with them on, the kernel queues 64 KB super-packets and cake
// or htb see a few huge packets instead of MTU-sized ones. Call it before
// Up: changing features of an up veth resets the link, and the first IPv6
// packets after that wait about a second for neighbour discovery.
func (n *NS) DisableOffloads(name string) error {
	for _, o := range []Offload{TSO, GSO, GRO} {
		if err := n.SetOffload(name, o, false); err != nil {
			return err
		}
	}
	return nil
}

// SetOffload switches one offload on link name.
func (n *NS) SetOffload(name string, o Offload, on bool) error {
	cmd, ok := offloadCmds[o]
	if !ok {
		return fmt.Errorf("netns: unknown offload %q: use tso, gso or gro", o)
	}
	var v uint32
	if on {
		v = 1
	}
	return n.Do(func() error {
		if _, err := ethtool(name, cmd[1], v); err != nil {
			return fmt.Errorf("netns: ethtool %s %s %v in %s: %w", name, o, on, n.name, hint(err))
		}
		return nil
	})
}

// OffloadOn reports whether an offload is on for link name.
func (n *NS) OffloadOn(name string, o Offload) (bool, error) {
	cmd, ok := offloadCmds[o]
	if !ok {
		return false, fmt.Errorf("netns: unknown offload %q: use tso, gso or gro", o)
	}
	var on bool
	err := n.Do(func() error {
		v, err := ethtool(name, cmd[0], 0)
		if err != nil {
			return fmt.Errorf("netns: ethtool %s %s in %s: %w", name, o, n.name, err)
		}
		on = v != 0
		return nil
	})
	return on, err
}

// ethtool issues one SIOCETHTOOL ioctl with a struct ethtool_value from a
// socket in the calling thread's namespace.
func ethtool(ifname string, cmd, data uint32) (uint32, error) {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return 0, err
	}
	defer unix.Close(fd)
	value := &struct{ Cmd, Data uint32 }{cmd, data}
	var ifr [40]byte // struct ifreq: name[16] + union (pointer at offset 16)
	copy(ifr[:unix.IFNAMSIZ-1], ifname)
	var pin runtime.Pinner
	pin.Pin(value)
	defer pin.Unpin()
	*(*uintptr)(unsafe.Pointer(&ifr[16])) = uintptr(unsafe.Pointer(value))
	if _, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.SIOCETHTOOL, uintptr(unsafe.Pointer(&ifr[0]))); errno != 0 {
		return 0, errno
	}
	return value.Data, nil
}

// Start starts cmd inside the namespace: the process is forked from a
// thread that is in it, so it inherits the namespace (as with `ip netns
// exec`, minus the /sys remount). Wait for it as usual.
func (n *NS) Start(cmd *exec.Cmd) error {
	if cmd.SysProcAttr != nil && cmd.SysProcAttr.Pdeathsig != 0 {
		// The forking thread exits right after the fork, which would
		// deliver the signal at once.
		return fmt.Errorf("netns: start %s in %s: SysProcAttr.Pdeathsig cannot be used here: the thread that forks it is discarded", cmd.Path, n.name)
	}
	return n.Do(func() error {
		if err := cmd.Start(); err != nil {
			return fmt.Errorf("netns: start %s in %s: %w", cmd.Path, n.name, err)
		}
		return nil
	})
}

// Run runs cmd inside the namespace and waits for it.
func (n *NS) Run(cmd *exec.Cmd) error {
	if err := n.Start(cmd); err != nil {
		return err
	}
	return cmd.Wait()
}

// Output runs cmd inside the namespace and returns its stdout; on failure
// the error includes stderr.
func (n *NS) Output(cmd *exec.Cmd) ([]byte, error) {
	var stdout, stderr strings.Builder
	cmd.Stdout = &stdout
	if cmd.Stderr == nil {
		cmd.Stderr = &stderr
	}
	err := n.Run(cmd)
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			err = fmt.Errorf("netns: %s in %s: %w: %s", strings.Join(cmd.Args, " "), n.name, err, strings.TrimSpace(stderr.String()))
		}
	}
	return []byte(stdout.String()), err
}

// WaitReady waits until no address on link name is tentative (IPv6
// duplicate address detection or link-local setup still running), so the
// first packets are not delayed. Links must be up.
func (n *NS) WaitReady(name string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	return n.withConn(func(c *rtnetlink.Conn) error {
		idx, err := index(c, name)
		if err != nil {
			return fmt.Errorf("netns: wait for %s in %s: %w", name, n.name, err)
		}
		for {
			addrs, err := c.Address.List()
			if err != nil {
				return fmt.Errorf("netns: wait for %s in %s: list addresses: %w", name, n.name, err)
			}
			var pending []string
			for _, a := range addrs {
				if a.Index != idx || a.Attributes == nil {
					continue
				}
				if (uint32(a.Flags)|a.Attributes.Flags)&unix.IFA_F_TENTATIVE != 0 {
					pending = append(pending, a.Attributes.Address.String())
				}
			}
			if len(pending) == 0 {
				return nil
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("netns: %s in %s: addresses %s still tentative after %s: is the peer up? (or turn off DAD: net.ipv6.conf.default.accept_dad=0 before creating links)",
					name, n.name, strings.Join(pending, ", "), timeout)
			}
			time.Sleep(10 * time.Millisecond)
		}
	})
}
