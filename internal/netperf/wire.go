// Package netperf speaks the control protocol of netperf 2.7 (netperf and
// its server, netserver), so that `sqm test` can load a link through any
// stock netserver, the kind the bufferbloat community's public flent and
// betterspeedtest servers run. It was written from reading netperf's public
// source and from watching what Debian's netperf 2.7.0 client and server
// send on loopback (testdata/*.msgs), not from netperf's code.
//
// The protocol, as far as this package needs it: the client opens a TCP
// control connection (port 12865) and the two ends exchange fixed-size
// messages of MessageSize bytes. There is no greeting and no version
// exchange; a server started with a passphrase expects a MsgPassphrase
// request first and closes the connection on a wrong one. A test is one
// request (MsgDoOmni for TCP_STREAM, TCP_MAERTS, UDP_RR and the rest: netperf
// 2.7 built with "migration", as Debian's is, runs the classic tests
// through the omni test), one response that names the data port the
// server listens on, the data phase on its own connection, and one results
// message from the server after the data connection ends. Several tests
// may follow on one control connection; closing it ends the session.
//
// Byte order: each message is 2+SpecInts 32-bit words. netperf converts
// the two header words and the first "cutoff" words of the test-specific
// part to big-endian (htonl) and sends the rest, the character arrays, as
// they are; floats travel as their IEEE-754 bits in such a word. This
// package reads and writes every field explicitly with encoding/binary, so
// it is right on either host byte order.
package netperf

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"net/netip"
)

// DefaultPort is netserver's control port.
const DefaultPort = 12865

// SpecInts is the number of 32-bit words of test-specific data in a
// message (netperf's MAXSPECDATA since 2.6.0; older netperfs used 62 and
// cannot talk to 2.6 or later).
const SpecInts = 162

// DataSize is the size of a message's test-specific part in bytes.
const DataSize = SpecInts * 4

// MessageSize is the size of every control message, in either direction.
const MessageSize = 8 + DataSize

// MsgType is the first word of a message: a request's test or command, a
// response's kind.
type MsgType int32

// The message types a client or server of this package meets. The numbers
// are netperf's; the many classic tests that 2.7 runs through MsgDoOmni are
// listed so that a server can name what it was asked for.
const (
	MsgDebugOn         MsgType = 1
	MsgDebugOff        MsgType = 2
	MsgDebugOK         MsgType = 3
	MsgNodeIdentify    MsgType = 4
	MsgCPUCalibrate    MsgType = 5
	MsgPassphrase      MsgType = 6
	MsgDoTCPStream     MsgType = 10
	MsgDoTCPRR         MsgType = 13
	MsgDoUDPStream     MsgType = 16
	MsgDoUDPRR         MsgType = 19
	MsgDoTCPCRR        MsgType = 34
	MsgDoTCPMaerts     MsgType = 94
	MsgDoOmni          MsgType = 97
	MsgOmniResponse    MsgType = 98
	MsgOmniResults     MsgType = 99
	MsgDoSysinfo       MsgType = 600
	MsgSysinfoResponse MsgType = 601
)

var typeNames = map[MsgType]string{
	MsgDebugOn: "DEBUG_ON", MsgDebugOff: "DEBUG_OFF", MsgDebugOK: "DEBUG_OK",
	MsgNodeIdentify: "NODE_IDENTIFY", MsgCPUCalibrate: "CPU_CALIBRATE",
	MsgPassphrase: "PASSPHRASE", MsgDoTCPStream: "DO_TCP_STREAM", MsgDoTCPRR: "DO_TCP_RR",
	MsgDoUDPStream: "DO_UDP_STREAM", MsgDoUDPRR: "DO_UDP_RR", MsgDoTCPCRR: "DO_TCP_CRR",
	MsgDoTCPMaerts: "DO_TCP_MAERTS", MsgDoOmni: "DO_OMNI", MsgOmniResponse: "OMNI_RESPONSE",
	MsgOmniResults: "OMNI_RESULTS", MsgDoSysinfo: "DO_SYSINFO", MsgSysinfoResponse: "SYSINFO_RESPONSE",
}

func (t MsgType) String() string {
	if n, ok := typeNames[t]; ok {
		return n
	}
	return fmt.Sprintf("message type %d", int32(t))
}

// MsgStaleOmniResponse is OMNI_RESPONSE with its bytes swapped. A stock
// netserver on a little-endian host sends its omni results in the buffer
// of its earlier response without resetting the type word, which it had
// already converted to network order, so the results arrive typed
// 0x62000000. A stock netperf client never looks at that word.
const MsgStaleOmniResponse = MsgType(0x62000000)

// The omni request's Flags bits (netperf's OMNI_* flags).
const (
	FlagNoDelay        uint32 = 0x00000001 // TCP_NODELAY on the data socket
	FlagUseSendfile    uint32 = 0x00000002
	FlagConnectTest    uint32 = 0x00000004 // a new connection per transaction (TCP_CRR)
	FlagMeasureCPU     uint32 = 0x00000008
	FlagChecksumOff    uint32 = 0x00000010
	FlagRoutingAllowed uint32 = 0x00000020 // netperf sets it unless -R 0
	FlagWantIfName     uint32 = 0x00000040
	FlagWantIfSlot     uint32 = 0x00000080
	FlagWantIfIDs      uint32 = 0x00000100
	FlagWantDrvInfo    uint32 = 0x00000200
	FlagFastOpen       uint32 = 0x00000800
	FlagManageFirewall uint32 = 0x00001000
	FlagUsePktinfo     uint32 = 0x00002000
	FlagUseConnected   uint32 = 0x00004000
	FlagDeferAccept    uint32 = 0x00008000
	// FlagWantRemCong asks for the server's congestion control in the
	// results. In netperf 2.7 it is the same bit as FlagRoutingAllowed
	// (the two defines collide), so a stock netserver fills
	// OmniResults.CongControl for nearly every client.
	FlagWantRemCong   uint32 = 0x00000020
	FlagWantKeepalive uint32 = 0x80000000
)

// Direction bits of an omni request, from the SERVER's point of view: a
// TCP_STREAM (the client uploads) asks the server to DirRecv, a
// TCP_MAERTS to DirXmit, a request/response test for both.
const (
	DirXmit uint32 = 0x2
	DirRecv uint32 = 0x4
)

// Address families, socket types and protocols as the omni request names
// them (netperf's own numbers for the first two, IP protocol numbers for
// the third).
const (
	FamilyUnspec int32 = 0
	FamilyInet   int32 = 4
	FamilyInet6  int32 = 6

	SockStream int32 = 1
	SockDgram  int32 = 2

	ProtoTCP int32 = 6
	ProtoUDP int32 = 17
)

// ErrnoUnknownTest is the error a stock netserver answers a request type
// it does not know with.
const ErrnoUnknownTest = 998

// ErrShort is wrapped by the error for a message cut short.
var ErrShort = errors.New("netperf: control message cut short")

// Message is one control message in either direction. Type is the
// request's test or the response's kind; Word is the second header word,
// which a request uses for the CPU the server should bind its test to (-1:
// none; what netperf sends unless -T) and a response for the server's
// errno (0: success). Data is the test-specific part exactly as it is on
// the wire.
type Message struct {
	Type MsgType
	Word int32
	Data [DataSize]byte
}

// Errno is a response's error word (0: the server did what was asked).
func (m *Message) Errno() int32 { return m.Word }

// AppendBinary appends the message's MessageSize bytes to b.
func (m *Message) AppendBinary(b []byte) ([]byte, error) {
	b = binary.BigEndian.AppendUint32(b, uint32(m.Type))
	b = binary.BigEndian.AppendUint32(b, uint32(m.Word))
	return append(b, m.Data[:]...), nil
}

// MarshalBinary returns the message's MessageSize bytes.
func (m *Message) MarshalBinary() ([]byte, error) {
	return m.AppendBinary(make([]byte, 0, MessageSize))
}

// ParseMessage decodes one message; b must be exactly MessageSize bytes.
func ParseMessage(b []byte) (Message, error) {
	var m Message
	switch {
	case len(b) < MessageSize:
		return m, fmt.Errorf("%w: %d of %d bytes", ErrShort, len(b), MessageSize)
	case len(b) > MessageSize:
		return m, fmt.Errorf("netperf: control message of %d bytes; netperf 2.6 and later send %d (is the peer an older netperf?)", len(b), MessageSize)
	}
	m.Type = MsgType(binary.BigEndian.Uint32(b))
	m.Word = int32(binary.BigEndian.Uint32(b[4:]))
	copy(m.Data[:], b[8:])
	return m, nil
}

// ReadMessage reads one message from r. It returns io.EOF when r ends
// before the message's first byte (the peer closed the connection between
// messages) and an error wrapping ErrShort when it ends inside one.
func ReadMessage(r io.Reader) (Message, error) {
	var buf [MessageSize]byte
	n, err := io.ReadFull(r, buf[:])
	switch {
	case err == io.EOF:
		return Message{}, io.EOF
	case err == io.ErrUnexpectedEOF:
		return Message{}, fmt.Errorf("%w: the peer closed the connection after %d of %d bytes", ErrShort, n, MessageSize)
	case err != nil:
		return Message{}, fmt.Errorf("netperf: reading a control message (%d of %d bytes): %w", n, MessageSize, err)
	}
	return ParseMessage(buf[:])
}

// WriteMessage writes m to w in one Write.
func WriteMessage(w io.Writer, m *Message) error {
	b, _ := m.MarshalBinary()
	_, err := w.Write(b)
	if err != nil {
		return fmt.Errorf("netperf: sending %v: %w", m.Type, err)
	}
	return nil
}

// ErrnoText says what a response's errno means. The number is the
// server's system error, so it is read with Linux's numbering (x86, arm
// and most others; a netserver is nearly always one of those), not the
// client's own, which differs on mips and alpha; numbers outside the
// table are given as they are.
func ErrnoText(e int32) string {
	if e == 0 {
		return "no error"
	}
	if e == ErrnoUnknownTest {
		return "the server does not know this test"
	}
	if s, ok := linuxErrno[e]; ok {
		return s
	}
	return fmt.Sprintf("unknown error %d", e)
}

// linuxErrno names the errors a netserver answers a test with: failures
// to create, bind, listen on or accept its data socket, or to send or
// receive on it, and the busy or refused answers of a server that limits.
var linuxErrno = map[int32]string{
	1: "operation not permitted (EPERM)", 2: "no such file or directory (ENOENT)",
	4: "interrupted system call (EINTR)", 9: "bad file descriptor (EBADF)",
	11: "resource temporarily unavailable (EAGAIN)", 12: "cannot allocate memory (ENOMEM)",
	13: "permission denied (EACCES)", 16: "device or resource busy (EBUSY)",
	22: "invalid argument (EINVAL)", 23: "too many open files in system (ENFILE)",
	24: "too many open files (EMFILE)", 28: "no space left on device (ENOSPC)",
	32: "broken pipe (EPIPE)", 92: "protocol not available (ENOPROTOOPT)",
	93: "protocol not supported (EPROTONOSUPPORT)", 94: "socket type not supported (ESOCKTNOSUPPORT)",
	95: "operation not supported (EOPNOTSUPP)", 97: "address family not supported (EAFNOSUPPORT)",
	98: "address already in use (EADDRINUSE)", 99: "cannot assign requested address (EADDRNOTAVAIL)",
	100: "network is down (ENETDOWN)", 101: "network is unreachable (ENETUNREACH)",
	103: "connection aborted (ECONNABORTED)", 104: "connection reset by peer (ECONNRESET)",
	105: "no buffer space available (ENOBUFS)", 110: "connection timed out (ETIMEDOUT)",
	111: "connection refused (ECONNREFUSED)", 113: "no route to host (EHOSTUNREACH)",
}

// field is a cursor over a message's test-specific data that reads or
// writes big-endian words and NUL-padded character arrays in order, so
// each struct's layout is written down once, as a list of its fields.
type field struct {
	d   *[DataSize]byte
	off int
	enc bool
	err error
}

func (f *field) u32(v *uint32) {
	if f.enc {
		binary.BigEndian.PutUint32(f.d[f.off:], *v)
	} else {
		*v = binary.BigEndian.Uint32(f.d[f.off:])
	}
	f.off += 4
}

func (f *field) i32(v *int32) {
	u := uint32(*v)
	f.u32(&u)
	*v = int32(u)
}

func (f *field) f32(v *float32) {
	u := math.Float32bits(*v)
	f.u32(&u)
	*v = math.Float32frombits(u)
}

// str is a character array of n bytes. Decoding stops at the first NUL
// and, like netserver, treats the last byte as one, so at most n-1 bytes
// come back; encoding refuses a longer string or one holding a NUL.
func (f *field) str(v *string, n int, name string) {
	b := f.d[f.off : f.off+n]
	f.off += n
	if f.enc {
		if f.err == nil && len(*v) > n-1 {
			f.err = fmt.Errorf("netperf: %s %q is longer than the %d bytes the message has for it", name, *v, n-1)
			return
		}
		for i := 0; i < len(*v); i++ {
			if (*v)[i] == 0 && f.err == nil {
				f.err = fmt.Errorf("netperf: %s %q holds a NUL byte", name, *v)
				return
			}
		}
		clear(b)
		copy(b, *v)
		return
	}
	b = b[:n-1]
	for i, c := range b {
		if c == 0 {
			b = b[:i]
			break
		}
	}
	*v = string(b)
}

// OmniRequest is the test-specific part of a MsgDoOmni request: what the
// client wants the server to do. Sizes of -1 mean "the system's default".
// The comments say which netperf option sets each field.
type OmniRequest struct {
	SendBufSize   int32 // server's SO_SNDBUF (-s/-S)
	SendSize      int32 // bytes per send on the server (-M for MAERTS), -1: server picks
	SendAlign     int32
	SendOffset    int32
	SendWidth     int32 // buffers in the server's send ring, 0: server picks
	RequestSize   int32 // request/response tests: request bytes (-r), else -1
	RecvBufSize   int32 // server's SO_RCVBUF
	RecvSize      int32 // bytes per recv on the server, -1: server picks
	RecvAlign     int32
	RecvOffset    int32
	RecvWidth     int32
	ResponseSize  int32 // request/response tests: response bytes, else -1
	Flags         uint32
	CPURate       float32
	TestLength    int32 // seconds (-l); negative: -transactions or -bytes to run
	SoRcvAvoid    int32
	SoSndAvoid    int32
	SendDirty     int32
	RecvDirty     int32
	RecvClean     int32
	DataPort      int32 // the port the server should listen on, 0: any
	Family        int32 // FamilyInet or FamilyInet6
	SocketType    int32 // SockStream or SockDgram
	Protocol      int32 // ProtoTCP or ProtoUDP
	Direction     uint32
	NetperfPort   int32     // the client's data port (used for UDP)
	IntervalBurst int32     // -b
	IntervalUsecs int32     // -w
	NetperfIP     [4]uint32 // the client's data address, see AddrWords
	NetserverIP   [4]uint32 // the address the server should listen on; zero unless the client names one
	SocketPrio    int32     // SO_PRIORITY for the server's data socket, -1: leave it
	SocketTOS     int32     // IP TOS byte (DSCP<<2) for the server's data socket (-Y), -1: leave it
	CongControl   string    // TCP congestion control for the server (-K), at most 15 bytes
	FillFile      string    // file the server fills its buffers from (-F), at most 31 bytes
}

// OmniRequestInts is how many words at the start of an omni request are
// big-endian numbers; the character arrays follow.
const OmniRequestInts = 38

func (r *OmniRequest) fields(f *field) {
	for _, p := range []*int32{&r.SendBufSize, &r.SendSize, &r.SendAlign, &r.SendOffset,
		&r.SendWidth, &r.RequestSize, &r.RecvBufSize, &r.RecvSize, &r.RecvAlign,
		&r.RecvOffset, &r.RecvWidth, &r.ResponseSize} {
		f.i32(p)
	}
	f.u32(&r.Flags)
	f.f32(&r.CPURate)
	for _, p := range []*int32{&r.TestLength, &r.SoRcvAvoid, &r.SoSndAvoid, &r.SendDirty,
		&r.RecvDirty, &r.RecvClean, &r.DataPort, &r.Family, &r.SocketType, &r.Protocol} {
		f.i32(p)
	}
	f.u32(&r.Direction)
	f.i32(&r.NetperfPort)
	f.i32(&r.IntervalBurst)
	f.i32(&r.IntervalUsecs)
	for i := range r.NetperfIP {
		f.u32(&r.NetperfIP[i])
	}
	for i := range r.NetserverIP {
		f.u32(&r.NetserverIP[i])
	}
	f.i32(&r.SocketPrio)
	f.i32(&r.SocketTOS)
	f.str(&r.CongControl, 16, "congestion control")
	f.str(&r.FillFile, 32, "fill file")
}

// Message encodes the request as a MsgDoOmni message asking for no CPU
// binding.
func (r *OmniRequest) Message() (Message, error) {
	m := Message{Type: MsgDoOmni, Word: -1}
	f := field{d: &m.Data, enc: true}
	r.fields(&f)
	return m, f.err
}

// DecodeOmniRequest decodes a MsgDoOmni request's test-specific part.
func DecodeOmniRequest(m *Message) (OmniRequest, error) {
	var r OmniRequest
	if m.Type != MsgDoOmni {
		return r, fmt.Errorf("netperf: want a %v request, got %v", MsgDoOmni, m.Type)
	}
	f := field{d: &m.Data}
	r.fields(&f)
	return r, nil
}

// Check says what is wrong with a request whose fields no netperf would
// send: an unknown family, socket type, protocol or direction, or a pair
// of them that does not fit. A server calls it before acting on a request;
// what it then supports is its own choice.
func (r *OmniRequest) Check() error {
	switch r.Family {
	case FamilyInet, FamilyInet6, FamilyUnspec:
	default:
		return fmt.Errorf("netperf: omni request: address family %d is none of netperf's (0, 4, 6)", r.Family)
	}
	switch {
	case r.SocketType == SockStream && r.Protocol == ProtoTCP:
	case r.SocketType == SockDgram && r.Protocol == ProtoUDP:
	default:
		return fmt.Errorf("netperf: omni request: socket type %d with protocol %d (want 1 with 6 for TCP, 2 with 17 for UDP)", r.SocketType, r.Protocol)
	}
	if r.Direction&^(DirXmit|DirRecv) != 0 {
		return fmt.Errorf("netperf: omni request: direction %#x has bits other than send (2) and receive (4)", r.Direction)
	}
	if r.DataPort < 0 || r.DataPort > 65535 || r.NetperfPort < 0 || r.NetperfPort > 65535 {
		return fmt.Errorf("netperf: omni request: data port %d or client port %d is not 0..65535", r.DataPort, r.NetperfPort)
	}
	if r.SocketTOS < -1 || r.SocketTOS > 255 {
		return fmt.Errorf("netperf: omni request: TOS %d is not -1..255", r.SocketTOS)
	}
	return nil
}

// OmniResponse is the test-specific part of the server's answer to a
// MsgDoOmni request, sent once its data socket listens.
type OmniResponse struct {
	RecvBufSize    int32
	RecvSize       int32
	RecvWidth      int32
	SendBufSize    int32
	SendSize       int32
	SendWidth      int32
	Flags          uint32 // FlagNoDelay, FlagMeasureCPU... as the server applied them
	CPURate        float32
	TestLength     int32 // stock netserver leaves it 0
	SoRcvAvoid     int32
	SoSndAvoid     int32
	DataPort       int32 // where the client connects (or sends, for UDP)
	IntervalBurst  int32
	IntervalUsecs  int32
	CPUFrequency   uint32 // MHz
	SecurityInfo   int32
	SocketPrio     int32
	SocketTOS      int32  // the TOS the server set on its data socket
	SystemModel    string // at most 32 bytes
	CPUModel       string // at most 79 bytes
	SecurityString string // at most 15 bytes
}

// OmniResponseInts is how many words at the start of an omni response are
// big-endian numbers.
const OmniResponseInts = 18

func (r *OmniResponse) fields(f *field) {
	for _, p := range []*int32{&r.RecvBufSize, &r.RecvSize, &r.RecvWidth,
		&r.SendBufSize, &r.SendSize, &r.SendWidth} {
		f.i32(p)
	}
	f.u32(&r.Flags)
	f.f32(&r.CPURate)
	for _, p := range []*int32{&r.TestLength, &r.SoRcvAvoid, &r.SoSndAvoid, &r.DataPort,
		&r.IntervalBurst, &r.IntervalUsecs} {
		f.i32(p)
	}
	f.u32(&r.CPUFrequency)
	f.i32(&r.SecurityInfo)
	f.i32(&r.SocketPrio)
	f.i32(&r.SocketTOS)
	f.str(&r.SystemModel, 33, "system model")
	f.str(&r.CPUModel, 80, "CPU model")
	f.str(&r.SecurityString, 16, "security string")
}

// Message encodes the response as a MsgOmniResponse message with errno 0.
func (r *OmniResponse) Message() (Message, error) {
	m := Message{Type: MsgOmniResponse}
	f := field{d: &m.Data, enc: true}
	r.fields(&f)
	return m, f.err
}

// DecodeOmniResponse decodes a MsgOmniResponse message's test-specific part.
// It does not look at the errno: a caller checks m.Errno first, since a
// refusing server's type word may be anything.
func DecodeOmniResponse(m *Message) (OmniResponse, error) {
	var r OmniResponse
	if m.Type != MsgOmniResponse {
		return r, fmt.Errorf("netperf: want an %v, got %v", MsgOmniResponse, m.Type)
	}
	f := field{d: &m.Data}
	r.fields(&f)
	return r, nil
}

// OmniResults is the test-specific part of the server's results message,
// sent once the data phase is over. Counters are the server's; a stock
// netserver leaves CPU fields it did not measure holding whatever its
// buffer held, so they mean something only when FlagMeasureCPU was asked.
type OmniResults struct {
	BytesReceived    uint64
	RecvCalls        uint32
	RecvBufSize      int32 // SO_RCVBUF at the end of the test
	BytesSent        uint64
	SendCalls        uint32
	SendBufSize      int32
	FailedSends      uint32
	TransReceived    uint32 // request/response tests: transactions
	ElapsedTime      float32
	CPUUtil          float32
	CPUUser          float32
	CPUSystem        float32
	CPUIOWait        float32
	CPUIRQ           float32
	CPUSoftIRQ       float32
	ServiceDemand    float32
	CPUMethod        uint32
	NumCPUs          uint32
	PeakCPUID        int32
	PeakCPUUtil      float32
	Vendor           int32
	Device           int32
	Subvendor        int32
	Subdevice        int32
	TransportRetrans int32
	IfName           string // at most 15 bytes
	Driver           string // at most 31 bytes
	Version          string // at most 31 bytes
	Firmware         string // at most 31 bytes
	Bus              string // at most 31 bytes
	IfSlot           string // at most 15 bytes
	CongControl      string // at most 15 bytes, if FlagWantRemCong was asked
}

// OmniResultsInts is how many words at the start of omni results are
// big-endian numbers.
const OmniResultsInts = 27

func (r *OmniResults) fields(f *field) {
	u64 := func(v *uint64) {
		hi, lo := uint32(*v>>32), uint32(*v)
		f.u32(&hi)
		f.u32(&lo)
		*v = uint64(hi)<<32 | uint64(lo)
	}
	u64(&r.BytesReceived)
	f.u32(&r.RecvCalls)
	f.i32(&r.RecvBufSize)
	u64(&r.BytesSent)
	f.u32(&r.SendCalls)
	f.i32(&r.SendBufSize)
	f.u32(&r.FailedSends)
	f.u32(&r.TransReceived)
	for _, p := range []*float32{&r.ElapsedTime, &r.CPUUtil, &r.CPUUser, &r.CPUSystem,
		&r.CPUIOWait, &r.CPUIRQ, &r.CPUSoftIRQ, &r.ServiceDemand} {
		f.f32(p)
	}
	f.u32(&r.CPUMethod)
	f.u32(&r.NumCPUs)
	f.i32(&r.PeakCPUID)
	f.f32(&r.PeakCPUUtil)
	for _, p := range []*int32{&r.Vendor, &r.Device, &r.Subvendor, &r.Subdevice, &r.TransportRetrans} {
		f.i32(p)
	}
	f.str(&r.IfName, 16, "interface name")
	f.str(&r.Driver, 32, "driver")
	f.str(&r.Version, 32, "driver version")
	f.str(&r.Firmware, 32, "firmware")
	f.str(&r.Bus, 32, "bus")
	f.str(&r.IfSlot, 16, "interface slot")
	f.str(&r.CongControl, 16, "congestion control")
}

// Message encodes the results as a MsgOmniResults message with errno 0
// (a stock netperf client reads them whatever the type word says).
func (r *OmniResults) Message() (Message, error) {
	m := Message{Type: MsgOmniResults}
	f := field{d: &m.Data, enc: true}
	r.fields(&f)
	return m, f.err
}

// DecodeOmniResults decodes a results message. It takes the type words a
// real server sends for results: MsgOmniResults, MsgOmniResponse, and
// MsgOmniResponse byte-swapped (what a stock netserver on a little-endian
// host sends, see MsgStaleOmniResponse). Check m.Errno first.
func DecodeOmniResults(m *Message) (OmniResults, error) {
	var r OmniResults
	switch m.Type {
	case MsgOmniResults, MsgOmniResponse, MsgStaleOmniResponse:
	default:
		return r, fmt.Errorf("netperf: want omni results, got %v", m.Type)
	}
	f := field{d: &m.Data}
	r.fields(&f)
	return r, nil
}

// PassphraseMessage is the request a client sends first to a netserver
// started with -Z: the passphrase as a NUL-terminated string. A netserver
// that finds it wrong closes the connection without an answer.
func PassphraseMessage(p string) (Message, error) {
	m := Message{Type: MsgPassphrase, Word: -1}
	f := field{d: &m.Data, enc: true}
	f.str(&p, DataSize, "passphrase")
	return m, f.err
}

// DecodePassphrase returns a MsgPassphrase request's passphrase.
func DecodePassphrase(m *Message) (string, error) {
	if m.Type != MsgPassphrase {
		return "", fmt.Errorf("netperf: want a %v request, got %v", MsgPassphrase, m.Type)
	}
	var p string
	f := field{d: &m.Data}
	f.str(&p, DataSize, "passphrase")
	return p, nil
}

// ErrorResponse is a response refusing a request: the type echoes the
// request's (what a client that checks it expects; a stock one only reads
// the errno) and errno says why, as a Linux errno or ErrnoUnknownTest.
func ErrorResponse(t MsgType, errno int32) Message {
	return Message{Type: t, Word: errno}
}

// AddrWords puts an address into the four words of NetperfIP or
// NetserverIP the way netperf does: an IPv4 address as one number in the
// first word (so its bytes are in network order on the wire), an IPv6
// address as four words each read from memory in little-endian order,
// which is what every little-endian netperf host (x86, arm) sends: a
// netperf on a big-endian host sends IPv6 words byte-swapped relative to
// these, and netserver itself never looks at them unless the client named
// a data address (-H in the test-specific options).
func AddrWords(a netip.Addr) [4]uint32 {
	var w [4]uint32
	a = a.Unmap()
	switch {
	case a.Is4():
		b := a.As4()
		w[0] = binary.BigEndian.Uint32(b[:])
	case a.Is6():
		b := a.As16()
		for i := range w {
			w[i] = binary.LittleEndian.Uint32(b[4*i:])
		}
	}
	return w
}

// WordsAddr is AddrWords' inverse for the given family (FamilyInet or
// FamilyInet6); it returns the zero Addr for another family, and the
// unspecified address of the family for all-zero words.
func WordsAddr(family int32, w [4]uint32) netip.Addr {
	switch family {
	case FamilyInet:
		var b [4]byte
		binary.BigEndian.PutUint32(b[:], w[0])
		return netip.AddrFrom4(b)
	case FamilyInet6:
		var b [16]byte
		for i := range w {
			binary.LittleEndian.PutUint32(b[4*i:], w[i])
		}
		return netip.AddrFrom16(b)
	}
	return netip.Addr{}
}
