package linklayer

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Iface is what the kernel says about the interface the shaper sits on;
// it decides which encapsulations are possible on top of the framing.
type Iface struct {
	Name    string `json:"name"`
	Type    int    `json:"type"`              // ARPHRD_*: 1 Ethernet, 512 PPP, 65534 none
	DevType string `json:"devtype,omitempty"` // uevent DEVTYPE: vlan, bridge, wlan ...
}

// ARPHRD values (linux/if_arp.h) that change the advice.
const (
	arphrdEther = 1
	arphrdPPP   = 512
)

// PPP is true for a PPP device (PPPoE or PPPoA session), by type or, when
// the type is not known, by the names OpenWrt and pppd give them.
func (i Iface) PPP() bool {
	if i.Type == arphrdPPP {
		return true
	}
	return i.Type == 0 && (strings.HasPrefix(i.Name, "pppoe-") || strings.HasPrefix(i.Name, "pppoa-") || strings.HasPrefix(i.Name, "ppp"))
}

// VLAN is true for an 802.1Q device: its tag adds 4 bytes on the wire.
func (i Iface) VLAN() bool {
	return i.DevType == "vlan" || (i.DevType == "" && i.Type != arphrdPPP && strings.Contains(i.Name, ".") && !strings.HasPrefix(i.Name, "pppoe-"))
}

// ReadIface reads /sys/class/net/NAME (under root, "/" normally) .
func ReadIface(root, name string) (Iface, error) {
	if name == "" || strings.ContainsAny(name, "/\x00") || name == "." || name == ".." {
		return Iface{}, fmt.Errorf("linklayer: %q is not an interface name", name)
	}
	dir := filepath.Join(root, "sys/class/net", name)
	t, err := os.ReadFile(filepath.Join(dir, "type"))
	if err != nil {
		return Iface{Name: name}, fmt.Errorf("linklayer: interface %s: %w", name, err)
	}
	typ, err := ParseType(string(t))
	if err != nil {
		return Iface{Name: name}, fmt.Errorf("linklayer: %s: %w", filepath.Join(dir, "type"), err)
	}
	i := Iface{Name: name, Type: typ}
	if u, err := os.ReadFile(filepath.Join(dir, "uevent")); err == nil {
		kv, err := ParseUevent(string(u))
		if err != nil {
			return i, fmt.Errorf("linklayer: %s: %w", filepath.Join(dir, "uevent"), err)
		}
		i.DevType = kv["DEVTYPE"]
	}
	return i, nil
}

// ParseType reads the decimal ARPHRD number of /sys/class/net/*/type.
func ParseType(s string) (int, error) {
	s = strings.TrimSpace(s)
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 || n > 0xffff {
		return 0, fmt.Errorf("type %q is not an ARPHRD number (0..65535)", s)
	}
	return n, nil
}

// ParseUevent reads KEY=VALUE lines (sysfs uevent); blank lines are
// skipped, anything else is an error naming the line.
func ParseUevent(s string) (map[string]string, error) {
	kv := map[string]string{}
	sc := bufio.NewScanner(strings.NewReader(s))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok || k == "" || strings.ContainsAny(k, " \t") {
			return nil, fmt.Errorf("uevent line %d %q is not KEY=VALUE", n, line)
		}
		kv[k] = v
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("uevent: %w", err)
	}
	return kv, nil
}

// Keyword is one cake overhead keyword and what it stands for
// (tc-cake(8), "OVERHEAD COMPENSATION PARAMETERS").
type Keyword struct {
	Name     string `json:"name"`
	Overhead int    `json:"overhead"`
	ATM      bool   `json:"atm"`
	PTM      bool   `json:"ptm,omitempty"`
	PPP      bool   `json:"ppp"` // a PPP session runs on it
}

// atmKeywords are cake's ATM keywords, each fixing atm and an overhead.
var atmKeywords = []Keyword{
	{Name: "ipoa-vcmux", Overhead: 8, ATM: true},
	{Name: "pppoa-vcmux", Overhead: 10, ATM: true, PPP: true},
	{Name: "pppoa-llc", Overhead: 14, ATM: true, PPP: true},
	{Name: "ipoa-llcsnap", Overhead: 16, ATM: true},
	{Name: "bridged-vcmux", Overhead: 24, ATM: true},
	{Name: "bridged-llcsnap", Overhead: 32, ATM: true},
	{Name: "pppoe-vcmux", Overhead: 32, ATM: true, PPP: true},
	{Name: "pppoe-llcsnap", Overhead: 40, ATM: true, PPP: true},
	{Name: "conservative", Overhead: 48, ATM: true},
}

// Suggestion is the cake setting advised for a verdict on an interface.
type Suggestion struct {
	Cake string `json:"cake"` // words for cake's options, e.g. "pppoe-llcsnap" or "atm overhead 44"
	When string `json:"when"` // the line it fits
}

// Suggest turns a verdict into cake settings for the interface. ATM gets
// the measured overhead, named by the keyword that matches it (within 2
// bytes, the PPP ones preferred on a PPP device and the others elsewhere);
// a straight line gets the keywords its interface allows, one per kind of
// line, since idle delays cannot tell fibre from VDSL2 from DOCSIS.
// The overhead is relative to the IP packet, which is what cake counts
// on any device (it strips the MAC header when an overhead is given);
// shaping with tc_stab or htb_private on an Ethernet device below a
// PPPoE session counts that header already: give 14 bytes less there
// (seed 002: 40 on pppoe-ge00, 26 on ge00).
func Suggest(r Result, i Iface) []Suggestion {
	vlan := ""
	if i.VLAN() {
		vlan = " ether-vlan"
	}
	switch r.LinkLayer {
	case ATM:
		var out []Suggestion
		for _, k := range atmKeywords {
			if abs(k.Overhead-r.Overhead) <= 2 && (k.PPP == i.PPP() || (i.Type == 0 && i.Name == "")) {
				out = append(out, Suggestion{Cake: k.Name, When: fmt.Sprintf("ATM, %d bytes per packet as measured (%d)", k.Overhead, r.Overhead)})
			}
		}
		return append(out, Suggestion{Cake: fmt.Sprintf("atm overhead %d", r.Overhead), When: "ATM with the overhead as measured"})
	case Ethernet, Unknown:
		if i.PPP() {
			return []Suggestion{
				{Cake: "pppoe-ptm" + vlan, When: "VDSL2 (PTM) with PPPoE"},
				{Cake: "ethernet" + vlan + " overhead 46", When: "fibre or an Ethernet hand-off with PPPoE (38 + 8 for PPPoE)"},
			}
		}
		return []Suggestion{
			{Cake: "ethernet" + vlan, When: "fibre or an Ethernet hand-off"},
			{Cake: "bridged-ptm" + vlan, When: "VDSL2 (PTM) without PPPoE"},
			{Cake: "docsis", When: "cable (DOCSIS)"},
		}
	}
	return nil
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}
