package peerkey

import (
	"net/netip"
	"testing"
)

func TestOf(t *testing.T) {
	tests := []struct{ addr, want string }{
		{"192.0.2.7", "192.0.2.7/32"},
		{"::ffff:192.0.2.7", "192.0.2.7/32"},
		{"2001:db8:1:2:3:4:5:6", "2001:db8:1:2::/64"},
		{"2001:db8:1:2:ffff::1", "2001:db8:1:2::/64"},
		{"2001:db8:1:3::1", "2001:db8:1:3::/64"},
		{"fe80::1%eth0", "fe80::/64"},
		{"::1", "::/64"},
	}
	for _, tt := range tests {
		if got := Of(netip.MustParseAddr(tt.addr)).String(); got != tt.want {
			t.Errorf("Of(%s) = %s, want %s", tt.addr, got, tt.want)
		}
	}
	if Of(netip.Addr{}) != Of(netip.Addr{}) {
		t.Error("unknown addresses do not share one key")
	}
}

func TestOfAddrPort(t *testing.T) {
	tests := []struct{ in, want string }{
		{"192.0.2.7:443", "192.0.2.7/32"},
		{"[2001:db8:1:2::9]:443", "2001:db8:1:2::/64"},
		{"[::ffff:192.0.2.7]:1", "192.0.2.7/32"},
	}
	for _, tt := range tests {
		if got := OfAddrPort(tt.in).String(); got != tt.want {
			t.Errorf("OfAddrPort(%s) = %s, want %s", tt.in, got, tt.want)
		}
	}
	if OfAddrPort("pipe") != OfAddrPort("@") {
		t.Error("unparsable peers do not share one key")
	}
}
