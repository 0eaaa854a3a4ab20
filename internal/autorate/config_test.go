package autorate_test

import (
	"math"
	"strings"
	"testing"
	"time"

	"sqm/internal/autorate"
)

func validConfig() autorate.Config {
	dc := autorate.DirConfig{Min: 1e6, Base: 20e6, Max: 100e6}
	return autorate.DefaultConfig(dc, dc, []autorate.Kind{autorate.KindUDP, autorate.KindICMP})
}

func TestValidate(t *testing.T) {
	if err := func() error { c := validConfig(); return c.Validate() }(); err != nil {
		t.Fatalf("default config: %v", err)
	}
	cases := []struct {
		name string
		edit func(*autorate.Config)
		want string
	}{
		{"min too low", func(c *autorate.Config) { c.Dir[autorate.Down].Min = 100 }, "autorate: download: min rate 100 bit/s is below 8 kbit/s"},
		{"base below min", func(c *autorate.Config) { c.Dir[autorate.Up].Base = 1e5 }, "autorate: upload: base rate 100000 bit/s is below the min rate 1000000 bit/s"},
		{"max below base", func(c *autorate.Config) { c.Dir[autorate.Down].Max = 1e7 }, "autorate: download: max rate 10000000 bit/s is below the base rate 20000000 bit/s"},
		{"absurd max", func(c *autorate.Config) { c.Dir[autorate.Down].Max = 1 << 60 }, "is not a rate any link has"},
		{"target", func(c *autorate.Config) { c.Dir[autorate.Up].Target = time.Microsecond }, "autorate: upload: delay target 1µs is outside 1ms..10s"},
		{"no reflectors", func(c *autorate.Config) { c.Reflectors = nil }, "autorate: no reflectors"},
		{"too many reflectors", func(c *autorate.Config) { c.Reflectors = make([]autorate.Kind, 33) }, "autorate: 33 reflectors; at most 32"},
		{"bad kind", func(c *autorate.Config) { c.Reflectors[1] = 9 }, "autorate: reflector 1: unknown kind kind(9)"},
		{"negative interval", func(c *autorate.Config) { c.ProbeInterval = -time.Second }, "autorate: probe interval -1s is outside 0..1h"},
		{"idle probing faster", func(c *autorate.Config) { c.IdleProbeInterval = 10 * time.Millisecond }, "autorate: idle probe interval 10ms is shorter than the probe interval 100ms"},
		{"load high", func(c *autorate.Config) { c.LoadHigh = 1.5 }, "autorate: load high 1.5 is outside (0, 1]"},
		{"NaN", func(c *autorate.Config) { c.IncreasePerSec = math.NaN() }, "autorate: increase per second NaN is outside (0, 10]"},
		{"light above high", func(c *autorate.Config) { c.LoadLight = 0.9 }, "autorate: load light 0.9 is above load high 0.75"},
		{"decrease step", func(c *autorate.Config) { c.MaxDecreaseStep = 1 }, "autorate: max decrease step 1 is outside (0, 0.9]"},
		{"min per kind", func(c *autorate.Config) { c.MinPerKind = -1 }, "autorate: min per kind -1 is outside 1..32"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := validConfig()
			tc.edit(&c)
			err := c.Validate()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Validate() = %v, want an error with %q", err, tc.want)
			}
			if _, err := autorate.New(c); err == nil {
				t.Errorf("New accepted a config Validate refuses")
			}
		})
	}
}

func TestNames(t *testing.T) {
	for r := autorate.Reason(0); r < 13; r++ {
		if s := r.String(); s == "" || strings.HasPrefix(s, "reason(") {
			t.Errorf("reason %d has no name", r)
		}
	}
	if got := autorate.Reason(200).String(); got != "reason(200)" {
		t.Errorf("unknown reason: %q", got)
	}
	if got := autorate.ReasonBottleneckBelow.String(); got != "bottleneck-below" {
		t.Errorf("ReasonBottleneckBelow = %q", got)
	}
	if got := autorate.WhyNoReply.String() + "," + autorate.WhyDisagrees.String() + "," + autorate.KindUDP.String(); got != "no-reply,disagrees,udp" {
		t.Errorf("names %q", got)
	}
}

// TestBounds: whatever comes in, the rate stays within min..max, moves at
// most by the step bounds per decision, and a counter reset or a clock going
// back does not jump it.
func TestBounds(t *testing.T) {
	c := validConfig()
	ctrl, err := autorate.New(c)
	if err != nil {
		t.Fatal(err)
	}
	var in autorate.Input
	now := time.Duration(0)
	prev := [2]uint64{c.Dir[0].Base, c.Dir[1].Base}
	for i := 0; i < 2000; i++ {
		now += 50 * time.Millisecond
		if i == 700 {
			now -= time.Second // clock back
		}
		in.Samples = in.Samples[:0]
		rise := time.Duration(i%37) * 7 * time.Millisecond
		in.Samples = append(in.Samples,
			autorate.Sample{Reflector: 0, OneWay: true, Sent: now - 20*time.Millisecond, Down: 10*time.Millisecond + rise, Up: 5 * time.Millisecond},
			autorate.Sample{Reflector: 1, RTT: 30*time.Millisecond + rise, Sent: now - 40*time.Millisecond},
			autorate.Sample{Reflector: 7, RTT: time.Second}, // no such slot: ignored
			autorate.Sample{Reflector: 1, Lost: true})
		for d := range in.Shaper {
			in.Shaper[d].Bytes += uint64(i%5) * 300000
			if i == 900 {
				in.Shaper[d].Bytes = 0 // counter reset
			}
			in.Shaper[d].HaveQueue = i%3 == 0
		}
		out := ctrl.Tick(now, &in)
		for d := range out.Dir {
			r := out.Dir[d].Rate
			if r < c.Dir[d].Min || r > c.Dir[d].Max {
				t.Fatalf("tick %d: rate %d outside %d..%d", i, r, c.Dir[d].Min, c.Dir[d].Max)
			}
			if float64(r) > float64(prev[d])*(1+c.MaxIncreaseStep)+1 || float64(r) < float64(prev[d])*(1-c.MaxDecreaseStep)-1 {
				t.Fatalf("tick %d: rate %d from %d: beyond the step bounds", i, r, prev[d])
			}
			// the first tick says Changed: the caller sets the base rate
			if out.Dir[d].Changed != (r != prev[d] || i == 0) {
				t.Fatalf("tick %d: Changed %v with rate %d from %d", i, out.Dir[d].Changed, r, prev[d])
			}
			prev[d] = r
		}
	}
	var st autorate.Status
	ctrl.Status(&st)
	if len(st.Reflectors) != 2 || !st.Reflectors[0].OneWay || st.Reflectors[1].OneWay {
		t.Errorf("status reflectors %+v", st.Reflectors)
	}
}

func BenchmarkTick(b *testing.B) {
	kinds := []autorate.Kind{autorate.KindUDP, autorate.KindUDP, autorate.KindUDP, autorate.KindICMP, autorate.KindICMP, autorate.KindICMP}
	dc := autorate.DirConfig{Min: 1e6, Base: 20e6, Max: 100e6}
	ctrl, err := autorate.New(autorate.DefaultConfig(dc, dc, kinds))
	if err != nil {
		b.Fatal(err)
	}
	in := autorate.Input{Samples: make([]autorate.Sample, len(kinds))}
	now := time.Duration(0)
	var st autorate.Status
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		now += 50 * time.Millisecond
		rise := time.Duration(i%23) * time.Millisecond
		for j := range in.Samples {
			in.Samples[j] = autorate.Sample{Reflector: j, Sent: now - 30*time.Millisecond, OneWay: kinds[j] == autorate.KindUDP,
				Down: 10*time.Millisecond + rise, Up: 8 * time.Millisecond, RTT: 25*time.Millisecond + rise}
		}
		for d := range in.Shaper {
			in.Shaper[d].Bytes += 120000
			in.Shaper[d].HaveQueue = true
			in.Shaper[d].Backlog = uint32(i % 2 * 1500)
		}
		ctrl.Tick(now, &in)
		if i%20 == 0 {
			ctrl.Status(&st) // a status page once a second
		}
	}
}

// FuzzTick feeds arbitrary samples, counters and clocks: no panic, the rate
// within min..max.
func FuzzTick(f *testing.F) {
	f.Add([]byte{0, 10, 20, 30, 1, 200, 0, 0, 255, 3, 9, 9})
	f.Add([]byte("\x01\xff\xff\xff\x00\x00\x10\x80\x7f"))
	f.Fuzz(func(t *testing.T, data []byte) {
		c := validConfig()
		ctrl, err := autorate.New(c)
		if err != nil {
			t.Fatal(err)
		}
		var in autorate.Input
		now := time.Duration(0)
		for len(data) >= 6 {
			b := data[:6]
			data = data[6:]
			now += time.Duration(int8(b[0])) * 5 * time.Millisecond // may go back
			in.Samples = append(in.Samples[:0], autorate.Sample{
				Reflector: int(b[1]%4) - 1, Lost: b[1]&0x80 != 0, OneWay: b[1]&0x40 != 0,
				Sent: now - time.Duration(b[2])*time.Millisecond,
				Down: time.Duration(int8(b[3])) * time.Millisecond, Up: time.Duration(b[4]) * time.Millisecond,
				RTT: time.Duration(int8(b[3])) * 3 * time.Millisecond,
			})
			d := b[5] & 1
			in.Shaper[d].Bytes += uint64(b[5]) << (b[5] % 24)
			in.Shaper[d].HaveQueue = b[5]&2 != 0
			in.Shaper[d].Backlog = uint32(b[5] & 4)
			if b[5] == 0xff {
				in.Shaper[d].Bytes = 0
			}
			out := ctrl.Tick(now, &in)
			for d := range out.Dir {
				if r := out.Dir[d].Rate; r < c.Dir[d].Min || r > c.Dir[d].Max {
					t.Fatalf("rate %d outside %d..%d", r, c.Dir[d].Min, c.Dir[d].Max)
				}
			}
		}
	})
}
