package reflector

import (
	"encoding/binary"
	"net/netip"
	"strings"
	"testing"
	"time"
)

func TestCheckTimestamps(t *testing.T) {
	const h = 3600 * 1000 // an hour in ms
	for _, tt := range []struct {
		name                    string
		orig, receive, transmit uint32
		want                    string
	}{
		{"good", 10 * h, 10*h + 12, 10*h + 12, ""},
		{"good turnaround", 10 * h, 10*h + 12, 10*h + 15, ""},
		{"offset clock", 10 * h, 3*h + 7, 3*h + 7, ""},
		{"across midnight", dayMs - 5, 3, 3, ""},
		{"turnaround across midnight", dayMs - 50, dayMs - 2, 1, ""},
		{"copies originate", 10 * h, 10 * h, 10 * h, ""}, // one reply cannot tell; see TestProberStampFaults
		{"high bit", 10 * h, 1<<31 | 5, 1<<31 | 5, tsHighBit},
		{"high bit transmit", 10 * h, 10 * h, 1<<31 | 5, tsHighBit},
		{"beyond a day", 10 * h, 0x10000010, 0x10000011, tsBeyondDay},
		{"little-endian", 10 * h, swap(10*h + 12), swap(10*h + 12), tsLittle},
		{"zeros", 10 * h, 0, 0, tsZero},
		{"transmit before receive", 10 * h, 10*h + 12, 10*h + 11, tsTurnround},
		{"transmit long after receive", 10 * h, 10*h + 12, 10*h + 1013, tsTurnround},
		{"transmit a second after", 10 * h, 10*h + 12, 10*h + 1012, ""},
	} {
		if got := CheckTimestamps(tt.orig, tt.receive, tt.transmit); got != tt.want {
			t.Errorf("%s: CheckTimestamps(%d, %d, %d) = %q, want %q", tt.name, tt.orig, tt.receive, tt.transmit, got, tt.want)
		}
	}
}

// TestMidnight: delays across midnight UTC, the stamps' wrap, come out
// as if there were none, from either side of it.
func TestMidnight(t *testing.T) {
	midnight := time.Date(2026, 12, 3, 0, 0, 0, 0, time.UTC)
	for _, tt := range []struct {
		name            string
		sent            time.Duration // from midnight
		up, turn, down  time.Duration
		offset          time.Duration // reflector clock minus ours
		wantUp, wantDwn time.Duration
	}{
		{"before", -time.Second, 5 * time.Millisecond, 0, 7 * time.Millisecond, 0, 5 * time.Millisecond, 7 * time.Millisecond},
		{"sent before, stamped after", -3 * time.Millisecond, 5 * time.Millisecond, 0, 7 * time.Millisecond, 0, 5 * time.Millisecond, 7 * time.Millisecond},
		{"stamped before, received after", -6 * time.Millisecond, 5 * time.Millisecond, 0, 7 * time.Millisecond, 0, 5 * time.Millisecond, 7 * time.Millisecond},
		{"turnaround across", -5 * time.Millisecond, 4 * time.Millisecond, 2 * time.Millisecond, 7 * time.Millisecond, 0, 4 * time.Millisecond, 7 * time.Millisecond},
		{"reflector ahead across", -time.Second, 5 * time.Millisecond, 0, 7 * time.Millisecond, 998 * time.Millisecond, 1003 * time.Millisecond, -991 * time.Millisecond},
		{"reflector behind across", 100 * time.Millisecond, 5 * time.Millisecond, 0, 7 * time.Millisecond, -200 * time.Millisecond, -195 * time.Millisecond, 207 * time.Millisecond},
	} {
		sent := midnight.Add(tt.sent)
		rcv := sent.Add(tt.up + tt.offset)
		xmt := rcv.Add(tt.turn)
		back := sent.Add(tt.up + tt.turn + tt.down)
		r, x := msSinceMidnight(rcv.UnixNano()), msSinceMidnight(xmt.UnixNano())
		if why := CheckTimestamps(msSinceMidnight(sent.UnixNano()), r, x); why != "" {
			t.Errorf("%s: stamps refused: %s", tt.name, why)
		}
		up, down := timestampDelays(sent.UnixNano(), back.UnixNano(), r, x)
		// Our side is exact, the reflector's truncated to the ms.
		if up > tt.wantUp || up <= tt.wantUp-time.Millisecond || down < tt.wantDwn || down >= tt.wantDwn+time.Millisecond {
			t.Errorf("%s: up %v down %v, want %v and %v (within the reflector's ms)", tt.name, up, down, tt.wantUp, tt.wantDwn)
		}
	}
}

func TestWrapDay(t *testing.T) {
	for _, tt := range []struct{ in, want time.Duration }{
		{0, 0}, {time.Millisecond, time.Millisecond}, {-time.Millisecond, -time.Millisecond},
		{day - time.Millisecond, -time.Millisecond}, {-day + time.Millisecond, time.Millisecond},
		{day / 2, -day / 2}, {-day / 2, -day / 2}, {day/2 - 1, day/2 - 1}, {3*day + 5, 5},
	} {
		if got := wrapDay(tt.in); got != tt.want {
			t.Errorf("wrapDay(%v) = %v, want %v", tt.in, got, tt.want)
		}
	}
}

func TestEchoCodec(t *testing.T) {
	for _, typ := range []byte{icmp4Echo, icmp6Echo} {
		b := appendEcho(nil, typ, 0x1234, 0x00abcdef)
		if typ == icmp4Echo && checksum(b) != 0 {
			t.Errorf("type %d: checksum does not verify", typ)
		}
		reply := append([]byte(nil), b...)
		reply[0] = icmp4EchoReply
		if typ == icmp6Echo {
			reply[0] = icmp6EchoReply
		}
		seq, ok := parseEcho(reply, reply[0], 0x1234, false)
		if !ok || seq != 0x00abcdef {
			t.Errorf("type %d: parseEcho = %#x, %v", typ, seq, ok)
		}
		if _, ok := parseEcho(reply, reply[0], 0x4321, false); ok {
			t.Errorf("type %d: another id accepted", typ)
		}
		if _, ok := parseEcho(reply, reply[0], 0x4321, true); !ok {
			t.Errorf("type %d: datagram socket (any id) refused", typ)
		}
		if _, ok := parseEcho(b, reply[0], 0x1234, false); ok {
			t.Errorf("type %d: a request taken for a reply", typ)
		}
		other := append([]byte(nil), reply...)
		other[8] = 'x' // another program's ping
		if _, ok := parseEcho(other, reply[0], 0x1234, false); ok {
			t.Errorf("type %d: a foreign payload accepted", typ)
		}
		if _, ok := parseEcho(reply[:len(reply)-1], reply[0], 0x1234, false); ok {
			t.Errorf("type %d: a short reply accepted", typ)
		}
	}
}

func TestDNSCodec(t *testing.T) {
	q := appendDNSQuery(nil, 0xbeef)
	if len(q) != dnsQueryLen {
		t.Fatalf("query of %d bytes", len(q))
	}
	if _, ok := parseDNSReply(q); ok {
		t.Error("a query taken for a reply")
	}
	r := append(append([]byte(nil), q...), 1, 2, 3) // an authority section
	r[2] |= 0x80
	if id, ok := parseDNSReply(r); !ok || id != 0xbeef {
		t.Errorf("parseDNSReply = %#x, %v", id, ok)
	}
	other := append([]byte(nil), r...)
	other[14] = 28 // AAAA: not our question
	if _, ok := parseDNSReply(other); ok {
		t.Error("a reply to another question accepted")
	}
	if _, ok := parseDNSReply(r[:dnsQueryLen-1]); ok {
		t.Error("a short reply accepted")
	}
}

func TestTimestampCodec(t *testing.T) {
	b := appendTimestamp(nil, 7, 9, 123456)
	if len(b) != icmpTimestampLn || b[0] != icmp4Timestamp || checksum(b) != 0 {
		t.Fatalf("request %x: wrong type, length or checksum", b)
	}
	b[0] = icmp4TSReply
	binary.BigEndian.PutUint32(b[12:], 123460)
	binary.BigEndian.PutUint32(b[16:], 123461)
	r, ok := parseTimestampReply(b)
	if !ok || r != (tsReply{id: 7, seq: 9, orig: 123456, receive: 123460, transmit: 123461}) {
		t.Errorf("parseTimestampReply = %+v, %v", r, ok)
	}
	if _, ok := parseTimestampReply(b[:19]); ok {
		t.Error("short reply accepted")
	}
}

// FuzzTimestampReply: no reply crashes the parser or the checks, and
// stamps that pass give delays within half a day and a turnaround
// within the bound.
func FuzzTimestampReply(f *testing.F) {
	seed := appendTimestamp(nil, 1, 2, 3)
	seed[0] = icmp4TSReply
	f.Add(seed, int64(0))
	f.Add(seed[:8], int64(1e18))
	f.Fuzz(func(t *testing.T, b []byte, ns int64) {
		r, ok := parseTimestampReply(b)
		if !ok {
			return
		}
		if CheckTimestamps(r.orig, r.receive, r.transmit) != "" {
			return
		}
		if r.receive >= dayMs || r.transmit >= dayMs {
			t.Fatalf("stamps beyond a day accepted: %+v", r)
		}
		up, down := timestampDelays(ns, ns+int64(time.Millisecond), r.receive, r.transmit)
		if up < -day/2 || up >= day/2 || down < -day/2 || down >= day/2 {
			t.Fatalf("delays %v %v outside half a day", up, down)
		}
	})
}

func TestParseTarget(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want Target
		err  string
	}{
		{"1.1.1.1", Target{Addr: netip.MustParseAddr("1.1.1.1"), Kind: ICMPTimestamp}, ""},
		{"2606:4700:4700::1111", Target{Addr: netip.MustParseAddr("2606:4700:4700::1111"), Kind: ICMPEcho}, ""},
		{"::ffff:1.1.1.1", Target{Addr: netip.MustParseAddr("1.1.1.1"), Kind: ICMPTimestamp}, ""},
		{"icmp-echo://9.9.9.9", Target{Addr: netip.MustParseAddr("9.9.9.9"), Kind: ICMPEcho}, ""},
		{"icmp-timestamp://9.9.9.9", Target{Addr: netip.MustParseAddr("9.9.9.9"), Kind: ICMPTimestamp}, ""},
		{"sqm://192.168.1.2", Target{Addr: netip.MustParseAddr("192.168.1.2"), Kind: UDPSQM}, ""},
		{"dns://[2620:fe::fe]:5353", Target{Addr: netip.MustParseAddr("2620:fe::fe"), Port: 5353, Kind: UDPDNS}, ""},
		{"irtt://[2001:db8::1]:2113", Target{Addr: netip.MustParseAddr("2001:db8::1"), Port: 2113, Kind: UDPIRTT}, ""},
		{"icmp-timestamp://2001:db8::1", Target{}, "IPv4 only"},
		{"example.com", Target{}, "names are not resolved"},
		{"irtt://example.com:2112", Target{}, "names are not resolved"},
		{"sqm://1.2.3.4:0", Target{}, "port 0"},
		{"tcp://1.2.3.4", Target{}, "unknown kind"},
		{"0.0.0.0", Target{}, "cannot answer"},
		{"ff02::1", Target{}, "cannot answer"},
	} {
		got, err := ParseTarget(tt.in)
		switch {
		case tt.err != "":
			_, addr, _ := strings.Cut(tt.in, "://")
			if addr == "" {
				addr = tt.in
			}
			if err == nil || !strings.Contains(err.Error(), tt.err) || !strings.Contains(err.Error(), addr) {
				t.Errorf("ParseTarget(%q) = %v, %v; want an error naming it and %q", tt.in, got, err, tt.err)
			}
		case err != nil:
			t.Errorf("ParseTarget(%q): %v", tt.in, err)
		case got.Addr != tt.want.Addr || got.Port != tt.want.Port || got.Kind != tt.want.Kind:
			t.Errorf("ParseTarget(%q) = %v, want %v", tt.in, got, tt.want)
		}
	}
}

func TestDefaults(t *testing.T) {
	ts := Targets(DefaultReflectors, ProbeICMP)
	c := Config{Targets: ts}
	got, err := c.withDefaults()
	if err != nil {
		t.Fatalf("the default reflectors do not make a valid config: %v", err)
	}
	if got.Interval != 300*time.Millisecond || got.Timeout != 2*time.Second {
		t.Errorf("defaults %v, %v", got.Interval, got.Timeout)
	}
	v4 := 0
	for _, tg := range ts {
		if tg.Kind == ICMPTimestamp {
			v4++
		}
	}
	if v4 == 0 || v4 == len(ts) {
		t.Errorf("%d of %d default targets IPv4: want both families", v4, len(ts))
	}
	kinds := map[Kind]int{}
	for _, tg := range Targets(DefaultReflectors, ProbeBoth) {
		kinds[tg.Kind]++
	}
	if n := len(DefaultReflectors); kinds[UDPDNS] != n || kinds[ICMPEcho]+kinds[ICMPTimestamp] != n {
		t.Errorf("both probes of %d reflectors: %v", n, kinds)
	}
	for _, tt := range []struct {
		s    string
		want Probe
	}{{"icmp", ProbeICMP}, {"udp", ProbeUDP}, {"both", ProbeBoth}, {"tcp", 0}} {
		if got, err := ParseProbe(tt.s); got != tt.want || (err == nil) != (tt.want != 0) {
			t.Errorf("ParseProbe(%q) = %v, %v", tt.s, got, err)
		}
	}
	for _, bad := range []Config{
		{},
		{Targets: ts, Interval: time.Millisecond},
		{Targets: ts, Timeout: 2 * time.Minute},
		{Targets: make([]Target, MaxTargets+1)},
		{Targets: []Target{{Addr: netip.MustParseAddr("::1"), Kind: ICMPTimestamp}}},
	} {
		if _, err := bad.withDefaults(); err == nil {
			t.Errorf("config %+v accepted", bad)
		}
	}
}
