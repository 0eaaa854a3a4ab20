package netperf

import (
	"context"
	"errors"
	"io"
	"net"
	"net/netip"
	"time"
)

// Kinds of test the server runs, from its side.
type testKind int

const (
	kindRecv  testKind = iota // TCP_STREAM: the client sends
	kindXmit                  // TCP_MAERTS: the server sends
	kindTCPRR                 // TCP_RR
	kindUDPRR                 // UDP_RR
)

func (k testKind) String() string {
	return [...]string{"TCP_STREAM", "TCP_MAERTS", "TCP_RR", "UDP_RR"}[k]
}

// Bounds on what a client may ask for. maxIO is netperf's own largest
// message (MAXMESSAGESIZE); defIO is the send and receive size when the
// client leaves it to the server (-1), large enough to keep the system
// calls few. A UDP_RR message must fit one datagram.
const (
	maxIO      = 64 << 10
	defIO      = 64 << 10
	maxUDPSize = 65507
)

// test is a checked omni request: only what the server acts on.
type test struct {
	kind     testKind
	length   time.Duration
	ioSize   int // bytes per send or receive call (stream tests)
	reqSize  int // RR: request and response sizes
	rspSize  int
	tos      int // -1: not asked for
	wantCong bool
}

// check turns an omni request into a test, or refuses it with what is
// wrong. The client's choices of data port, local address and socket
// buffers are not honoured: the server binds an ephemeral port on the
// control connection's own address, so a client cannot make it bind
// anything else.
func (s *Server) check(o *OmniRequest, c net.Conn) (*test, error) {
	t := &test{tos: -1}
	switch {
	case o.TestLength == 0:
		return nil, refused(errnoInvalid, "a test of length 0 is not served; give -l in seconds")
	case o.TestLength < 0:
		return nil, refused(errnoInvalid, "tests by byte or transaction count (-l %d) are not served; give -l in seconds", o.TestLength)
	}
	t.length = time.Duration(o.TestLength) * time.Second
	if t.length > s.cfg.MaxDuration {
		return nil, refused(errnoInvalid, "a %v test exceeds this server's limit of %v; use a shorter -l", t.length, s.cfg.MaxDuration)
	}
	if o.Flags&FlagConnectTest != 0 {
		return nil, refused(errnoUnsupported, "connection tests (TCP_CRR, TCP_CC) are not served")
	}
	xmit, recv := o.Direction&DirXmit != 0, o.Direction&DirRecv != 0
	switch {
	case o.Protocol == ProtoTCP && o.SocketType == SockStream && recv && !xmit:
		t.kind = kindRecv
	case o.Protocol == ProtoTCP && o.SocketType == SockStream && xmit && !recv:
		t.kind = kindXmit
	case o.Protocol == ProtoTCP && o.SocketType == SockStream && xmit && recv:
		t.kind = kindTCPRR
	case o.Protocol == ProtoUDP && o.SocketType == SockDgram && xmit && recv:
		t.kind = kindUDPRR
	default:
		return nil, refused(errnoUnsupported, "test (protocol %d, socket type %d, direction %#x) is not served: only TCP_STREAM, TCP_MAERTS, TCP_RR and UDP_RR", o.Protocol, o.SocketType, o.Direction)
	}
	local := peerOf(c.LocalAddr())
	if fam := o.Family; (fam == FamilyInet && !local.Is4()) || (fam == FamilyInet6 && !local.Is6()) || (fam != FamilyInet && fam != FamilyInet6) {
		return nil, refused(errnoAddrFamily, "data connection family %d differs from the control connection's (%v): give netperf the same -4/-6 for both", fam, local)
	}
	switch t.kind {
	case kindRecv:
		t.ioSize = ioSize(int64(o.RecvSize))
	case kindXmit:
		t.ioSize = ioSize(int64(o.SendSize))
	default:
		limit := maxIO
		if t.kind == kindUDPRR {
			limit = maxUDPSize
		}
		t.reqSize, t.rspSize = max(int(o.RequestSize), 1), max(int(o.ResponseSize), 1)
		if t.reqSize > limit || t.rspSize > limit {
			return nil, refused(errnoInvalid, "request or response size (%d, %d bytes) over this server's limit of %d", t.reqSize, t.rspSize, limit)
		}
	}
	if o.SocketTOS >= 0 && o.SocketTOS <= 255 {
		t.tos = int(o.SocketTOS)
	}
	t.wantCong = o.Flags&FlagWantRemCong != 0
	return t, nil
}

// ioSize is a client's send or receive size, or the default when it
// leaves it to the server (-1, 0) or asks for more than netperf's maximum.
func ioSize(n int64) int {
	if n <= 0 || n > maxIO {
		return defIO
	}
	return int(n)
}

// run opens the test's data socket, tells the client where, runs the
// test and sends the results. until is the group's end: nothing runs past
// it.
func (s *Server) run(ctx context.Context, c net.Conn, t *test, until time.Time) {
	peer := peerOf(c.RemoteAddr())
	local := peerOf(c.LocalAddr())
	laddr := netip.AddrPortFrom(local, 0)
	var (
		ln  *net.TCPListener
		pc  *net.UDPConn
		err error
	)
	if t.kind == kindUDPRR {
		pc, err = net.ListenUDP("udp", net.UDPAddrFromAddrPort(laddr))
	} else {
		ln, err = net.ListenTCP("tcp", net.TCPAddrFromAddrPort(laddr))
	}
	if err != nil {
		s.refuse(c, errnoBusy, "netperf data socket", "cannot open a data socket on %v: %v", local, err)
		return
	}
	var port int
	if pc != nil {
		defer pc.Close()
		port = pc.LocalAddr().(*net.UDPAddr).Port
	} else {
		defer ln.Close()
		port = ln.Addr().(*net.TCPAddr).Port
	}
	if pc != nil && t.tos >= 0 && s.cfg.SetDSCP != nil {
		s.cfg.SetDSCP(pc, t.tos>>2)
	}
	resp := &OmniResponse{DataPort: int32(port), SocketTOS: int32(t.tos), TestLength: int32(t.length / time.Second),
		SendBufSize: -1, RecvBufSize: -1, SendSize: -1, RecvSize: -1}
	switch t.kind {
	case kindRecv:
		resp.RecvSize, resp.RecvWidth = int32(t.ioSize), 1
	case kindXmit:
		resp.SendSize, resp.SendWidth = int32(t.ioSize), 1
	default:
		resp.RecvSize, resp.SendSize, resp.RecvWidth, resp.SendWidth = int32(t.reqSize), int32(t.rspSize), 1, 1
	}
	m, err := resp.Message()
	if err != nil {
		return
	}
	c.SetDeadline(time.Now().Add(s.cfg.HandshakeTimeout))
	if err := WriteMessage(c, &m); err != nil {
		return
	}
	c.SetDeadline(time.Time{})
	start := time.Now()
	// The test's own end: its length, a pad for what is still queued, and
	// never past the group's end or the server's.
	end := start.Add(t.length + receivePad)
	if t.kind == kindXmit {
		end = start.Add(t.length)
	}
	end = minTime(end, until)
	tctx, cancel := context.WithDeadline(ctx, end.Add(drainWait))
	defer cancel()
	// The control connection closing (netperf killed) ends the test too:
	// nothing more is expected on it until the results are sent.
	go func() {
		var b [1]byte
		c.Read(b[:])
		cancel()
	}()
	var res result
	if pc != nil {
		res = s.udpRR(tctx, pc, peer, t, end)
	} else {
		d, aerr := acceptFrom(tctx, ln, peer, end)
		if aerr != nil {
			s.cfg.Gate.Reject(c.RemoteAddr(), "netperf no data connection", "netperf: closing: no data connection from %v: %v", peer, aerr)
			return
		}
		stop := context.AfterFunc(tctx, func() { d.Close() })
		defer stop()
		defer d.Close()
		if t.tos >= 0 && s.cfg.SetDSCP != nil {
			s.cfg.SetDSCP(d, t.tos>>2)
		}
		switch t.kind {
		case kindRecv:
			res = receive(d, t, end)
		case kindXmit:
			res = transmit(d, t, end)
		default:
			res = tcpRR(d, t, end)
		}
		if t.wantCong {
			res.cong = congestion(d)
		}
		d.Close()
	}
	res.elapsed = time.Since(start)
	if res.endedByTime && t.kind != kindXmit {
		// As netserver does, a receiving test ended by the clock does
		// not count the pad it waited for the client's close.
		res.elapsed = max(res.elapsed-receivePad, 0)
	}
	if ctx.Err() != nil {
		return
	}
	c.SetWriteDeadline(time.Now().Add(drainWait))
	results := &OmniResults{
		BytesReceived: res.bytesIn, BytesSent: res.bytesOut, RecvCalls: res.recvCalls, SendCalls: res.sendCalls,
		TransReceived: res.trans, ElapsedTime: float32(res.elapsed.Seconds()), RecvBufSize: -1, SendBufSize: -1,
		CongControl: res.cong,
	}
	if m, err := results.Message(); err == nil {
		WriteMessage(c, &m)
	}
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// result is what a test moved, for the client's results message.
type result struct {
	bytesIn, bytesOut    uint64
	recvCalls, sendCalls uint32
	trans                uint32
	elapsed              time.Duration
	endedByTime          bool
	cong                 string
}

// acceptFrom accepts the test's data connection: only from the control
// connection's peer address (any other is closed at once), until end.
func acceptFrom(ctx context.Context, ln *net.TCPListener, peer netip.Addr, end time.Time) (*net.TCPConn, error) {
	stop := context.AfterFunc(ctx, func() { ln.Close() })
	defer stop()
	ln.SetDeadline(end)
	for {
		d, err := ln.AcceptTCP()
		if err != nil {
			return nil, err
		}
		if peerOf(d.RemoteAddr()) == peer {
			return d, nil
		}
		d.Close()
	}
}

// receive reads a TCP_STREAM to its end: the client's close, or end.
func receive(d *net.TCPConn, t *test, end time.Time) result {
	var r result
	buf := make([]byte, t.ioSize)
	d.SetReadDeadline(end)
	for {
		n, err := d.Read(buf)
		r.bytesIn += uint64(n)
		r.recvCalls++
		if err != nil {
			r.endedByTime = isTimeout(err)
			return r
		}
	}
}

// transmit sends a TCP_MAERTS for its length, then closes its side and
// waits (briefly) for the client's close.
func transmit(d *net.TCPConn, t *test, end time.Time) result {
	var r result
	buf := make([]byte, t.ioSize)
	d.SetWriteDeadline(end)
	for {
		n, err := d.Write(buf)
		r.bytesOut += uint64(n)
		if n > 0 {
			r.sendCalls++
		}
		if err != nil {
			r.endedByTime = isTimeout(err)
			break
		}
	}
	d.CloseWrite()
	d.SetReadDeadline(time.Now().Add(drainWait))
	io.Copy(io.Discard, io.LimitReader(d, maxIO))
	return r
}

// tcpRR answers each request of reqSize bytes with rspSize bytes until
// the client closes or end.
func tcpRR(d *net.TCPConn, t *test, end time.Time) result {
	var r result
	d.SetNoDelay(true)
	d.SetDeadline(end)
	in, out := make([]byte, t.reqSize), make([]byte, t.rspSize)
	for {
		n, err := io.ReadFull(d, in)
		r.bytesIn += uint64(n)
		r.recvCalls++
		if err != nil {
			r.endedByTime = isTimeout(err)
			return r
		}
		n, err = d.Write(out)
		r.bytesOut += uint64(n)
		r.sendCalls++
		if err != nil {
			r.endedByTime = isTimeout(err)
			return r
		}
		r.trans++
	}
}

// udpRR answers datagrams from the control connection's peer address
// (from any of its ports, as netserver does: a client may keep several
// probes in flight from several sockets, as sqm test --netperf does; any
// other source is dropped, never answered) with rspSize bytes, one answer
// per request, until the client's zero-length end-of-test datagram or end.
func (s *Server) udpRR(ctx context.Context, pc *net.UDPConn, peer netip.Addr, t *test, end time.Time) result {
	var r result
	stop := context.AfterFunc(ctx, func() { pc.Close() })
	defer stop()
	pc.SetReadDeadline(end)
	in, out := make([]byte, maxUDPSize+1), make([]byte, t.rspSize)
	for {
		n, src, err := pc.ReadFromUDPAddrPort(in)
		if err != nil {
			r.endedByTime = isTimeout(err)
			return r
		}
		if src.Addr().Unmap() != peer {
			continue
		}
		r.recvCalls++
		if n == 0 {
			return r // the client's end of test
		}
		r.bytesIn += uint64(n)
		m, err := pc.WriteToUDPAddrPort(out, src)
		r.bytesOut += uint64(m)
		r.sendCalls++
		if err == nil {
			r.trans++
		}
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
