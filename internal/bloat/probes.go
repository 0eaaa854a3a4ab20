package bloat

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strconv"
	"sync"
	"syscall"
	"time"

	"golang.org/x/net/icmp"
	"golang.org/x/net/ipv4"
	"golang.org/x/net/ipv6"
)

// kind is one stream of latency probes (a UDP marking, or ICMP echo).
type kind struct {
	name string
	dscp int
	conn net.PacketConn
	// send writes probe seq, sent at offset t from the start.
	send func(seq uint64, t time.Duration) error
	// read blocks for one reply and reports its kernel receive time, seq,
	// server times, and whether it answers one of our probes.
	read func(buf []byte) (at time.Time, seq uint64, srvRecv, srvSend int64, ok bool, err error)

	mu   sync.Mutex
	recs []probeRec
	// DSCP of the last reply as received here, and of its request as the
	// server received it; -1 unknown.
	downDSCP, upDSCP int
}

type probeRec struct {
	sent   time.Duration // since start
	got    bool
	rtt    time.Duration
	hasOWD bool
	// a = server receive − client send (wall), b = client receive − server
	// send (wall); a+b = rtt; a−offset and b+offset are the one-way delays.
	a, b int64
}

// offset estimates the server's clock offset from the fastest answered
// probe, assuming that probe's path was symmetric (as crusader does).
func (k *kind) offset() (int64, bool) {
	best := -1
	for i, r := range k.recs {
		if r.got && r.hasOWD && (best < 0 || r.rtt < k.recs[best].rtt) {
			best = i
		}
	}
	if best < 0 {
		return 0, false
	}
	r := k.recs[best]
	return r.a - (r.a+r.b)/2, true
}

func (c *client) openProbes() error {
	var udp []struct {
		name string
		dscp int
	}
	switch c.o.Mode {
	case ModeRRUL:
		udp = append(udp, struct {
			name string
			dscp int
		}{"udp-ef", DSCPEF}, struct {
			name string
			dscp int
		}{"udp-be", DSCPCS0}, struct {
			name string
			dscp int
		}{"udp-bk", DSCPCS1})
	default:
		udp = append(udp, struct {
			name string
			dscp int
		}{"udp-be", DSCPCS0})
	}
	network := "udp" + c.o.Network[3:]
	raddr := net.UDPAddrFromAddrPort(c.server)
	for _, u := range udp {
		var conn *net.UDPConn
		err := c.o.Enter(func() error {
			var err error
			conn, err = net.DialUDP(network, nil, raddr)
			return err
		})
		if err != nil {
			for _, k := range c.kinds {
				k.conn.Close()
			}
			c.kinds = nil
			return fmt.Errorf("bloat: open udp probe socket to %s: %w", raddr, err)
		}
		if u.dscp != 0 {
			if err := setDSCP(conn, u.dscp); err != nil {
				c.note("cannot mark %s probes with DSCP %d: %v", u.name, u.dscp, err)
			}
		}
		c.kinds = append(c.kinds, c.udpKind(u.name, u.dscp, conn))
	}
	if !c.o.NoICMP {
		k, err := c.icmpKind()
		if err != nil {
			c.note("ICMP probes unavailable (%v); going on with UDP probes only", err)
		} else {
			c.kinds = append(c.kinds, k)
		}
	}
	return nil
}

func (c *client) udpKind(name string, dscp int, conn *net.UDPConn) *kind {
	k := &kind{name: name, dscp: dscp, conn: conn, downDSCP: -1, upDSCP: -1}
	out := make([]byte, probeLen)
	k.send = func(seq uint64, t time.Duration) error {
		p := probe{kind: probeRequest, token: c.token, seq: seq, clientSend: int64(t)}
		_, err := conn.Write(p.marshal(out))
		return err
	}
	enableRxTimestamps(conn)
	oob := make([]byte, 128)
	k.read = func(buf []byte) (time.Time, uint64, int64, int64, bool, error) {
		n, _, at, tos, err := readStamped(conn, buf, oob)
		if err != nil {
			return at, 0, 0, 0, false, err
		}
		var p probe
		if p.unmarshal(buf[:n]) != nil || p.kind != probeReply || p.token != c.token {
			return at, 0, 0, 0, false, nil
		}
		// The echoed client time must match what was sent for that seq;
		// anything else is stale or forged.
		k.mu.Lock()
		ok := p.seq < uint64(len(k.recs)) && int64(k.recs[p.seq].sent) == p.clientSend
		if ok {
			k.downDSCP = tos
			k.upDSCP = int(p.seenDSCP) - 1
		}
		k.mu.Unlock()
		return at, p.seq, p.serverRecv, p.serverSend, ok, nil
	}
	return k
}

// icmpKind opens an ICMP echo socket: an unprivileged ping socket if
// net.ipv4.ping_group_range allows it, a raw socket otherwise (root or
// CAP_NET_RAW).
func (c *client) icmpKind() (*kind, error) {
	ip := c.server.Addr()
	v6 := ip.Is6()
	proto, echo, reply := 1, icmp.Type(ipv4.ICMPTypeEcho), icmp.Type(ipv4.ICMPTypeEchoReply)
	rawNet, wildcard := "ip4:icmp", "0.0.0.0"
	if v6 {
		proto, echo, reply = 58, ipv6.ICMPTypeEchoRequest, ipv6.ICMPTypeEchoReply
		rawNet, wildcard = "ip6:ipv6-icmp", "::"
	}
	var conn net.PacketConn
	var dst net.Addr
	var errDgram, errRaw error
	c.o.Enter(func() error {
		conn, errDgram = listenPing(v6)
		if errDgram == nil {
			dst = &net.UDPAddr{IP: ip.AsSlice(), Zone: ip.Zone()}
			return nil
		}
		conn, errRaw = net.ListenPacket(rawNet, wildcard)
		if errRaw == nil {
			dst = &net.IPAddr{IP: ip.AsSlice(), Zone: ip.Zone()}
		}
		return nil
	})
	if conn == nil {
		if errors.Is(errRaw, os.ErrPermission) || errors.Is(errRaw, syscall.EPERM) {
			return nil, fmt.Errorf("unprivileged ping sockets are not allowed (sysctl net.ipv4.ping_group_range) and raw sockets need root or CAP_NET_RAW")
		}
		return nil, fmt.Errorf("ping socket: %v; raw socket: %v", errDgram, errRaw)
	}
	enableRxTimestamps(conn)
	oob := make([]byte, 128)
	var cookie [8]byte
	rand.Read(cookie[:])
	var idb [2]byte
	rand.Read(idb[:])
	id := int(idb[0])<<8 | int(idb[1])
	k := &kind{name: "icmp", conn: conn, downDSCP: -1, upDSCP: -1}
	k.send = func(seq uint64, t time.Duration) error {
		m := icmp.Message{Type: echo, Body: &icmp.Echo{ID: id, Seq: int(uint16(seq)), Data: cookie[:]}}
		b, err := m.Marshal(nil)
		if err != nil {
			return err
		}
		_, err = conn.WriteTo(b, dst)
		return err
	}
	k.read = func(buf []byte) (time.Time, uint64, int64, int64, bool, error) {
		n, from, at, _, err := readStamped(conn, buf, oob)
		if err != nil {
			return at, 0, 0, 0, false, err
		}
		m, err := icmp.ParseMessage(proto, buf[:n])
		if err != nil || m.Type != reply {
			return at, 0, 0, 0, false, nil
		}
		e, ok := m.Body.(*icmp.Echo)
		if !ok || len(e.Data) < len(cookie) || string(e.Data[:len(cookie)]) != string(cookie[:]) {
			return at, 0, 0, 0, false, nil // another process's ping
		}
		if a, ok := from.(*net.IPAddr); ok && !a.IP.Equal(dst.(*net.IPAddr).IP) {
			return at, 0, 0, 0, false, nil
		}
		// Widen the 16-bit sequence number to the latest probe with those bits.
		k.mu.Lock()
		sent := uint64(len(k.recs))
		k.mu.Unlock()
		if sent == 0 {
			return at, 0, 0, 0, false, nil
		}
		last := sent - 1
		seq := last - uint64(uint16(uint16(last)-uint16(e.Seq)))
		return at, seq, 0, 0, seq <= last, nil
	}
	return k, nil
}

// sendProbes sends one probe every interval from offset until the end.
func (c *client) sendProbes(ctx context.Context, k *kind, offset time.Duration) {
	var failed bool
	for i := 0; ; i++ {
		due := offset + time.Duration(i)*c.o.Interval
		if due >= c.total {
			return
		}
		select {
		case <-time.After(time.Until(c.start.Add(due))):
		case <-ctx.Done():
			return
		}
		t := time.Since(c.start)
		k.mu.Lock()
		seq := uint64(len(k.recs))
		k.recs = append(k.recs, probeRec{sent: t})
		k.mu.Unlock()
		if err := k.send(seq, t); err != nil && !failed {
			failed = true // count as lost; say so once
			c.note("%s probe send failed: %v", k.name, err)
		}
	}
}

// receive matches replies to probes until the socket is closed.
func (k *kind) receive(c *client) {
	buf := make([]byte, 1500)
	for {
		at, seq, srvRecv, srvSend, ok, err := k.read(buf)
		// Kernel timestamps carry no monotonic reading; Sub then uses the
		// wall clocks of both, which is what the kernel stamped.
		now := at.Sub(c.start)
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			if errors.Is(err, net.ErrClosed) {
				return
			}
			// e.g. ECONNREFUSED from an ICMP port unreachable: the probe
			// counts as lost; pause so a persistent error cannot spin.
			time.Sleep(time.Millisecond)
			continue
		}
		if !ok {
			continue
		}
		k.mu.Lock()
		if seq < uint64(len(k.recs)) && !k.recs[seq].got {
			r := &k.recs[seq]
			r.got = true
			r.rtt = now - r.sent
			if srvRecv != 0 {
				r.rtt -= time.Duration(srvSend - srvRecv)
				wallSend := c.start.UnixNano() + int64(r.sent)
				wallRecv := c.start.UnixNano() + int64(now)
				r.a = srvRecv - wallSend
				r.b = wallRecv - srvSend
				r.hasOWD = true
			}
			c.lastRTT.Store(int64(r.rtt))
		}
		k.mu.Unlock()
	}
}

// IRTTPort is irtt's default server port.
const IRTTPort = 2112

// checkIRTT refuses a malformed --irtt address before anything is opened.
func (o *Options) checkIRTT() error {
	if o.IRTT == "" {
		if len(o.IRTTKey) > 0 {
			return errors.New("bloat: an irtt HMAC key was given without an irtt server")
		}
		return nil
	}
	host, port, err := net.SplitHostPort(irttHostPort(o.IRTT))
	if err != nil || host == "" {
		return fmt.Errorf("bloat: irtt server %q: want HOST or HOST:PORT", o.IRTT)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return fmt.Errorf("bloat: irtt server %q: port %q is not a number in 1..65535", o.IRTT, port)
	}
	return nil
}

// irttHostPort adds irtt's default port when addr names none.
func irttHostPort(addr string) string {
	if _, _, err := net.SplitHostPort(addr); err == nil {
		return addr
	}
	if a, err := netip.ParseAddr(addr); err == nil {
		return netip.AddrPortFrom(a, IRTTPort).String()
	}
	if len(addr) > 2 && addr[0] == '[' && addr[len(addr)-1] == ']' {
		addr = addr[1 : len(addr)-1]
	}
	return net.JoinHostPort(addr, strconv.Itoa(IRTTPort))
}
