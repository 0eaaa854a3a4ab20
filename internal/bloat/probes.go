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

	"sqm/internal/irtt"
)

// kind is one stream of latency probes (a UDP marking, or ICMP echo).
type kind struct {
	name string
	dscp int
	conn net.PacketConn
	// server is where the probes go (host:port, ICMP: host) and protocol
	// what answers them: sqm, irtt or icmp.
	server, protocol string
	// interval between probes; 0 means Options.Interval. An irtt server
	// may grant a longer one than asked for.
	interval time.Duration
	// irtt is the open irtt connection of an irtt kind.
	irtt *irtt.Session
	// send writes probe seq, sent at offset t from the start.
	send func(seq uint64, t time.Duration) error
	// read blocks for one reply.
	read func(buf []byte) (reply, error)

	mu   sync.Mutex
	recs []probeRec
	// DSCP of the last reply as received here, and of its request as the
	// server received it; -1 unknown.
	downDSCP, upDSCP int
	// srvCount is the highest count of received probes an irtt server
	// reported, to tell probes lost on the way up from those lost on the
	// way back; badReplies counts replies that failed the irtt checks.
	srvCount   uint32
	lastSeq    uint64 // the probe whose reply brought srvCount
	hasCount   bool
	srvClosed  bool // a reply said the server closed the connection
	badReplies int
	lastBad    error
}

// reply is what a kind's read found in one datagram.
type reply struct {
	at  time.Time // kernel receive time
	seq uint64
	// srvRecv and srvSend are the server's wall clock receive and send
	// times in ns, 0 if it gave none; proc is its time between the two
	// (from its monotonic clock where it has one).
	srvRecv, srvSend int64
	proc             time.Duration
	ok               bool // answers one of our probes
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

// offset is what to subtract from the server's clock to read one-way
// delays. An irtt server's timestamps that are consistent with synchronised
// clocks (no one-way delay came out negative) are taken as they are: public
// irtt servers keep NTP time, and forcing symmetry would misplace a queue
// that was present even on the fastest probe. Otherwise the offset is
// estimated from the fastest answered probe, assuming its path was
// symmetric (as crusader does).
func (k *kind) offset() (int64, bool) {
	best := -1
	consistent := true
	for i, r := range k.recs {
		if r.got && r.hasOWD {
			consistent = consistent && r.a >= 0 && r.b >= 0
			if best < 0 || r.rtt < k.recs[best].rtt {
				best = i
			}
		}
	}
	if best < 0 {
		return 0, false
	}
	if k.protocol == "irtt" && consistent {
		return 0, true
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
	icmpTo := c.server.Addr()
	if c.o.IRTT != "" {
		var err error
		if raddr, err = c.resolveIRTT(network); err != nil {
			return err
		}
		icmpTo = raddr.AddrPort().Addr().Unmap()
	}
	fail := func(err error) error {
		for _, k := range c.kinds {
			k.conn.Close()
		}
		c.kinds = nil
		return err
	}
	for _, u := range udp {
		var conn *net.UDPConn
		err := c.o.Enter(func() error {
			var err error
			conn, err = net.DialUDP(network, nil, raddr)
			return err
		})
		if err != nil {
			return fail(fmt.Errorf("bloat: open udp probe socket to %s: %w", raddr, err))
		}
		if u.dscp != 0 {
			if err := setDSCP(conn, u.dscp); err != nil {
				c.note("cannot mark %s probes with DSCP %d: %v", u.name, u.dscp, err)
			}
		}
		if c.o.IRTT == "" {
			c.kinds = append(c.kinds, c.udpKind(u.name, u.dscp, conn))
			continue
		}
		k, err := c.irttKind(u.name, u.dscp, conn)
		if err != nil {
			conn.Close()
			return fail(fmt.Errorf("bloat: irtt server %s: %w", raddr, err))
		}
		c.kinds = append(c.kinds, k)
	}
	c.irttNotes()
	if !c.o.NoICMP {
		k, err := c.icmpKind(icmpTo)
		if err != nil {
			c.note("ICMP probes unavailable (%v); going on with UDP probes only", err)
		} else {
			c.kinds = append(c.kinds, k)
		}
	}
	return nil
}

func (c *client) udpKind(name string, dscp int, conn *net.UDPConn) *kind {
	k := &kind{name: name, dscp: dscp, conn: conn, downDSCP: -1, upDSCP: -1,
		server: c.server.String(), protocol: "sqm"}
	out := make([]byte, probeLen)
	k.send = func(seq uint64, t time.Duration) error {
		p := probe{Kind: probeRequest, Token: c.token, Seq: seq, ClientSend: int64(t)}
		_, err := conn.Write(p.Marshal(out))
		return err
	}
	enableRxTimestamps(conn)
	oob := make([]byte, 128)
	k.read = func(buf []byte) (reply, error) {
		n, _, at, tos, err := readStamped(conn, buf, oob)
		if err != nil {
			return reply{at: at}, err
		}
		var p probe
		if p.Unmarshal(buf[:n]) != nil || p.Kind != probeReply || p.Token != c.token {
			return reply{at: at}, nil
		}
		// The echoed client time must match what was sent for that seq;
		// anything else is stale or forged.
		k.mu.Lock()
		ok := p.Seq < uint64(len(k.recs)) && int64(k.recs[p.Seq].sent) == p.ClientSend
		if ok {
			k.downDSCP = tos
			k.upDSCP = int(p.SeenDSCP) - 1
		}
		k.mu.Unlock()
		return reply{at: at, seq: p.Seq, srvRecv: p.ServerRecv, srvSend: p.ServerSend,
			proc: time.Duration(p.ServerSend - p.ServerRecv), ok: ok}, nil
	}
	return k
}

// icmpKind opens an ICMP echo socket: an unprivileged ping socket if
// net.ipv4.ping_group_range allows it, a raw socket otherwise (root or
// CAP_NET_RAW).
func (c *client) icmpKind(ip netip.Addr) (*kind, error) {
	v6 := ip.Is6()
	proto, echo, echoReply := 1, icmp.Type(ipv4.ICMPTypeEcho), icmp.Type(ipv4.ICMPTypeEchoReply)
	rawNet, wildcard := "ip4:icmp", "0.0.0.0"
	if v6 {
		proto, echo, echoReply = 58, ipv6.ICMPTypeEchoRequest, ipv6.ICMPTypeEchoReply
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
			return nil, errors.New(icmpDeniedHint)
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
	k := &kind{name: "icmp", conn: conn, downDSCP: -1, upDSCP: -1, server: ip.String(), protocol: "icmp"}
	k.send = func(seq uint64, t time.Duration) error {
		m := icmp.Message{Type: echo, Body: &icmp.Echo{ID: id, Seq: int(uint16(seq)), Data: cookie[:]}}
		b, err := m.Marshal(nil)
		if err != nil {
			return err
		}
		_, err = conn.WriteTo(b, dst)
		return err
	}
	k.read = func(buf []byte) (reply, error) {
		n, from, at, _, err := readStamped(conn, buf, oob)
		if err != nil {
			return reply{at: at}, err
		}
		m, err := icmp.ParseMessage(proto, buf[:n])
		if err != nil || m.Type != echoReply {
			return reply{at: at}, nil
		}
		e, ok := m.Body.(*icmp.Echo)
		if !ok || len(e.Data) < len(cookie) || string(e.Data[:len(cookie)]) != string(cookie[:]) {
			return reply{at: at}, nil // another process's ping
		}
		if a, ok := from.(*net.IPAddr); ok && !a.IP.Equal(dst.(*net.IPAddr).IP) {
			return reply{at: at}, nil
		}
		// Widen the 16-bit sequence number to the latest probe with those bits.
		k.mu.Lock()
		sent := uint64(len(k.recs))
		k.mu.Unlock()
		if sent == 0 {
			return reply{at: at}, nil
		}
		last := sent - 1
		seq := last - uint64(uint16(uint16(last)-uint16(e.Seq)))
		return reply{at: at, seq: seq, ok: seq <= last}, nil
	}
	return k, nil
}

// sendProbes sends one probe every interval from offset until the end.
func (c *client) sendProbes(ctx context.Context, k *kind, offset time.Duration) {
	if k.irtt != nil {
		// Requests that left before the close reach the server before it
		// (one socket, one path), so their replies are still sent; the
		// close spares the server its idle timeout.
		defer k.irtt.Close()
	}
	every := k.interval
	if every <= 0 {
		every = c.o.Interval
	}
	var failed bool
	for i := 0; ; i++ {
		due := offset + time.Duration(i)*every
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
		rp, err := k.read(buf)
		// Kernel timestamps carry no monotonic reading; Sub then uses the
		// wall clocks of both, which is what the kernel stamped.
		now := rp.at.Sub(c.start)
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			if errors.Is(err, net.ErrClosed) {
				k.finish(c)
				return
			}
			// e.g. ECONNREFUSED from an ICMP port unreachable: the probe
			// counts as lost; pause so a persistent error cannot spin.
			time.Sleep(time.Millisecond)
			continue
		}
		if !rp.ok {
			continue
		}
		k.mu.Lock()
		if rp.seq < uint64(len(k.recs)) && !k.recs[rp.seq].got {
			r := &k.recs[rp.seq]
			r.got = true
			r.rtt = now - r.sent - rp.proc
			if rp.srvRecv != 0 {
				wallSend := c.start.UnixNano() + int64(r.sent)
				wallRecv := c.start.UnixNano() + int64(now)
				r.a = rp.srvRecv - wallSend
				r.b = wallRecv - rp.srvSend
				r.hasOWD = true
			}
			c.lastRTT.Store(int64(r.rtt))
		}
		k.mu.Unlock()
	}
}

// IRTTPort is irtt's default server port.
const IRTTPort = irtt.DefaultPort

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
func irttHostPort(addr string) string { return withPort(addr, IRTTPort) }
