//go:build linux

package netlink

import (
	"bytes"
	"encoding/binary"
	"errors"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"sqm/internal/nlattr"
)

const (
	tSeq  = 7
	tPort = 4242
)

// msg encodes one message as the kernel would send it to port tPort.
func msg(typ, flags uint16, seq uint32, data []byte) []byte {
	return appendMessage(nil, Message{Header: Header{Type: typ, Flags: flags, Sequence: seq, PID: tPort}, Data: data})
}

func errnoBytes(errno unix.Errno) []byte { return intBytes(-int32(errno)) }

func intBytes(v int32) []byte {
	b := make([]byte, 4)
	binary.NativeEndian.PutUint32(b, uint32(v))
	return b
}

// request is the message an error reply echoes: header and a 20-byte body.
var request = appendMessage(nil, Message{Header: Header{Type: unix.RTM_NEWQDISC, Flags: Request | Acknowledge, Sequence: tSeq, PID: tPort}, Data: make([]byte, 20)})

func cat(bs ...[]byte) []byte { return bytes.Join(bs, nil) }

// attrHeader is an attribute header of any length, in the host's byte
// order (the tables hold on big-endian MIPS too).
func attrHeader(length, typ uint16) []byte {
	b := make([]byte, 4)
	binary.NativeEndian.PutUint16(b, length)
	binary.NativeEndian.PutUint16(b[2:], typ)
	return b
}

// shortHeader is a message header whose length (8) is below its own 16
// bytes.
var shortHeader = func() []byte {
	b := msg(unix.RTM_NEWLINK, 0, tSeq, nil)
	binary.NativeEndian.PutUint32(b, 8)
	return b
}()

// errMsg is NLMSG_ERROR for the request: capped (header only) or with
// the whole request, then the attributes of an extended ack.
func errMsg(errno unix.Errno, isCapped bool, tlvs []byte) []byte {
	flags := uint16(0)
	echo := request
	if isCapped {
		flags |= capped
		echo = request[:headerLen]
	}
	if tlvs != nil {
		flags |= ackTLVs
	}
	return msg(unix.NLMSG_ERROR, flags, tSeq, cat(errnoBytes(errno), echo, tlvs))
}

func link(seq uint32, flags uint16, name string) []byte {
	return msg(unix.RTM_NEWLINK, flags, seq, cat(make([]byte, 16), nlattr.Str(unix.IFLA_IFNAME, name)))
}

var (
	extMsg  = nlattr.Str(unix.NLMSGERR_ATTR_MSG, "Specified qdisc kind is unknown")
	extOffs = nlattr.U32(unix.NLMSGERR_ATTR_OFFS, 36)
	done    = msg(unix.NLMSG_DONE, Multi, tSeq, errnoBytes(0))
)

// TestExchange feeds replies, datagram by datagram, to the request
// exchange: what it returns, and for bad replies an error naming what is
// wrong (wantErr is a fragment of the message).
func TestExchange(t *testing.T) {
	for _, c := range []struct {
		name      string
		dump, ack bool
		datagrams [][]byte
		wantNames []string
		wantErr   string
		wantErrno unix.Errno
		wantExt   *Error // Message and Offset of the *Error
	}{
		{name: "ack", ack: true, datagrams: [][]byte{errMsg(0, true, nil)}},
		{name: "plain reply", datagrams: [][]byte{link(tSeq, 0, "lo")}, wantNames: []string{"lo"}},
		{name: "reply then ack", ack: true, datagrams: [][]byte{link(tSeq, 0, "lo"), errMsg(0, true, nil)}, wantNames: []string{"lo"}},
		{
			name: "multipart dump over three datagrams", dump: true,
			datagrams: [][]byte{
				cat(link(tSeq, Multi, "lo"), link(tSeq, Multi, "eth0")),
				link(tSeq, Multi, "eth1"),
				cat(link(tSeq, Multi, "eth2"), done),
			},
			wantNames: []string{"lo", "eth0", "eth1", "eth2"},
		},
		{
			name: "stale replies and other ports skipped", dump: true,
			datagrams: [][]byte{
				cat(link(tSeq-1, Multi, "stale"), msg(unix.NLMSG_DONE, Multi, tSeq-1, errnoBytes(0))),
				appendMessage(nil, Message{Header: Header{Type: unix.RTM_NEWLINK, Flags: Multi, Sequence: tSeq, PID: tPort + 1}, Data: make([]byte, 16)}),
				cat(link(tSeq, Multi, "lo"), done),
			},
			wantNames: []string{"lo"},
		},
		{name: "noop ignored", ack: true, datagrams: [][]byte{cat(msg(unix.NLMSG_NOOP, 0, tSeq, nil), errMsg(0, true, nil))}},
		{name: "refusal, no ext ack", ack: true, datagrams: [][]byte{errMsg(unix.EPERM, false, nil)}, wantErr: "operation not permitted", wantErrno: unix.EPERM, wantExt: &Error{}},
		{
			name: "refusal with ext ack, capped", ack: true,
			datagrams: [][]byte{errMsg(unix.ENOENT, true, cat(extMsg, extOffs))},
			wantErr:   `(kernel: "Specified qdisc kind is unknown", at byte 36 of the request)`, wantErrno: unix.ENOENT,
			wantExt: &Error{Message: "Specified qdisc kind is unknown", Offset: 36},
		},
		{
			name: "refusal with ext ack after the whole request", ack: true,
			datagrams: [][]byte{errMsg(unix.EINVAL, false, extMsg)},
			wantErr:   "Specified qdisc kind", wantErrno: unix.EINVAL,
			wantExt: &Error{Message: "Specified qdisc kind is unknown"},
		},
		{
			name: "ext ack garbled", ack: true,
			datagrams: [][]byte{errMsg(unix.ENOENT, true, attrHeader(0xff, 1))},
			wantErr:   "extended ack is malformed: nlattr: attribute type 1 at byte 0: length 255 runs past the 4 bytes left", wantErrno: unix.ENOENT,
		},
		{
			name: "ext ack offset not a u32", ack: true,
			datagrams: [][]byte{errMsg(unix.ENOENT, true, nlattr.Attr(unix.NLMSGERR_ATTR_OFFS, []byte{1, 2}))},
			wantErr:   "2 bytes, want 4 for a u32", wantErrno: unix.ENOENT,
		},
		{
			name: "echoed request longer than the error", ack: true,
			datagrams: [][]byte{msg(unix.NLMSG_ERROR, ackTLVs, tSeq, cat(errnoBytes(unix.ENOENT), request[:headerLen]))},
			wantErr:   "the request it echoes claims 36 bytes, 16 are there", wantErrno: unix.ENOENT,
		},
		{name: "error too short", ack: true, datagrams: [][]byte{msg(unix.NLMSG_ERROR, 0, tSeq, []byte{1, 2})}, wantErr: "error message (seq 7) of 2 bytes, too short for its errno"},
		{name: "positive error", ack: true, datagrams: [][]byte{msg(unix.NLMSG_ERROR, 0, tSeq, intBytes(5))}, wantErr: "positive error 5"},
		{
			name: "dump fails in its done", dump: true,
			datagrams: [][]byte{cat(link(tSeq, Multi, "lo"), msg(unix.NLMSG_DONE, Multi|ackTLVs, tSeq, cat(errnoBytes(unix.EMSGSIZE), extMsg)))},
			wantErr:   "message too long", wantErrno: unix.EMSGSIZE, wantExt: &Error{Message: "Specified qdisc kind is unknown"},
		},
		{
			name: "dump refused at the start", dump: true,
			datagrams: [][]byte{errMsg(unix.ENODEV, true, nil)},
			wantErr:   "no such device", wantErrno: unix.ENODEV,
		},
		{
			name: "dump interrupted", dump: true,
			datagrams: [][]byte{cat(link(tSeq, Multi, "lo"), link(tSeq, Multi|DumpInterrupted, "eth0")), msg(unix.NLMSG_DONE, Multi|DumpInterrupted, tSeq, errnoBytes(0))},
			wantErr:   "NLM_F_DUMP_INTR",
		},
		{name: "overrun", dump: true, datagrams: [][]byte{msg(unix.NLMSG_OVERRUN, 0, tSeq, nil)}, wantErr: "overrun"},
		{name: "truncated message", dump: true, datagrams: [][]byte{cat(link(tSeq, Multi, "lo"), link(tSeq, Multi, "eth0")[:30])}, wantErr: "message 2 at byte 40 (type 16): length 44 runs past the 30 bytes left (truncated reply)"},
		{name: "stray bytes", dump: true, datagrams: [][]byte{cat(link(tSeq, Multi, "lo"), []byte{1, 2, 3})}, wantErr: "message 2 at byte 40: 3 bytes left, too few for a 16-byte header"},
		{name: "length below the header", dump: true, datagrams: [][]byte{shortHeader}, wantErr: "message 1 at byte 0 (type 16): length 8 is shorter than its header"},
	} {
		t.Run(c.name, func(t *testing.T) {
			x := exchange{seq: tSeq, port: tPort, dump: c.dump, ack: c.ack}
			var err error
			finished := false
			for i, d := range c.datagrams {
				if finished {
					t.Fatalf("exchange ended before datagram %d", i+1)
				}
				msgs, perr := parseMessages(d)
				if perr != nil {
					err, finished = perr, true
					continue
				}
				finished, err = x.take(msgs)
			}
			if !finished {
				t.Fatal("exchange still waiting after the last datagram")
			}
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, c.wantErr)
				}
				if !strings.HasPrefix(err.Error(), "netlink: ") {
					t.Errorf("error %q does not say it is netlink's", err)
				}
				if c.wantErrno != 0 && !errors.Is(err, c.wantErrno) {
					t.Errorf("error %v is not %v", err, c.wantErrno)
				}
				if c.wantExt != nil {
					var e *Error
					if !errors.As(err, &e) {
						t.Fatalf("error %v is not an *Error", err)
					}
					if e.Message != c.wantExt.Message || e.Offset != c.wantExt.Offset {
						t.Errorf("ext ack %q at %d, want %q at %d", e.Message, e.Offset, c.wantExt.Message, c.wantExt.Offset)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, m := range x.out {
				ad := nlattr.NewDecoder(m.Data[16:])
				for ad.Next() {
					names = append(names, ad.String())
				}
			}
			if strings.Join(names, " ") != strings.Join(c.wantNames, " ") {
				t.Errorf("replies %q, want %q", names, c.wantNames)
			}
		})
	}
}

// TestIsDump pins the kernel's notion of a dump: NLM_F_ROOT and
// NLM_F_MATCH share bits with NLM_F_REPLACE and NLM_F_EXCL, so a NEW
// request with Excl must not wait for a NLMSG_DONE that never comes.
func TestIsDump(t *testing.T) {
	for _, c := range []struct {
		h    Header
		want bool
	}{
		{Header{Type: unix.RTM_GETQDISC, Flags: Dump}, true},
		{Header{Type: unix.RTM_GETLINK, Flags: unix.NLM_F_ROOT}, true},
		{Header{Type: unix.RTM_GETLINK}, false},
		{Header{Type: unix.RTM_NEWQDISC, Flags: Create | Excl | Acknowledge}, false},
		{Header{Type: unix.RTM_NEWQDISC, Flags: Replace | Excl}, false},
	} {
		if got := isDump(c.h); got != c.want {
			t.Errorf("isDump(%+v) = %v, want %v", c.h, got, c.want)
		}
	}
}

// TestAppendMessage pins the request layout: the length counts the
// header and payload, padding is zero and not counted.
func TestAppendMessage(t *testing.T) {
	got := appendMessage(nil, Message{Header: Header{Type: 0x1234, Flags: 0x0506, Sequence: 0x0708090a, PID: 0x0b0c0d0e}, Data: []byte{0xaa}})
	want := make([]byte, 20)
	binary.NativeEndian.PutUint32(want[0:], 17)
	binary.NativeEndian.PutUint16(want[4:], 0x1234)
	binary.NativeEndian.PutUint16(want[6:], 0x0506)
	binary.NativeEndian.PutUint32(want[8:], 0x0708090a)
	binary.NativeEndian.PutUint32(want[12:], 0x0b0c0d0e)
	want[16] = 0xaa
	if !bytes.Equal(got, want) {
		t.Errorf("got % x\nwant % x", got, want)
	}
}
