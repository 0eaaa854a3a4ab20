package linklayer

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestSuggest(t *testing.T) {
	ppp := Iface{Name: "pppoe-wan", Type: 512}
	eth := Iface{Name: "eth0", Type: 1}
	vlan := Iface{Name: "eth0.7", Type: 1, DevType: "vlan"}
	for _, c := range []struct {
		name string
		r    Result
		i    Iface
		want []string // Cake fields, in order
	}{
		{"atm 40 on ppp", Result{LinkLayer: ATM, Overhead: 40}, ppp, []string{"pppoe-llcsnap", "atm overhead 40"}},
		{"atm 41 on ppp: keyword within 2", Result{LinkLayer: ATM, Overhead: 41}, ppp, []string{"pppoe-llcsnap", "atm overhead 41"}},
		{"atm 32 on ppp", Result{LinkLayer: ATM, Overhead: 32}, ppp, []string{"pppoe-vcmux", "atm overhead 32"}},
		{"atm 32 on eth", Result{LinkLayer: ATM, Overhead: 32}, eth, []string{"bridged-llcsnap", "atm overhead 32"}},
		{"atm 44 no keyword", Result{LinkLayer: ATM, Overhead: 44}, eth, []string{"atm overhead 44"}},
		{"atm 10 unknown iface", Result{LinkLayer: ATM, Overhead: 10}, Iface{}, []string{"ipoa-vcmux", "pppoa-vcmux", "atm overhead 10"}},
		{"line on ppp", Result{LinkLayer: Ethernet}, ppp, []string{"pppoe-ptm", "ethernet overhead 46"}},
		{"line on vlan", Result{LinkLayer: Ethernet}, vlan, []string{"ethernet ether-vlan", "bridged-ptm ether-vlan", "docsis"}},
		{"unknown on eth", Result{LinkLayer: Unknown}, eth, []string{"ethernet", "bridged-ptm", "docsis"}},
	} {
		var got []string
		for _, s := range Suggest(c.r, c.i) {
			got = append(got, s.Cake)
		}
		if strings.Join(got, "|") != strings.Join(c.want, "|") {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
}

func TestReadIface(t *testing.T) {
	root := t.TempDir()
	mk := func(name, typ, uevent string) {
		d := filepath.Join(root, "sys/class/net", name)
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(d, "type"), []byte(typ), 0o644)
		if uevent != "" {
			os.WriteFile(filepath.Join(d, "uevent"), []byte(uevent), 0o644)
		}
	}
	mk("eth0.7", "1\n", "DEVTYPE=vlan\nINTERFACE=eth0.7\nIFINDEX=5\n")
	mk("pppoe-wan", "512\n", "INTERFACE=pppoe-wan\nIFINDEX=9\n")
	mk("bad", "ether\n", "")
	mk("badu", "1\n", "garbage line\n")
	i, err := ReadIface(root, "eth0.7")
	if err != nil || !i.VLAN() || i.PPP() {
		t.Errorf("eth0.7: %+v %v", i, err)
	}
	i, err = ReadIface(root, "pppoe-wan")
	if err != nil || !i.PPP() || i.VLAN() {
		t.Errorf("pppoe-wan: %+v %v", i, err)
	}
	for name, want := range map[string]string{"bad": "not an ARPHRD number", "badu": "is not KEY=VALUE", "nope": "no such file", "../x": "not an interface name"} {
		if _, err := ReadIface(root, name); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: err %v, want %q", name, err, want)
		}
	}
}
