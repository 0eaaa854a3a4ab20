package netperf

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"errors"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// captured is one testdata/*.msgs file: the control messages of one run of
// Debian's netperf 2.7.0 client against its netserver, in order.
type captured struct {
	fromClient []bool
	msgs       [][]byte
}

func readCapture(t testing.TB, name string) captured {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var c captured
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<16)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		dir, h, ok := strings.Cut(line, " ")
		b, err := hex.DecodeString(h)
		if !ok || (dir != "C" && dir != "S") || err != nil {
			t.Fatalf("%s: bad line %.40q", name, line)
		}
		c.fromClient = append(c.fromClient, dir == "C")
		c.msgs = append(c.msgs, b)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(c.msgs) != 3 || !c.fromClient[0] || c.fromClient[1] || c.fromClient[2] {
		t.Fatalf("%s: want request, response, results; got %d messages", name, len(c.msgs))
	}
	return c
}

func parse(t *testing.T, b []byte) Message {
	t.Helper()
	m, err := ParseMessage(b)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestStockMessages decodes what Debian's netperf and netserver really
// sent and checks the fields against what each run asked for and what its
// netperf printed (the .msgs headers), then re-encodes each struct and
// compares it with the captured bytes.
func TestStockMessages(t *testing.T) {
	type want struct {
		dir, proto, sockType, tos int32
		reqSize, length           int32
		serverIP                  netip.Addr
		sendSize                  int32 // the response's send size
		recvd, sent               uint64
		trans                     uint32
		cong                      string
		rate                      float64 // what netperf printed: Mbit/s, or transactions/s
	}
	for _, tc := range []struct {
		file string
		want want
	}{
		{"stream.msgs", want{dir: int32(DirRecv), proto: ProtoTCP, sockType: SockStream, tos: -1, reqSize: -1, length: 1,
			sendSize: -1, recvd: 110018560, cong: "bbr", rate: 878.85}},
		{"maerts.msgs", want{dir: int32(DirXmit), proto: ProtoTCP, sockType: SockStream, tos: 0x20, reqSize: -1, length: 1,
			sendSize: 16384, cong: "bbr", rate: 11792.96}},
		{"udp_rr.msgs", want{dir: int32(DirXmit | DirRecv), proto: ProtoUDP, sockType: SockDgram, tos: -1, reqSize: 1, length: 1,
			sendSize: 1, recvd: 6998, sent: 6998, trans: 6998, rate: 6991.29}},
		{"flent_stream.msgs", want{dir: int32(DirRecv), proto: ProtoTCP, sockType: SockStream, tos: 0xa0, reqSize: -1, length: 2,
			serverIP: netip.MustParseAddr("127.0.0.1"), sendSize: -1, recvd: 194134016, cong: "bbr", rate: 775.97}},
	} {
		t.Run(tc.file, func(t *testing.T) {
			c := readCapture(t, tc.file)
			w := tc.want

			m := parse(t, c.msgs[0])
			if m.Type != MsgDoOmni || m.Word != -1 {
				t.Fatalf("request header %v %d, want DO_OMNI -1", m.Type, m.Word)
			}
			req, err := DecodeOmniRequest(&m)
			if err != nil {
				t.Fatal(err)
			}
			if err := req.Check(); err != nil {
				t.Errorf("a stock request fails Check: %v", err)
			}
			if int32(req.Direction) != w.dir || req.Protocol != w.proto || req.SocketType != w.sockType ||
				req.SocketTOS != w.tos || req.SocketPrio != -1 || req.RequestSize != w.reqSize ||
				req.TestLength != w.length || req.Family != FamilyInet || req.Flags != FlagRoutingAllowed {
				t.Errorf("request %+v does not fit %+v", req, w)
			}
			if got := WordsAddr(req.Family, req.NetserverIP); w.serverIP.IsValid() && got != w.serverIP {
				t.Errorf("server address %v, want %v", got, w.serverIP)
			}
			if req.NetperfPort == 0 {
				t.Error("the request names no client data port")
			}
			// A client's request has nothing past its struct, so our
			// encoding of what we decoded must be the captured bytes.
			back, err := req.Message()
			if err != nil {
				t.Fatal(err)
			}
			if b, _ := back.MarshalBinary(); !bytes.Equal(b, c.msgs[0]) {
				t.Errorf("re-encoded request differs from netperf's:\n got %x\nwant %x", b, c.msgs[0])
			}

			m = parse(t, c.msgs[1])
			if m.Type != MsgOmniResponse || m.Errno() != 0 {
				t.Fatalf("response header %v errno %d", m.Type, m.Errno())
			}
			resp, err := DecodeOmniResponse(&m)
			if err != nil {
				t.Fatal(err)
			}
			if resp.DataPort <= 0 || resp.DataPort > 65535 || resp.SendSize != w.sendSize || resp.SocketTOS != w.tos {
				t.Errorf("response %+v does not fit %+v", resp, w)
			}
			back, _ = resp.Message()
			structEnd := 8 + OmniResponseInts*4 + 33 + 80 + 16
			if b, _ := back.MarshalBinary(); !bytes.Equal(b[:structEnd], c.msgs[1][:structEnd]) {
				t.Errorf("re-encoded response differs:\n got %x\nwant %x", b[:structEnd], c.msgs[1][:structEnd])
			}

			m = parse(t, c.msgs[2])
			if m.Type != MsgStaleOmniResponse {
				t.Errorf("stock results typed %v; the decoder's note on netserver's byte-swapped type is out of date", m.Type)
			}
			res, err := DecodeOmniResults(&m)
			if err != nil {
				t.Fatal(err)
			}
			// netperf's own figure comes from its own clock; the
			// server's counters over the server's time agree within 1%.
			rate := float64(res.TransReceived)
			if rate == 0 {
				rate = float64(max(res.BytesReceived, res.BytesSent)) * 8 / 1e6
			}
			rate /= float64(res.ElapsedTime)
			if rate < w.rate*0.99 || rate > w.rate*1.01 {
				t.Errorf("results give %.2f per second, netperf printed %.2f", rate, w.rate)
			}
			if (w.recvd != 0 && res.BytesReceived != w.recvd) || res.TransReceived != w.trans || res.CongControl != w.cong {
				t.Errorf("results %+v do not fit %+v", res, w)
			}
			if w.sent != 0 && res.BytesSent != w.sent {
				t.Errorf("results: %d bytes sent, want %d", res.BytesSent, w.sent)
			}
			if res.ElapsedTime < float32(w.length)*0.9 || res.ElapsedTime > float32(w.length)*1.2 {
				t.Errorf("results: elapsed %v s for a %d s test", res.ElapsedTime, w.length)
			}
			back, _ = res.Message()
			structEnd = 8 + OmniResultsInts*4 + 176
			if b, _ := back.MarshalBinary(); !bytes.Equal(b[8:structEnd], c.msgs[2][8:structEnd]) {
				t.Errorf("re-encoded results differ:\n got %x\nwant %x", b[8:structEnd], c.msgs[2][8:structEnd])
			}
		})
	}
}

func TestMaertsSentBytes(t *testing.T) {
	// The MAERTS capture's own netperf said nothing about bytes; what the
	// server sent must at least be a plausible second of loopback.
	c := readCapture(t, "maerts.msgs")
	m := parse(t, c.msgs[2])
	res, err := DecodeOmniResults(&m)
	if err != nil {
		t.Fatal(err)
	}
	if res.BytesSent < 1<<20 || res.BytesReceived != 0 || res.SendCalls == 0 {
		t.Errorf("MAERTS results: sent %d in %d calls, received %d", res.BytesSent, res.SendCalls, res.BytesReceived)
	}
}

func TestParseMessageSizes(t *testing.T) {
	for _, n := range []int{0, 1, 8, MessageSize - 1, MessageSize + 1, 264} {
		_, err := ParseMessage(make([]byte, n))
		if err == nil {
			t.Errorf("%d bytes accepted", n)
			continue
		}
		if short := errors.Is(err, ErrShort); short != (n < MessageSize) {
			t.Errorf("%d bytes: %v (short: %v)", n, err, short)
		}
		if !strings.Contains(err.Error(), "656") {
			t.Errorf("%d bytes: error %q does not say the size wanted", n, err)
		}
	}
	if _, err := ParseMessage(make([]byte, MessageSize)); err != nil {
		t.Error(err)
	}
}

func TestReadMessage(t *testing.T) {
	req := OmniRequest{SendSize: -1, Direction: DirRecv, Family: FamilyInet, SocketType: SockStream, Protocol: ProtoTCP, CongControl: "cubic"}
	m, err := req.Message()
	if err != nil {
		t.Fatal(err)
	}
	b, _ := m.MarshalBinary()
	two := append(append([]byte{}, b...), b...)

	r := bytes.NewReader(two)
	for i := 0; i < 2; i++ {
		got, err := ReadMessage(r)
		if err != nil || got != m {
			t.Fatalf("message %d: %v", i, err)
		}
	}
	if _, err := ReadMessage(r); err != io.EOF {
		t.Errorf("at the end: %v, want io.EOF", err)
	}
	_, err = ReadMessage(bytes.NewReader(b[:100]))
	if !errors.Is(err, ErrShort) || !strings.Contains(err.Error(), "100 of 656") {
		t.Errorf("cut message: %v", err)
	}
	// ReadMessage must not read past one message: the data that follows
	// on a control connection is the next message.
	r = bytes.NewReader(two)
	ReadMessage(r)
	if r.Len() != MessageSize {
		t.Errorf("%d bytes left after one message, want %d", r.Len(), MessageSize)
	}
	var buf bytes.Buffer
	if err := WriteMessage(&buf, &m); err != nil || !bytes.Equal(buf.Bytes(), b) {
		t.Errorf("WriteMessage: %v", err)
	}
}

func TestRoundTrips(t *testing.T) {
	req := OmniRequest{
		SendBufSize: 1 << 20, SendSize: -1, SendAlign: 8, SendWidth: 2, RequestSize: 1,
		RecvBufSize: -1, RecvSize: 65536, RecvAlign: 8, ResponseSize: 1, Flags: FlagNoDelay | FlagWantKeepalive,
		CPURate: 1.5, TestLength: -1000, SendDirty: -1, RecvDirty: -1, RecvClean: -1,
		DataPort: 5000, Family: FamilyInet6, SocketType: SockDgram, Protocol: ProtoUDP,
		Direction: DirXmit | DirRecv, NetperfPort: 40000, IntervalBurst: 3, IntervalUsecs: 10000,
		NetperfIP:   AddrWords(netip.MustParseAddr("2001:db8::1")),
		NetserverIP: AddrWords(netip.MustParseAddr("fe80::2")),
		SocketPrio:  6, SocketTOS: 0xb8, CongControl: "123456789012345", FillFile: strings.Repeat("f", 31),
	}
	m, err := req.Message()
	if err != nil {
		t.Fatal(err)
	}
	b, _ := m.MarshalBinary()
	m2 := parse(t, b)
	got, err := DecodeOmniRequest(&m2)
	if err != nil || !reflect.DeepEqual(got, req) {
		t.Errorf("request round trip: %v\n got %+v\nwant %+v", err, got, req)
	}
	if a := WordsAddr(FamilyInet6, got.NetperfIP); a != netip.MustParseAddr("2001:db8::1") {
		t.Errorf("IPv6 address back as %v", a)
	}
	// netperf's IPv6 words are little-endian loads: 2001:0db8 is the
	// word 0xb80d0120 and travels as b8 0d 01 20.
	if off := 8 + 28*4; !bytes.Equal(b[off:off+4], []byte{0xb8, 0x0d, 0x01, 0x20}) {
		t.Errorf("IPv6 first word on the wire % x", b[off:off+4])
	}
	// An IPv4 address is one number: its bytes are in network order.
	w := AddrWords(netip.MustParseAddr("192.0.2.7"))
	if w != [4]uint32{0xc0000207} || WordsAddr(FamilyInet, w) != netip.MustParseAddr("192.0.2.7") {
		t.Errorf("IPv4 words %x", w)
	}

	resp := OmniResponse{RecvBufSize: 131072, RecvSize: 131072, RecvWidth: 2, SendBufSize: 16384, SendSize: -1,
		SendWidth: 2, Flags: FlagNoDelay, DataPort: 45393, SocketPrio: -1, SocketTOS: 0x20,
		SystemModel: strings.Repeat("s", 32), CPUModel: "x86", SecurityString: "none"}
	m, err = resp.Message()
	if err != nil {
		t.Fatal(err)
	}
	gotResp, err := DecodeOmniResponse(&m)
	if err != nil || !reflect.DeepEqual(gotResp, resp) {
		t.Errorf("response round trip: %v\n got %+v\nwant %+v", err, gotResp, resp)
	}

	res := OmniResults{BytesReceived: 1<<40 + 12345, RecvCalls: 9, RecvBufSize: 6 << 20, BytesSent: 1 << 33,
		SendCalls: 7, TransReceived: 5, ElapsedTime: 10.02, CPUUtil: -1, NumCPUs: 2, TransportRetrans: 17,
		IfName: "eth0", CongControl: "cubic"}
	m, err = res.Message()
	if err != nil {
		t.Fatal(err)
	}
	if m.Type != MsgOmniResults {
		t.Errorf("results typed %v", m.Type)
	}
	gotRes, err := DecodeOmniResults(&m)
	if err != nil || !reflect.DeepEqual(gotRes, res) {
		t.Errorf("results round trip: %v\n got %+v\nwant %+v", err, gotRes, res)
	}
	// 64-bit counters travel as hi, lo words.
	if !bytes.Equal(m.Data[:8], []byte{0, 0, 1, 0, 0, 0, 0x30, 0x39}) {
		t.Errorf("bytes received on the wire % x", m.Data[:8])
	}

	p, err := PassphraseMessage("sesame")
	if err != nil {
		t.Fatal(err)
	}
	if s, err := DecodePassphrase(&p); err != nil || s != "sesame" {
		t.Errorf("passphrase back as %q, %v", s, err)
	}
}

func TestEncodeRefuses(t *testing.T) {
	for _, tc := range []struct {
		name string
		enc  func() error
		want string
	}{
		{"long congestion control", func() error {
			_, err := (&OmniRequest{CongControl: "1234567890123456"}).Message()
			return err
		}, "longer than the 15 bytes"},
		{"NUL in fill file", func() error {
			_, err := (&OmniRequest{FillFile: "a\x00b"}).Message()
			return err
		}, "NUL"},
		{"long CPU model", func() error {
			_, err := (&OmniResponse{CPUModel: strings.Repeat("c", 80)}).Message()
			return err
		}, "CPU model"},
		{"long interface name", func() error {
			_, err := (&OmniResults{IfName: strings.Repeat("i", 16)}).Message()
			return err
		}, "interface name"},
		{"long passphrase", func() error {
			_, err := PassphraseMessage(strings.Repeat("p", DataSize))
			return err
		}, "passphrase"},
	} {
		err := tc.enc()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error saying %q", tc.name, err, tc.want)
		}
	}
}

func TestDecodeChecksType(t *testing.T) {
	m := Message{Type: MsgDoUDPRR}
	if _, err := DecodeOmniRequest(&m); err == nil || !strings.Contains(err.Error(), "DO_UDP_RR") {
		t.Errorf("omni request from DO_UDP_RR: %v", err)
	}
	if _, err := DecodeOmniResponse(&m); err == nil {
		t.Error("omni response from DO_UDP_RR accepted")
	}
	if _, err := DecodeOmniResults(&m); err == nil {
		t.Error("omni results from DO_UDP_RR accepted")
	}
	if _, err := DecodePassphrase(&m); err == nil {
		t.Error("passphrase from DO_UDP_RR accepted")
	}
	for _, ty := range []MsgType{MsgOmniResults, MsgOmniResponse, MsgStaleOmniResponse} {
		m := Message{Type: ty}
		if _, err := DecodeOmniResults(&m); err != nil {
			t.Errorf("results typed %v refused: %v", ty, err)
		}
	}
}

// A character array without a NUL decodes as netserver reads it: its last
// byte is taken for the terminator.
func TestUnterminatedString(t *testing.T) {
	m := Message{Type: MsgDoOmni}
	off := OmniRequestInts * 4
	for i := 0; i < 16; i++ {
		m.Data[off+i] = 'x'
	}
	r, err := DecodeOmniRequest(&m)
	if err != nil || r.CongControl != strings.Repeat("x", 15) {
		t.Errorf("congestion control %q, %v", r.CongControl, err)
	}
}

func TestCheck(t *testing.T) {
	good := OmniRequest{Family: FamilyInet, SocketType: SockStream, Protocol: ProtoTCP, Direction: DirRecv, SocketTOS: -1}
	if err := good.Check(); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		mod  func(*OmniRequest)
		want string
	}{
		{"family", func(r *OmniRequest) { r.Family = 2 }, "address family 2"},
		{"TCP datagrams", func(r *OmniRequest) { r.SocketType = SockDgram }, "socket type 2 with protocol 6"},
		{"SCTP", func(r *OmniRequest) { r.Protocol = 132 }, "protocol 132"},
		{"direction", func(r *OmniRequest) { r.Direction = 9 }, "direction 0x9"},
		{"port", func(r *OmniRequest) { r.DataPort = 70000 }, "data port 70000"},
		{"tos", func(r *OmniRequest) { r.SocketTOS = 256 }, "TOS 256"},
	} {
		r := good
		tc.mod(&r)
		if err := r.Check(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
}

func TestErrnoText(t *testing.T) {
	for e, want := range map[int32]string{0: "no error", 998: "does not know", 111: "refused", -5: "unknown error -5"} {
		if got := ErrnoText(e); !strings.Contains(got, want) {
			t.Errorf("ErrnoText(%d) = %q, want %q in it", e, got, want)
		}
	}
	if s := MsgType(12345).String(); !strings.Contains(s, "12345") {
		t.Errorf("unknown type prints %q", s)
	}
}
