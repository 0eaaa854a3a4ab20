package netperf

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/netip"
	"syscall"
	"time"
)

// A client runs each test on its own control connection, as the netperf
// command does (flent and betterspeedtest start one netperf process per
// stream): netserver serves one test at a time per control connection, so
// parallel streams need parallel connections.

// Client runs tests against one netserver.
type Client struct {
	// Server is the control address (port DefaultPort by convention).
	Server netip.AddrPort
	// Passphrase, if set, is sent first on every control connection, for a
	// netserver started with -Z. It travels in clear text.
	Passphrase string
	// DialTCP opens a TCP connection to addr (the control connection, and
	// the data connection of a TCP test), marked with DSCP dscp (0: none).
	DialTCP func(ctx context.Context, addr netip.AddrPort, dscp int) (net.Conn, error)
	// Timeout bounds each wait for a control message (default 10 s).
	Timeout time.Duration
}

// RefusedError is a server's refusal of a test: the errno it answered
// with, or its closing the control connection instead of answering.
type RefusedError struct {
	Server netip.AddrPort
	Test   string // TCP_STREAM, TCP_MAERTS, UDP_RR
	Errno  int32  // 0: the connection was closed without an answer
}

func (e *RefusedError) Error() string {
	if e.Errno == 0 {
		return fmt.Sprintf("netperf server %s closed the control connection instead of answering the %s request: it may want a passphrase (netserver -Z), limit tests per client, or not be a netperf 2.6+ netserver", e.Server, e.Test)
	}
	return fmt.Sprintf("netperf server %s refused the %s test: error %d (%s)", e.Server, e.Test, e.Errno, ErrnoText(e.Errno))
}

func (c *Client) timeout() time.Duration {
	if c.Timeout > 0 {
		return c.Timeout
	}
	return 10 * time.Second
}

// request opens a control connection, sends the passphrase if any and the
// omni request, and reads the response.
func (c *Client) request(ctx context.Context, test string, req *OmniRequest) (net.Conn, OmniResponse, error) {
	var resp OmniResponse
	m, err := req.Message()
	if err != nil {
		return nil, resp, err
	}
	ctl, err := c.DialTCP(ctx, c.Server, 0)
	if err != nil {
		return nil, resp, fmt.Errorf("netperf: connect to netserver %s: %w (is netserver running there and port %d open?)", c.Server, err, c.Server.Port())
	}
	fail := func(err error) (net.Conn, OmniResponse, error) {
		ctl.Close()
		return nil, resp, err
	}
	ctl.SetDeadline(time.Now().Add(c.timeout()))
	if c.Passphrase != "" {
		p, err := PassphraseMessage(c.Passphrase)
		if err != nil {
			return fail(err)
		}
		if err := WriteMessage(ctl, &p); err != nil {
			return fail(err)
		}
	}
	if err := WriteMessage(ctl, &m); err != nil {
		return fail(err)
	}
	a, err := ReadMessage(ctl)
	switch {
	case errors.Is(err, io.EOF) || isReset(err):
		return fail(&RefusedError{Server: c.Server, Test: test})
	case err != nil:
		return fail(fmt.Errorf("netperf server %s, %s: %w", c.Server, test, err))
	case a.Errno() != 0:
		return fail(&RefusedError{Server: c.Server, Test: test, Errno: a.Errno()})
	}
	resp, err = DecodeOmniResponse(&a)
	if err != nil {
		return fail(fmt.Errorf("netperf server %s, %s: %w", c.Server, test, err))
	}
	if resp.DataPort <= 0 || resp.DataPort > 65535 {
		return fail(fmt.Errorf("netperf server %s, %s: data port %d in its response is not 1..65535", c.Server, test, resp.DataPort))
	}
	ctl.SetDeadline(time.Time{})
	return ctl, resp, nil
}

// isReset reports a connection reset: netserver's way of refusing, when
// it closes a control connection with our request still unread.
func isReset(err error) bool { return errors.Is(err, syscall.ECONNRESET) }

// Stream is a running TCP_STREAM or TCP_MAERTS test.
type Stream struct {
	// Conn is the data connection: write to it for an upload, read it for
	// a download.
	Conn net.Conn
	// Upload says which test this is: TCP_STREAM (true) or TCP_MAERTS.
	Upload bool
	// Length is the test length the server was asked for.
	Length time.Duration
	// Response is the server's answer to the request.
	Response OmniResponse
	ctl      net.Conn
	c        *Client
}

// Test names the stream's netperf test.
func (s *Stream) Test() string {
	if s.Upload {
		return "TCP_STREAM"
	}
	return "TCP_MAERTS"
}

// StreamRequest is the omni request netperf 2.7 sends for `netperf -t
// TCP_STREAM` (upload true) or `-t TCP_MAERTS` with -l length and
// -Y dscp,dscp: the server receives (or sends) for length, rounded up to
// whole seconds, marking its data socket with the DSCP (0: unmarked).
func StreamRequest(upload bool, length time.Duration, dscp int, family int32) OmniRequest {
	r := OmniRequest{
		SendBufSize: -1, SendSize: -1, SendAlign: 8, RequestSize: -1,
		RecvBufSize: -1, RecvSize: -1, RecvAlign: 8, ResponseSize: -1,
		Flags:      FlagRoutingAllowed,
		TestLength: int32(math.Ceil(length.Seconds())),
		SendDirty:  -1, RecvDirty: -1, RecvClean: -1,
		Family: family, SocketType: SockStream, Protocol: ProtoTCP,
		SocketPrio: -1, SocketTOS: -1,
	}
	if upload {
		r.Direction = DirRecv
		r.SendWidth = 2
	} else {
		r.Direction = DirXmit
		r.RecvWidth = 2
	}
	if dscp > 0 {
		r.SocketTOS = int32(dscp << 2)
	}
	return r
}

func family(a netip.Addr) int32 {
	if a.Unmap().Is4() {
		return FamilyInet
	}
	return FamilyInet6
}

// Stream starts a TCP_STREAM (upload) or TCP_MAERTS test of the given
// length, both ends marking the data connection with dscp. The caller
// moves the data on Stream.Conn and ends the test with Finish (an upload)
// or Close.
func (c *Client) Stream(ctx context.Context, upload bool, length time.Duration, dscp int) (*Stream, error) {
	s := &Stream{Upload: upload, Length: length, c: c}
	req := StreamRequest(upload, length, dscp, family(c.Server.Addr()))
	ctl, resp, err := c.request(ctx, s.Test(), &req)
	if err != nil {
		return nil, err
	}
	data := netip.AddrPortFrom(c.Server.Addr(), uint16(resp.DataPort))
	conn, err := c.DialTCP(ctx, data, dscp)
	if err != nil {
		ctl.Close()
		return nil, fmt.Errorf("netperf server %s, %s: connect to its data port %d: %w (a firewall in front of netserver must let its data ports through)", c.Server, s.Test(), resp.DataPort, err)
	}
	s.Conn, s.ctl, s.Response = conn, ctl, resp
	return s, nil
}

// Finish ends an upload the way netperf does, by shutting down its side
// of the data connection, and waits until deadline for the server's
// results: the server reads what is still on the way, closes the
// connection, and reports what it received. The data connection and the
// control connection are closed when it returns. The caller must have
// stopped writing.
func (s *Stream) Finish(deadline time.Time) (OmniResults, error) {
	defer s.Close()
	if cw, ok := s.Conn.(interface{ CloseWrite() error }); ok {
		if err := cw.CloseWrite(); err != nil {
			return OmniResults{}, fmt.Errorf("netperf server %s, %s: ending the data connection: %w", s.c.Server, s.Test(), err)
		}
	}
	s.Conn.SetReadDeadline(deadline)
	io.Copy(io.Discard, s.Conn) // the server's close; it sends nothing
	s.ctl.SetReadDeadline(deadline)
	return s.results()
}

// Results reads the server's results for a test that it ends itself (a
// download that ran its length), until deadline.
func (s *Stream) Results(deadline time.Time) (OmniResults, error) {
	s.ctl.SetReadDeadline(deadline)
	return s.results()
}

func (s *Stream) results() (OmniResults, error) {
	m, err := ReadMessage(s.ctl)
	if err != nil {
		return OmniResults{}, fmt.Errorf("netperf server %s, %s: results: %w", s.c.Server, s.Test(), err)
	}
	if m.Errno() != 0 {
		return OmniResults{}, &RefusedError{Server: s.c.Server, Test: s.Test(), Errno: m.Errno()}
	}
	return DecodeOmniResults(&m)
}

// Close ends the test at once, closing both connections. A download
// closed before its length is up makes netserver fail its send and end
// the test with an error instead of results; nothing is lost on this
// side, which counted what it received.
func (s *Stream) Close() error {
	s.Conn.Close()
	return s.ctl.Close()
}

// RR is a running UDP_RR test: the server answers every datagram that
// reaches its data port with one of Response size, sent back to that
// datagram's source address and port, until a zero-length datagram ends
// the test or its length (plus netserver's 4 s of padding) is up. The
// answers carry nothing of the request, so a client that has several
// requests in flight tells them apart by sending each from its own socket.
type RR struct {
	// Data is the server's UDP data address.
	Data     netip.AddrPort
	Response OmniResponse
	ctl      net.Conn
}

// RRRequest is the omni request netperf 2.7 sends for `netperf -t UDP_RR
// -l length -Y dscp,dscp -- -r size,size`.
func RRRequest(length time.Duration, dscp, size int, family int32) OmniRequest {
	r := StreamRequest(true, length, dscp, family)
	r.SocketType, r.Protocol = SockDgram, ProtoUDP
	r.Direction = DirXmit | DirRecv
	r.SendWidth, r.RecvWidth = 1, 1
	r.RequestSize, r.ResponseSize = int32(size), int32(size)
	return r
}

// UDPRR starts a UDP_RR test of the given length with requests and
// responses of size bytes (at least 1: a zero-length datagram ends the
// test), the server marking its answers with dscp.
func (c *Client) UDPRR(ctx context.Context, length time.Duration, dscp, size int) (*RR, error) {
	if size < 1 || size > 65507 {
		return nil, fmt.Errorf("netperf: UDP_RR size %d is not 1..65507", size)
	}
	req := RRRequest(length, dscp, size, family(c.Server.Addr()))
	ctl, resp, err := c.request(ctx, "UDP_RR", &req)
	if err != nil {
		return nil, err
	}
	return &RR{Data: netip.AddrPortFrom(c.Server.Addr(), uint16(resp.DataPort)), Response: resp, ctl: ctl}, nil
}

// End ends the test the way netperf does, with zero-length datagrams on
// conn (a socket connected to Data), and closes the control connection
// without waiting for the server's results.
func (r *RR) End(conn net.Conn) {
	if conn != nil {
		for range 3 {
			conn.Write(nil)
		}
	}
	r.ctl.Close()
}
