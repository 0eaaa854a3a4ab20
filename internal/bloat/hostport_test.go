package bloat

import (
	"strings"
	"testing"
)

// The three servers' addresses (sqm, irtt, iperf3) follow one rule for
// when a port is named; a bare IPv6 literal is a host, not host:port.
func TestWithPort(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{"192.0.2.1", "192.0.2.1:7"},
		{"192.0.2.1:99", "192.0.2.1:99"},
		{"2001:db8::1", "[2001:db8::1]:7"},
		{"[2001:db8::1]", "[2001:db8::1]:7"},
		{"[2001:db8::1]:99", "[2001:db8::1]:99"},
		{"host.example", "host.example:7"},
		{"host.example:99", "host.example:99"},
	} {
		if got := withPort(tt.in, 7); got != tt.want {
			t.Errorf("withPort(%q, 7) = %q, want %q", tt.in, got, tt.want)
		}
	}
	if got := HostPort("192.0.2.1"); got != "192.0.2.1:12866" {
		t.Errorf("HostPort: %q", got)
	}
	if got := irttHostPort("2001:db8::1"); got != "[2001:db8::1]:2112" {
		t.Errorf("irttHostPort: %q", got)
	}
	for _, tt := range []struct {
		in, host string
		port     uint16
		err      string
	}{
		{"192.0.2.1", "192.0.2.1", 5201, ""},
		{"[2001:db8::1]", "2001:db8::1", 5201, ""},
		{"h:5202", "h", 5202, ""},
		{":5201", "", 0, "no host"},
		{"h:0", "", 0, "not 1..65535"},
		{"h:99999", "", 0, "not 1..65535"},
		{"a:b:c]", "", 0, "want HOST or HOST:PORT"},
	} {
		h, p, err := iperf3HostPort(tt.in)
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("iperf3HostPort(%q): error %v, want %q", tt.in, err, tt.err)
			}
			continue
		}
		if err != nil || h != tt.host || p != tt.port {
			t.Errorf("iperf3HostPort(%q) = %q, %d, %v; want %q, %d", tt.in, h, p, err, tt.host, tt.port)
		}
	}
}
