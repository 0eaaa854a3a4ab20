package plan

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"sqm/internal/config"
)

// TestTBFBucketHoldsFullFrame: tbf drops any packet whose length (as the
// size table measures it) exceeds its burst. sqm-scripts' burst ignored
// the overhead, so with ATM and overhead 100 every full-size frame was
// dropped (issue 10 item 8).
func TestTBFBucketHoldsFullFrame(t *testing.T) {
	for _, mtu := range []int{576, 1280, 1500, 9000} {
		for _, ll := range []string{"ethernet", "atm"} {
			for _, llam := range []string{"tc_stab", "htb_private"} {
				for _, oh := range []int{-64, 0, 44, 70, 71, 100, 256, 1500} {
					for _, mpu := range []uint32{0, 64, 2000} {
						q := baseQueue()
						q.Script, q.Qdisc, q.Upload = "simplest_tbf", "fq_codel", 1000
						q.LinkLayer, q.LLAM, q.Overhead, q.StabMPU = ll, llam, oh, mpu
						if llam == "htb_private" && oh < 0 {
							continue // refused, see TestHTBPrivateBounds
						}
						p := mustBuild(t, q, mtu)
						tb := p.Egress.Qdiscs[0]
						frame := mtu + ethHeader
						charged := uint32(frame) // htb_private: the plain length
						if tb.Stab != nil {
							charged = tb.Stab.PacketLen(frame)
						}
						if charged > tb.TBF.Burst {
							t.Errorf("mtu %d %s %s overhead %d mpu %d: a full frame counts %d bytes, burst is %d: tbf drops it",
								mtu, ll, llam, oh, mpu, charged, tb.TBF.Burst)
						}
					}
				}
			}
		}
	}
	// The case from the issue, by hand: 1514+100 = 1614 bytes = 34 cells.
	q := baseQueue()
	q.Script, q.Upload = "simplest_tbf", 1000
	q.LinkLayer, q.LLAM, q.Overhead = "atm", "tc_stab", 100
	if got := mustBuild(t, q, 1500).Egress.Qdiscs[0].TBF.Burst; got != 34*53 {
		t.Errorf("atm overhead 100: burst %d, want %d", got, 34*53)
	}
	// Small overheads keep sqm-scripts' value.
	q.Overhead = 44
	if got := mustBuild(t, q, 1500).Egress.Qdiscs[0].TBF.Burst; got != 1749 {
		t.Errorf("atm overhead 44: burst %d, want sqm-scripts' 1749", got)
	}
}

// TestHTBPrivateBounds: htb_private carries overhead and mpu in struct
// tc_ratespec's unsigned 16-bit fields. A negative overhead used to pass
// Build and `sqm plan` and fail only at apply (issue 10 item 7).
func TestHTBPrivateBounds(t *testing.T) {
	for _, tt := range []struct {
		script   string
		overhead int
		mpu      uint32
		option   string // "" = accepted
	}{
		{"simple", -4, 0, "overhead"},
		{"simplest_tbf", -1, 0, "overhead"},
		{"simple", 0, 0, ""},
		{"simple", 1500, 65535, ""},
		{"simple", 0, 65536, "tcMPU"},
		{"piece_of_cake", -4, 0, ""}, // htb_private with cake uses cake's own keywords
	} {
		q := baseQueue()
		q.Script, q.LinkLayer, q.LLAM, q.Overhead, q.StabMPU = tt.script, "ethernet", "htb_private", tt.overhead, tt.mpu
		q.OptionPos = map[string]config.Position{"overhead": {File: "sqm", Line: 9}, "tcMPU": {File: "sqm", Line: 10}}
		p, err := Build(q, Env{MTU: 1500})
		var oe *config.OptionError
		switch {
		case tt.option == "" && err != nil:
			t.Errorf("%+v: %v", tt, err)
		case tt.option == "" && p.Validate() != nil:
			t.Errorf("%+v: Build's plan fails Validate: %v", tt, p.Validate())
		case tt.option != "" && (!errors.As(err, &oe) || oe.Option != tt.option || !strings.Contains(err.Error(), "htb_private")):
			t.Errorf("%+v: error %v, want one about option %s and htb_private", tt, err, tt.option)
		}
	}
}

// TestValidateRefusesKernelOutOfRange: plans read back from state files
// are checked against the kernel's limits too.
func TestValidateRefusesKernelOutOfRange(t *testing.T) {
	q := baseQueue()
	q.LinkLayer, q.LLAM, q.Overhead = "atm", "htb_private", 44
	p := mustBuild(t, q, 1500)
	c := clonePlan(t, p)
	c.Egress.Classes[0].HTB.LinkLayer.Overhead = -1
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "rate-table overhead -1") {
		t.Errorf("negative rate-table overhead: %v", err)
	}
	q.LLAM = "tc_stab"
	c = clonePlan(t, mustBuild(t, q, 1500))
	c.Egress.Qdiscs[0].Stab.TSize = 4000000000
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "4000000000 cells") {
		t.Errorf("huge size table: %v", err)
	}
}

// FuzzParseBuild: whatever the config reader accepts, Build either refuses
// with an error naming an option, or returns a plan that passes Validate
// (which checks the kernel's field limits), so nothing the config allows
// fails only at apply time.
func FuzzParseBuild(f *testing.F) {
	for _, s := range []string{
		"simple htb_private ethernet -4 0 2047 512",
		"simplest_tbf tc_stab atm 100 64 2047 512",
		"piece_of_cake cake atm 44 0 0 0",
		"layer_cake default ethernet 38 64 1500 128",
		"simplest default none 0 0 65536 32749",
		"police tc_stab atm 1500 65535 1 1",
	} {
		f.Add(s, 1500)
	}
	f.Fuzz(func(t *testing.T, fields string, mtu int) {
		w := strings.Fields(fields)
		if len(w) != 7 || mtu < 68 || mtu > 65536 {
			return
		}
		text := fmt.Sprintf("config queue 'wan'\n\toption enabled '1'\n\toption interface 'eth0'\n\toption script '%s'\n"+
			"\toption linklayer_adaptation_mechanism '%s'\n\toption linklayer '%s'\n\toption overhead '%s'\n"+
			"\toption tcMPU '%s'\n\toption tcMTU '%s'\n\toption tcTSIZE '%s'\n", w[0], w[1], w[2], w[3], w[4], w[5], w[6])
		file, err := config.Parse("fuzz", strings.NewReader(text))
		if err != nil {
			return
		}
		for _, q := range file.Enabled() {
			p, err := Build(&q, Env{MTU: mtu})
			if err != nil {
				var oe *config.OptionError
				if !errors.As(err, &oe) {
					t.Fatalf("Build error %v is not an OptionError", err)
				}
				continue
			}
			if err := p.Validate(); err != nil {
				t.Fatalf("config %q at MTU %d: Build's plan fails Validate: %v", fields, mtu, err)
			}
		}
	})
}
