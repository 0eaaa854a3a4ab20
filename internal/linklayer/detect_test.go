package linklayer

import (
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"
)

// adsl is seed 004's line: 7616/864 kbit/s, 29 ms, with a jittery path.
func adsl(overhead int, seed uint64) model {
	return model{atm: true, overhead: overhead, downBits: 7_616_000, upBits: 864_000, base: 29 * time.Millisecond,
		jitterUs: 300, spikeP: 0.05, spikeUs: 5000, lo: 60, hi: 252, perSz: 10, seed1: seed, seed2: 7}
}

// circ is the distance of a and b modulo 48.
func circ(a, b int) int { return circDist(((a%48)+48)%48, ((b%48)+48)%48) }

func TestDetectATMOverheads(t *testing.T) {
	// Three ATM lines from slow to fast; the jitter is kept where a cell
	// still stands out of it after the percentile (the fast line's cell
	// is 2 × 53 × 8 / 24 Mbit/s = 35 µs in the round trip).
	lines := []struct {
		name string
		m    func(ov int, seed uint64) model
	}{
		{"adsl 7616/864", adsl},
		{"adsl2+ 16000/1200", func(ov int, seed uint64) model {
			m := adsl(ov, seed)
			m.downBits, m.upBits, m.jitterUs = 16_000_000, 1_200_000, 200
			return m
		}},
		{"atm 24000/24000", func(ov int, seed uint64) model {
			m := adsl(ov, seed)
			m.downBits, m.upBits, m.jitterUs, m.perSz = 24_000_000, 24_000_000, 20, 20
			return m
		}},
	}
	var table strings.Builder
	fmt.Fprintf(&table, "%-18s %4s %8s %5s %7s %7s %5s\n", "line", "true", "reported", "mod48", "F atm", "F ovh", "sure")
	for _, l := range lines {
		worst := 0
		for ov := 0; ov <= 60; ov++ {
			m := l.m(ov, uint64(ov+1))
			r, err := Detect(m.samples(), Options{})
			if err != nil {
				t.Fatal(err)
			}
			if r.LinkLayer != ATM {
				t.Errorf("%s overhead %d: linklayer %s (%s)", l.name, ov, r.LinkLayer, r.Reason)
				continue
			}
			d := circ(r.Overhead, ov)
			worst = max(worst, d)
			if d > 4 {
				t.Errorf("%s overhead %d: reported %d (mod 48 %d), off by %d mod 48", l.name, ov, r.Overhead, r.OverheadMod, d)
			}
			// Inside the reporting window the value itself is right, not
			// only its residue.
			if ov >= 6+4 && ov <= 53-4 && abs(r.Overhead-ov) > 4 {
				t.Errorf("%s overhead %d: reported %d", l.name, ov, r.Overhead)
			}
			if ov%10 == 0 || ov == 44 {
				fmt.Fprintf(&table, "%-18s %4d %8d %5d %7.0f %7.0f %5v\n", l.name, ov, r.Overhead, r.OverheadMod, math.Min(r.FATM, 99999), math.Min(r.FOverhead, 99999), r.Sure)
			}
		}
		fmt.Fprintf(&table, "%-18s worst error mod 48 over 0..60: %d bytes\n", l.name, worst)
	}
	t.Log("\n" + table.String())
}

func TestDetectStraightLine(t *testing.T) {
	for _, c := range []struct {
		name     string
		down, up float64
		overhead int
		jitter   float64
		perSz    int
	}{
		{"vdsl 50/10 pppoe-ptm", 50e6, 10e6, 30, 20, 20},
		{"ethernet 5/1", 5e6, 1e6, 38, 300, 10},
		{"docsis 20/2", 20e6, 2e6, 18, 50, 20},
	} {
		m := model{overhead: c.overhead, downBits: c.down, upBits: c.up, base: 10 * time.Millisecond,
			jitterUs: c.jitter, spikeP: 0.05, spikeUs: 3000, lo: 60, hi: 252, perSz: c.perSz, seed1: 3, seed2: 4}
		r, err := Detect(m.samples(), Options{})
		if err != nil {
			t.Fatal(err)
		}
		if r.LinkLayer != Ethernet || !r.Sure {
			t.Errorf("%s: %s sure=%v (%s)", c.name, r.LinkLayer, r.Sure, r.Reason)
		}
		want := 1 / (1/c.down + 1/c.up)
		if math.Abs(r.RateBits-want)/want > 0.1 {
			t.Errorf("%s: rate %.0f bit/s, want %.0f ±10%%", c.name, r.RateBits, want)
		}
		t.Logf("%s: %s ratio %.3f rate %.2f Mbit/s (true %.2f)", c.name, r.LinkLayer, r.Ratio, r.RateBits/1e6, want/1e6)
	}
}

// At rates where a cell's serialisation is far below the timing noise
// the detector must say it cannot tell, for ATM and straight lines alike.
func TestDetectBelowNoiseIsUnknown(t *testing.T) {
	for _, atm := range []bool{true, false} {
		for seed := uint64(1); seed <= 20; seed++ {
			m := model{atm: atm, overhead: 40, downBits: 100e6, upBits: 100e6, base: 5 * time.Millisecond,
				jitterUs: 800, spikeP: 0.05, spikeUs: 3000, lo: 60, hi: 252, perSz: 5, seed1: seed, seed2: 9}
			r, err := Detect(m.samples(), Options{})
			if err != nil {
				t.Fatal(err)
			}
			if r.LinkLayer != Unknown || r.Sure {
				t.Errorf("atm=%v seed %d: %s sure=%v ratio %.2f; want unknown: a cell is %.1f µs in %.0f µs of jitter", atm, seed, r.LinkLayer, r.Sure, r.Ratio, 2*53*8/100e6*1e6, m.jitterUs)
			}
		}
	}
}

func TestDetectBadInput(t *testing.T) {
	for _, c := range []struct {
		name    string
		samples []Sample
		want    string
	}{
		{"none", nil, "0 distinct packet sizes"},
		{"narrow", func() []Sample {
			var s []Sample
			for sz := 100; sz < 150; sz++ {
				s = append(s, Sample{Size: sz, RTT: time.Millisecond})
			}
			return s
		}(), "need at least 96"},
		{"garbage dropped", []Sample{{Size: -1, RTT: 1}, {Size: 100, RTT: -5}}, "0 distinct"},
	} {
		_, err := Detect(c.samples, Options{})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err %v, want %q", c.name, err, c.want)
		}
	}
	if _, err := Detect(adsl(44, 1).samples(), Options{Percentile: 120}); err == nil {
		t.Error("percentile 120 accepted")
	}
}

// A flat or noise-free input must give finite numbers JSON can carry.
func TestDetectDegenerateJSON(t *testing.T) {
	m := adsl(44, 1)
	m.jitterUs, m.spikeP = 0, 0
	for _, s := range [][]Sample{m.samples(), flat()} {
		r, err := Detect(s, Options{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := json.Marshal(r); err != nil {
			t.Errorf("%s: %v", r.LinkLayer, err)
		}
	}
	r, _ := Detect(flat(), Options{})
	if r.LinkLayer != Unknown {
		t.Errorf("flat delays: %s, want unknown", r.LinkLayer)
	}
}

func flat() []Sample {
	var s []Sample
	for sz := 60; sz <= 252; sz++ {
		s = append(s, Sample{Size: sz, RTT: 10 * time.Millisecond})
	}
	return s
}

func TestReducePercentile(t *testing.T) {
	var s []Sample
	for i := 1; i <= 11; i++ {
		s = append(s, Sample{Size: 100, RTT: time.Duration(i) * time.Millisecond})
	}
	s = append(s, Sample{Size: 50, RTT: 2 * time.Millisecond})
	got := Reduce(s, 10)
	want := []Point{{Size: 50, DelayUs: 2000, N: 1}, {Size: 100, DelayUs: 2000, N: 11}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("Reduce = %v, want %v", got, want)
	}
}
