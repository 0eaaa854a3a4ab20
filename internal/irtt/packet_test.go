package irtt

import (
	"bytes"
	"errors"
	"reflect"
	"testing"
	"time"
)

var replyLayouts = []struct {
	name string
	l    Layout
}{
	{"open request", Layout{}},
	{"open reply", Layout{Token: true}},
	{"echo request", Layout{Token: true, Seqno: true}},
	{"reply both stamps both clocks count", Layout{Token: true, Seqno: true, Stats: ReceivedCount, At: AtBoth, Clock: BothClocks}},
	{"reply both stats", Layout{Token: true, Seqno: true, Stats: ReceivedCount | ReceivedWindow, At: AtBoth, Clock: BothClocks}},
	{"reply receive wall", Layout{Token: true, Seqno: true, At: AtReceive, Clock: Wall}},
	{"reply send mono", Layout{Token: true, Seqno: true, At: AtSend, Clock: Monotonic}},
	{"reply midpoint", Layout{Token: true, Seqno: true, At: AtMidpoint, Clock: BothClocks}},
}

// sample fills every field a layout may carry, so a round trip shows
// which ones survive.
func sample(l Layout) Packet {
	p := Packet{Flags: FlagReply, Token: 0x0102030405060708, Seqno: 0xa1b2c3d4,
		ReceivedCount: 77, ReceivedWindow: 0xff00ff00ff00ff00,
		Receive: Time{Wall: 1_700_000_000_123_456_789, Mono: 5_000_000},
		Send:    Time{Wall: 1_700_000_000_123_999_000, Mono: 5_542_211}}
	keep := Packet{Flags: p.Flags}
	if l.Token {
		keep.Token = p.Token
	}
	if l.Seqno {
		keep.Seqno = p.Seqno
	}
	if l.Stats&ReceivedCount != 0 {
		keep.ReceivedCount = p.ReceivedCount
	}
	if l.Stats&ReceivedWindow != 0 {
		keep.ReceivedWindow = p.ReceivedWindow
	}
	clock := func(t Time) Time {
		if l.Clock&Wall == 0 {
			t.Wall = 0
		}
		if l.Clock&Monotonic == 0 {
			t.Mono = 0
		}
		return t
	}
	switch {
	case l.At == AtMidpoint:
		keep.Receive = clock(p.Receive)
		keep.Send = keep.Receive
	default:
		if l.At&AtReceive != 0 {
			keep.Receive = clock(p.Receive)
		}
		if l.At&AtSend != 0 {
			keep.Send = clock(p.Send)
		}
	}
	keep.Payload = []byte{}
	return keep
}

func TestPacketRoundTrip(t *testing.T) {
	for _, tc := range replyLayouts {
		keys := [][]byte{nil}
		if HMAC { // not in the router build
			keys = append(keys, []byte("sekrit"))
		}
		for _, key := range keys {
			want := sample(tc.l)
			b := want.Append(nil, tc.l, key, 0)
			wantLen := tc.l.Len()
			if key != nil {
				wantLen += hmacLen
			}
			if len(b) != wantLen {
				t.Errorf("%s key=%q: %d bytes, want %d", tc.name, key, len(b), wantLen)
			}
			got, err := Parse(b, tc.l, key)
			if err != nil {
				t.Fatalf("%s key=%q: %v", tc.name, key, err)
			}
			if key != nil {
				want.Flags |= FlagHMAC
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("%s key=%q:\n got %+v\nwant %+v", tc.name, key, got, want)
			}
		}
	}
}

// TestPacketBytes pins the wire layout: magic, flags, HMAC right after
// the flags, then little-endian token and seqno, then padding.
func TestPacketBytes(t *testing.T) {
	p := Packet{Token: 0x1122334455667788, Seqno: 5}
	got := p.Append(nil, Layout{Token: true, Seqno: true}, nil, 20)
	want := []byte{0x14, 0xa7, 0x5b, 0x00,
		0x88, 0x77, 0x66, 0x55, 0x44, 0x33, 0x22, 0x11,
		0x05, 0x00, 0x00, 0x00,
		0, 0, 0, 0}
	if !bytes.Equal(got, want) {
		t.Fatalf("got  % x\nwant % x", got, want)
	}
	signed := p.Append(nil, Layout{Token: true, Seqno: true}, []byte("k"), 0)
	if signed[3] != FlagHMAC || !bytes.Equal(signed[4+hmacLen:], want[4:16]) {
		t.Fatalf("signed packet % x: want flag 0x08 and the token right after a 16-byte HMAC", signed)
	}
}

func TestParseRejects(t *testing.T) {
	l := Layout{Token: true, Seqno: true, Stats: ReceivedCount, At: AtBoth, Clock: BothClocks}
	good := sample(l)
	plain := good.Append(nil, l, nil, 0)
	signed := good.Append(nil, l, []byte("right"), 0)
	flip := func(b []byte, i int) []byte {
		c := append([]byte(nil), b...)
		c[i] ^= 0x40
		return c
	}
	cases := []struct {
		name string
		b    []byte
		key  []byte
		want error
	}{
		{"empty", nil, nil, ErrShort},
		{"three bytes", plain[:3], nil, ErrShort},
		{"wrong magic", flip(plain, 1), nil, ErrMagic},
		{"unknown flag", append([]byte{0x14, 0xa7, 0x5b, 0x10}, plain[4:]...), nil, ErrFlags},
		{"header only", plain[:4], nil, ErrShort},
		{"one byte short", plain[:len(plain)-1], nil, ErrShort},
		{"hmac wanted", plain, []byte("right"), ErrNoHMAC},
		{"hmac unwanted", signed, nil, ErrUnwanted},
		{"wrong key", signed, []byte("wrong"), ErrBadHMAC},
		{"tampered token", flip(signed, 4+hmacLen), []byte("right"), ErrBadHMAC},
		{"tampered hmac", flip(signed, 5), []byte("right"), ErrBadHMAC},
		{"signed but cut", signed[:len(signed)-8], []byte("right"), ErrShort},
	}
	for _, tc := range cases {
		if _, err := Parse(tc.b, l, tc.key); !errors.Is(err, tc.want) {
			t.Errorf("%s: got %v, want %v", tc.name, err, tc.want)
		}
	}
	// Every truncation of a valid reply fails, never panics.
	for n := range len(plain) {
		if _, err := Parse(plain[:n], l, nil); err == nil {
			t.Errorf("a reply cut to %d of %d bytes parsed", n, len(plain))
		}
	}
}

func TestParamsRoundTrip(t *testing.T) {
	for _, p := range []Params{
		{},
		{Version: 1, Duration: time.Minute, Interval: 200 * time.Millisecond, ReceivedStats: ReceivedCount,
			StampAt: AtBoth, Clock: BothClocks, DSCP: 0xb8},
		{Version: 1, Duration: 1, Interval: 1, Length: 1472, StampAt: AtMidpoint, Clock: Wall, ServerFill: "rand"},
	} {
		got, err := ParseParams(p.Append(nil))
		if err != nil {
			t.Fatalf("%+v: %v", p, err)
		}
		if got != p {
			t.Errorf("got %+v, want %+v", got, p)
		}
	}
}

func TestParseParamsRejects(t *testing.T) {
	cases := []struct {
		name string
		b    []byte
	}{
		{"truncated key", []byte{0x80}},
		{"key without value", []byte{keyInterval}},
		{"truncated value", []byte{keyInterval, 0x80}},
		{"negative duration", []byte{keyDuration, 0x01}}, // zigzag 1 = -1
		{"zero interval", []byte{keyInterval, 0x00}},
		{"stamp-at 5", []byte{keyStampAt, 10}},
		{"clock 0", []byte{keyClock, 0}},
		{"clock 4", []byte{keyClock, 8}},
		{"received stats 4", []byte{keyReceivedStats, 8}},
		{"dscp 256", []byte{keyDSCP, 0x80, 0x04}},
		{"negative length", []byte{keyLength, 0x03}},
		{"fill longer than left", []byte{keyServerFill, 5, 'a', 'b'}},
		{"fill over 32", append([]byte{keyServerFill, 33}, bytes.Repeat([]byte{'x'}, 33)...)},
		{"overlong varint", append([]byte{keyDuration}, bytes.Repeat([]byte{0xff}, 11)...)},
	}
	for _, tc := range cases {
		if p, err := ParseParams(tc.b); err == nil {
			t.Errorf("%s: % x parsed as %+v", tc.name, tc.b, p)
		}
	}
	// Unknown keys are skipped, as irtt does.
	b := append([]byte{42, 0x02}, (&Params{Interval: time.Second}).Append(nil)...)
	if p, err := ParseParams(b); err != nil || p.Interval != time.Second {
		t.Errorf("unknown key: %+v, %v", p, err)
	}
}

func TestParseKey(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want string
		bad  bool
	}{
		{in: "sekrit", want: "sekrit"},
		{in: "0x6869", want: "hi"},
		{in: "0X6869", want: "0X6869"}, // irtt looks for a lower-case 0x only
		{in: "0xzz", bad: true},
		{in: "0x", bad: true},
	} {
		k, err := ParseKey(tc.in)
		if (err != nil) != tc.bad || (!tc.bad && string(k) != tc.want) {
			t.Errorf("ParseKey(%q) = %q, %v", tc.in, k, err)
		}
	}
}
