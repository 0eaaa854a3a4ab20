package web

import (
	"errors"
	"net"
	"net/netip"
	"strings"
	"testing"
)

func TestResolveListen(t *testing.T) {
	for in, want := range map[string]string{
		"8080": "127.0.0.1:8080", ":8080": "127.0.0.1:8080", "192.168.1.1:80": "192.168.1.1:80",
		"[::1]:8080": "[::1]:8080", "localhost:8080": "localhost:8080",
		"": "error", "192.168.1.1": "error", "::1": "error", ":0": "error", ":99999": "error", "a:b:c": "error", ":http-alt": "error", ":+80": "error", ":65535": "127.0.0.1:65535", ":65536": "error",
	} {
		got, err := ResolveListen(in)
		if want == "error" {
			if err == nil {
				t.Errorf("%q: %q; want an error", in, got)
			}
			continue
		}
		if err != nil || got != want {
			t.Errorf("%q: %q, %v; want %q", in, got, err, want)
		}
	}
}

func TestCheckListen(t *testing.T) {
	addrs := func(iface string) ([]netip.Addr, error) {
		switch iface {
		case "eth1":
			return []netip.Addr{netip.MustParseAddr("203.0.113.5"), netip.MustParseAddr("2001:db8::5")}, nil
		}
		return nil, errors.New("no such interface")
	}
	wan := []string{"eth1", "pppoe-wan"}
	for in, want := range map[string]string{
		"127.0.0.1:80":     "",
		"192.168.1.1:80":   "",
		"localhost:80":     "",
		"[::1]:80":         "",
		"0.0.0.0:80":       "every address",
		"[::]:80":          "every address",
		"203.0.113.5:80":   "address of eth1",
		"[2001:db8::5]:80": "address of eth1",
		"router.lan:80":    "not a host name",
	} {
		err := CheckListen(in, wan, addrs)
		if want == "" {
			if err != nil {
				t.Errorf("%s: %v", in, err)
			}
		} else if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v; want %q", in, err, want)
		}
	}
}

func FuzzResolveListen(f *testing.F) {
	for _, s := range []string{"8080", ":80", "[::1]:1", "1.2.3.4:5", "", "[", "a:b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		hp, err := ResolveListen(s)
		if err != nil {
			return
		}
		if _, _, err := net.SplitHostPort(hp); err != nil {
			t.Fatalf("%q -> %q, which does not split: %v", s, hp, err)
		}
	})
}
