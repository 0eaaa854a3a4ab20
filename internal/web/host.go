package web

import (
	"bufio"
	"bytes"
	"net"
	"net/netip"
	"os"
	"strings"
	"sync"
	"time"
)

// hostPolicy says which Host headers the page answers. A page on the
// internet can point its own name at the router's LAN address (DNS
// rebinding); the browser then sends that name as Host and lets the page
// read the answers as its own. Serving only the router's names and
// addresses stops that: the attacker cannot make a browser send a Host it
// does not own.
type hostPolicy struct {
	names map[string]bool // lower case, without a trailing dot
	// addrs lists the router's own addresses (net.InterfaceAddrs); they
	// are re-read when a Host names an address not in the last list, at
	// most every hostRefresh, so an address added later is served soon
	// and a stream of strange Hosts costs one read per period.
	addrs func() ([]netip.Addr, error)
	now   func() time.Time

	listen netip.Addr // the listen address, when it is one

	mu     sync.Mutex
	known  map[netip.Addr]bool // the last addrs
	readAt time.Time
}

const hostRefresh = 10 * time.Second

// newHostPolicy allows localhost, the loopback addresses, the listen
// address, the router's own addresses, its host name (alone, with .lan,
// OpenWrt's default domain, and with resolv.conf's search domains) and
// the names in extra.
func newHostPolicy(listen string, hostname string, domains, extra []string, addrs func() ([]netip.Addr, error), now func() time.Time) *hostPolicy {
	h := &hostPolicy{names: map[string]bool{"localhost": true}, addrs: addrs, now: now, known: map[netip.Addr]bool{}}
	add := func(n string) {
		if n = normHost(n); n != "" {
			h.names[n] = true
		}
	}
	if host, _, err := net.SplitHostPort(listen); err == nil {
		if a, err := netip.ParseAddr(host); err == nil {
			h.listen = a.Unmap().WithZone("")
		} else {
			add(host)
		}
	}
	if hostname != "" {
		add(hostname)
		short, _, _ := strings.Cut(hostname, ".")
		add(short)
		for _, d := range append([]string{"lan"}, domains...) {
			add(short + "." + d)
		}
	}
	for _, n := range extra {
		add(n)
	}
	return h
}

func normHost(n string) string {
	return strings.TrimSuffix(strings.ToLower(strings.TrimSpace(n)), ".")
}

// splitHost returns the host part of a Host header ("name", "name:port",
// "1.2.3.4:80", "[::1]:80"), or "" when it is malformed.
func splitHost(hostport string) string {
	if strings.HasPrefix(hostport, "[") {
		end := strings.IndexByte(hostport, ']')
		if end < 0 {
			return ""
		}
		if rest := hostport[end+1:]; rest != "" && (rest[0] != ':' || !validPort(rest[1:])) {
			return ""
		}
		return hostport[1:end]
	}
	host, port, found := strings.Cut(hostport, ":")
	if found && !validPort(port) {
		return ""
	}
	return host
}

func validPort(p string) bool {
	if p == "" || len(p) > 5 {
		return false
	}
	for i := 0; i < len(p); i++ {
		if p[i] < '0' || p[i] > '9' {
			return false
		}
	}
	return true
}

// allowed reports whether the router answers to Host header hostport.
func (h *hostPolicy) allowed(hostport string) bool {
	host := normHost(splitHost(hostport))
	if host == "" {
		return false
	}
	a, err := netip.ParseAddr(host)
	if err != nil {
		return h.names[host]
	}
	if a.Zone() != "" {
		return false // a browser never sends one
	}
	a = a.Unmap()
	if a.IsLoopback() || a == h.listen {
		return true
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.known[a] {
		return true
	}
	if now := h.now(); h.addrs != nil && (h.readAt.IsZero() || now.Sub(h.readAt) >= hostRefresh) {
		h.readAt = now
		if list, err := h.addrs(); err == nil {
			h.known = make(map[netip.Addr]bool, len(list))
			for _, x := range list {
				h.known[x.Unmap().WithZone("")] = true
			}
		}
	}
	return h.known[a]
}

// interfaceAddrs are the router's own addresses.
func interfaceAddrs() ([]netip.Addr, error) {
	list, err := net.InterfaceAddrs()
	if err != nil {
		return nil, err
	}
	var out []netip.Addr
	for _, a := range list {
		if p, err := netip.ParsePrefix(a.String()); err == nil {
			out = append(out, p.Addr())
		}
	}
	return out, nil
}

// searchDomains are the domain and search lines of resolv.conf (OpenWrt
// writes its own domain there, "lan" by default).
func searchDomains(path string) []string {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	var out []string
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) > 1 && (f[0] == "domain" || f[0] == "search") {
			out = append(out, f[1:]...)
		}
	}
	return out
}
