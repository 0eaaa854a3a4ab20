package irtt

import (
	"reflect"
	"testing"
	"time"
)

// FuzzParse feeds arbitrary datagrams to the parser under every layout a
// reply may have: it must not panic, and what it accepts must encode back
// to a packet that parses the same.
func FuzzParse(f *testing.F) {
	for _, tc := range replyLayouts {
		p := sample(tc.l)
		f.Add(p.Append(nil, tc.l, nil, 0), byte(0), false)
		f.Add(p.Append(nil, tc.l, []byte("k"), 0), byte(0), true)
	}
	f.Add([]byte{0x14, 0xa7, 0x5b}, byte(3), false)
	f.Fuzz(func(t *testing.T, b []byte, which byte, keyed bool) {
		l := replyLayouts[int(which)%len(replyLayouts)].l
		var key []byte
		if keyed {
			key = []byte("k")
		}
		p, err := Parse(b, l, key)
		if err != nil {
			return
		}
		again, err := Parse(p.Append(nil, l, key, 0), l, key)
		if err != nil {
			t.Fatalf("re-encoded packet does not parse: %v", err)
		}
		p.Flags |= again.Flags & FlagHMAC
		if len(p.Payload) == 0 {
			p.Payload = again.Payload
		}
		if !reflect.DeepEqual(p, again) {
			t.Fatalf("round trip changed the packet:\n%+v\n%+v", p, again)
		}
	})
}

// FuzzParseParams: no panic, and accepted parameters survive a round trip.
func FuzzParseParams(f *testing.F) {
	f.Add((&Params{Version: 1, Duration: time.Minute, Interval: time.Second, ReceivedStats: 3, StampAt: AtBoth, Clock: BothClocks, DSCP: 46, ServerFill: "rand"}).Append(nil))
	f.Add([]byte{keyServerFill, 2, 'a'})
	f.Add([]byte{99, 1, keyLength, 0x80})
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := ParseParams(b)
		if err != nil {
			return
		}
		again, err := ParseParams(p.Append(nil))
		if err != nil {
			t.Fatalf("re-encoded %+v does not parse: %v", p, err)
		}
		if again != p {
			t.Fatalf("round trip changed %+v to %+v", p, again)
		}
	})
}
