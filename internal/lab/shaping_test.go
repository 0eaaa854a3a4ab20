package lab

import (
	"os"
	"path/filepath"
	"testing"

	"sqm/internal/plan"
)

// TestShapingPlans builds the real sqm plan for the default shaping of each
// emulated link layer and checks that cake compensates the framing the
// modem charges (or leaves it alone for plain Ethernet).
func TestShapingPlans(t *testing.T) {
	ov := 20
	tests := []struct {
		name     string
		link     Link
		shaping  Shaping
		src      string
		down, up uint64 // kbit/s
		atm      string
		overhead *int32
	}{
		{"ethernet", DefaultLink(), Shaping{}, "defaults", 18000, 4500, "", nil},
		{"atm 44", Link{DownBits: 1e6, UpBits: 1e6, RTT: 20e6, Buffer: 100, LinkLayer: "atm", Overhead: 44}, Shaping{}, "defaults", 900, 900, "atm", i32(44)},
		{"ptm", Link{DownBits: 50e6, UpBits: 10e6, RTT: 20e6, Buffer: 100, LinkLayer: "ptm", Overhead: -1}, Shaping{}, "defaults", 45000, 9000, "ptm", i32(30)},
		{"flags override", DefaultLink(), Shaping{DownBits: 15e6, UpBits: 4e6, Overhead: &ov, LinkLayer: "ethernet"}, "flags", 15000, 4000, "", i32(20)},
		{"atm link, compensation off", Link{DownBits: 1e6, UpBits: 1e6, RTT: 20e6, Buffer: 100, LinkLayer: "atm", Overhead: 44}, Shaping{LinkLayer: "none"}, "flags", 900, 900, "", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, err := tt.link.Resolve()
			if err != nil {
				t.Fatal(err)
			}
			q, src, err := tt.shaping.queue(l, wanDev)
			if err != nil {
				t.Fatal(err)
			}
			if src != tt.src || q.Download != tt.down || q.Upload != tt.up || q.Interface != wanDev {
				t.Errorf("queue %s: source %q, %d/%d kbit/s on %q; want %q, %d/%d on %s", tt.name, src, q.Download, q.Upload, q.Interface, tt.src, tt.down, tt.up, wanDev)
			}
			p, err := plan.Build(q, plan.Env{MTU: 1500})
			if err != nil {
				t.Fatal(err)
			}
			if p.Egress == nil || p.Ingress == nil || p.Ingress.Shaper == nil {
				t.Fatalf("plan lacks egress or ingress shaping: %+v", p)
			}
			for _, tree := range []*plan.Tree{p.Egress, p.Ingress.Shaper} {
				c := tree.Qdiscs[0].Cake
				if c == nil {
					t.Fatalf("root of %s is %s, want cake", tree.Device, tree.Qdiscs[0].Kind)
				}
				if c.ATM != tt.atm && !(tt.atm == "" && c.ATM == "noatm") {
					t.Errorf("%s: cake atm = %q, want %q", tree.Device, c.ATM, tt.atm)
				}
				if (c.Overhead == nil) != (tt.overhead == nil) || c.Overhead != nil && *c.Overhead != *tt.overhead {
					t.Errorf("%s: cake overhead = %v, want %v", tree.Device, deref(c.Overhead), deref(tt.overhead))
				}
			}
		})
	}
}

func TestShapingConfigFile(t *testing.T) {
	dir := t.TempDir()
	f := filepath.Join(dir, "sqm")
	conf := "config queue 'off'\n\toption enabled '0'\n\toption interface 'eth9'\n\toption script 'simple.qos'\n" +
		"config queue 'wan'\n\toption enabled '1'\n\toption interface 'eth1'\n\toption download '7000'\n\toption upload '800'\n" +
		"\toption qdisc 'fq_codel'\n\toption script 'simple.qos'\n"
	if err := os.WriteFile(f, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	q, src, err := Shaping{ConfigFile: f}.queue(DefaultLink(), wanDev)
	if err != nil {
		t.Fatal(err)
	}
	if src != f || q.Interface != wanDev || q.Script != "simple" || q.Download != 7000 || q.Upload != 800 {
		t.Errorf("from config: %q %q %q %d/%d", src, q.Interface, q.Script, q.Download, q.Upload)
	}
	if err := os.WriteFile(f, []byte("config queue 'x'\n\toption enabled '0'\n\toption interface 'eth1'\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := (Shaping{ConfigFile: f}).queue(DefaultLink(), wanDev); err == nil {
		t.Error("config without an enabled queue: want an error")
	}
}

func i32(v int32) *int32 { return &v }

func deref(p *int32) any {
	if p == nil {
		return nil
	}
	return *p
}
