package linklayer

import (
	"context"
	"net/netip"
	"strings"
	"testing"
	"time"
)

// Probe over loopback: every size comes back, each with its own RTT, and
// nothing else's echoes are counted.
func TestProbeLoopback(t *testing.T) {
	sizes := []int{60, 100, 200, 300}
	s, err := Probe(context.Background(), ProbeOptions{Target: netip.MustParseAddr("127.0.0.1"), Sizes: sizes, Repeat: 3,
		Interval: time.Millisecond, Timeout: 500 * time.Millisecond})
	if err != nil {
		if strings.Contains(err.Error(), "cannot send ICMP echo") {
			t.Skipf("no ICMP socket for this user: %v", err)
		}
		t.Fatal(err)
	}
	count := map[int]int{}
	for _, x := range s {
		if x.RTT <= 0 {
			t.Errorf("size %d: RTT %v", x.Size, x.RTT)
		}
		count[x.Size]++
	}
	for _, sz := range sizes {
		if count[sz] != 3 {
			t.Errorf("size %d answered %d times, want 3 (all: %v)", sz, count[sz], count)
		}
	}
	if len(s) != 12 {
		t.Errorf("%d samples, want 12", len(s))
	}
}

func TestProbeBadOptions(t *testing.T) {
	lo := netip.MustParseAddr("127.0.0.1")
	for _, c := range []struct {
		o    ProbeOptions
		want string
	}{
		{ProbeOptions{Sizes: []int{100}, Repeat: 1}, "no target"},
		{ProbeOptions{Target: lo, Repeat: 1}, "nothing to send"},
		{ProbeOptions{Target: lo, Sizes: []int{20}, Repeat: 1}, "probe size 20 outside"},
	} {
		_, err := Probe(context.Background(), c.o)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: err %v, want %q", c.o, err, c.want)
		}
	}
}

func TestParseSizes(t *testing.T) {
	for _, c := range []struct {
		in      string
		n       int
		first   int
		last    int
		wantErr string
	}{
		{"60-252", 193, 60, 252, ""},
		{"100-400/4", 76, 100, 400, ""},
		{" 60 - 200 ", 141, 60, 200, ""},
		{"60", 0, 0, 0, "give LO-HI"},
		{"a-b", 0, 0, 0, "not numbers"},
		{"20-200", 0, 0, 0, "below the smallest probe"},
		{"100-1600", 0, 0, 0, "above a 1500-byte MTU"},
		{"100-150", 0, 0, 0, "two ATM cells"},
		{"100-300/0", 0, 0, 0, "step 0"},
		{"100-300/24", 0, 0, 0, "step 24"},
	} {
		got, err := ParseSizes(c.in)
		if c.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), c.wantErr) {
				t.Errorf("%q: err %v, want %q", c.in, err, c.wantErr)
			}
			continue
		}
		if err != nil || len(got) != c.n || got[0] != c.first || got[len(got)-1] != c.last {
			t.Errorf("%q: %d sizes %v..., err %v", c.in, len(got), got[:min(3, len(got))], err)
		}
	}
}
