package web

import (
	"net"
	"net/netip"
	"sync"
)

// clientKey is what the page counts a client by: its IPv4 address, or the
// /64 its IPv6 address is in (one host picks addresses from a whole /64 at
// will: privacy addresses, or any of 2^64 it likes to assign itself).
func clientKey(addr netip.Addr) netip.Prefix {
	addr = addr.Unmap().WithZone("")
	if addr.Is4() {
		return netip.PrefixFrom(addr, 32)
	}
	p, _ := addr.Prefix(64)
	return p
}

// remoteKey is clientKey of a "host:port" remote address; a remote address
// that does not parse (not TCP) is one client of its own.
func remoteKey(remote string) netip.Prefix {
	ap, err := netip.ParseAddrPort(remote)
	if err != nil {
		return netip.Prefix{}
	}
	return clientKey(ap.Addr())
}

// limitListener caps the connections the page holds: in total and per
// client (clientKey). A connection over the per-client cap is closed as
// soon as it is accepted, before the server gives it a goroutine and
// buffers. At the total cap, a client holding fewer connections than the
// biggest holder still gets in: the biggest holder's oldest connection is
// closed to make room, so many addresses that each stay under the
// per-client cap cannot lock everyone else out; only a client that would
// itself be the biggest holder is refused.
type limitListener struct {
	net.Listener
	total, perClient int
	// refused, when set, is told of each connection closed at accept (for
	// the log, rate-limited by the caller).
	refused func(key netip.Prefix, why string)
	// peer, when set, vets an admitted connection's remote address: a
	// non-empty answer closes it with that reason (Server.WANPeer).
	peer func(netip.Addr) string

	mu    sync.Mutex
	n     int
	conns map[netip.Prefix][]*limitConn // per client, oldest first
}

func newLimitListener(ln net.Listener, total, perClient int) *limitListener {
	return &limitListener{Listener: ln, total: total, perClient: perClient, conns: map[netip.Prefix][]*limitConn{}}
}

// Accept returns the next connection within the caps; those over them are
// closed here and never returned.
func (l *limitListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		lc := l.admit(c)
		if lc == nil {
			continue
		}
		if l.peer != nil {
			if ap, err := netip.ParseAddrPort(c.RemoteAddr().String()); err == nil {
				if why := l.peer(ap.Addr().Unmap()); why != "" {
					reset(c)
					lc.Close()
					if l.refused != nil {
						l.refused(lc.key, why)
					}
					continue
				}
			}
		}
		return lc, nil
	}
}

func (l *limitListener) admit(c net.Conn) *limitConn {
	key := remoteKey(c.RemoteAddr().String())
	l.mu.Lock()
	var evict *limitConn
	why := ""
	switch {
	case len(l.conns[key]) >= l.perClient:
		why = "per-client connection cap"
	case l.n >= l.total:
		var big netip.Prefix
		for k, cs := range l.conns {
			if len(cs) > len(l.conns[big]) {
				big = k
			}
		}
		if len(l.conns[big]) > len(l.conns[key])+1 {
			evict = l.conns[big][0]
			l.remove(evict)
		} else {
			why = "total connection cap"
		}
	}
	var lc *limitConn
	if why == "" {
		lc = &limitConn{Conn: c, l: l, key: key}
		l.conns[key] = append(l.conns[key], lc)
		l.n++
	}
	l.mu.Unlock()
	if evict != nil {
		evict.Conn.Close()
	}
	if lc == nil {
		reset(c)
		c.Close()
		if l.refused != nil {
			l.refused(key, why)
		}
	}
	return lc
}

// remove takes c out of the counts; false if it was not in them (closed
// already, or evicted). mu is held.
func (l *limitListener) remove(c *limitConn) bool {
	cs := l.conns[c.key]
	for i, x := range cs {
		if x == c {
			cs = append(cs[:i:i], cs[i+1:]...)
			if len(cs) == 0 {
				delete(l.conns, c.key)
			} else {
				l.conns[c.key] = cs
			}
			l.n--
			return true
		}
	}
	return false
}

// counts returns the connections held in total and per client.
func (l *limitListener) counts() (int, map[netip.Prefix]int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	m := make(map[netip.Prefix]int, len(l.conns))
	for k, cs := range l.conns {
		m[k] = len(cs)
	}
	return l.n, m
}

// limitConn is an admitted connection; closing it (once, however often
// Close is called, by the server or by an eviction) frees its place.
type limitConn struct {
	net.Conn
	l    *limitListener
	key  netip.Prefix
	once sync.Once
}

func (c *limitConn) Close() error {
	c.once.Do(func() {
		c.l.mu.Lock()
		c.l.remove(c)
		c.l.mu.Unlock()
	})
	return c.Conn.Close()
}

// reset makes Close send a reset rather than a FIN: nothing lingers in the
// kernel for the peer to keep half-open.
func reset(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		tc.SetLinger(0)
	}
}
