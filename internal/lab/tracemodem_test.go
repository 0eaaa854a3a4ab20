package lab

import (
	"strings"
	"testing"
)

func TestTraceModemTbf(t *testing.T) {
	m := Modem{Limit: 1000, LinkLayer: "ethernet", Overhead: ethHeader}
	tests := []struct {
		bits        uint64
		rate, burst uint32
	}{
		{0, stallRate, 1514},           // a stall: one frame's bucket, no tokens to speak of
		{2_000_000, 250_000, 2 * 1514}, // 5 ms is 1250 bytes: two frames are the floor
		{12_000_000, 1_500_000, 7500},  // 5 ms of the rate
		{40_000_000, 5_000_000, 25_000},
		{1_000_000_000, 125_000_000, 625_000},
	}
	for _, tt := range tests {
		tb, err := m.tbf(tt.bits)
		if err != nil {
			t.Fatal(err)
		}
		if tb.Parms.Rate.Rate != tt.rate || *tb.Burst != tt.burst || tb.Parms.Rate.Linklayer != 1 || tb.Parms.Rate.Overhead != 0 {
			t.Errorf("tbf(%d) = rate %d burst %d linklayer %d overhead %d; want %d, %d, ethernet, 0",
				tt.bits, tb.Parms.Rate.Rate, *tb.Burst, tb.Parms.Rate.Linklayer, tb.Parms.Rate.Overhead, tt.rate, tt.burst)
		}
	}
	atm := Modem{Limit: 100, LinkLayer: "atm", Overhead: 44}
	tb, err := atm.tbf(1_000_000)
	if err != nil || tb.Parms.Rate.Linklayer != 2 || tb.Parms.Rate.Overhead != 30 {
		t.Errorf("atm: %+v, %v; want linklayer atm, overhead 30 (44 less the Ethernet header)", tb, err)
	}
	for _, bad := range []struct {
		m    Modem
		want string
	}{
		{Modem{Limit: 1, LinkLayer: "ptm", Overhead: 30}, "cannot follow a trace"},
		{Modem{Limit: 1, LinkLayer: "ethernet", Overhead: 0}, "below the 14-byte Ethernet header"},
	} {
		if _, err := bad.m.tbf(1_000_000); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("tbf(%+v) err %v, want %q", bad.m, err, bad.want)
		}
	}
}
