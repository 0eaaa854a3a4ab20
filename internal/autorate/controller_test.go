package autorate_test

import (
	"math"
	"testing"
	"time"

	"sqm/internal/autorate"
)

const mbit = 1e6

func greedy() capFunc { return constant(math.Inf(1)) }

// link builds a simulation with the loaded direction dir following capacity
// and greedy, and the other direction at a fixed 20 Mbit/s carrying 0.5
// Mbit/s of acks.
func link(dir autorate.Dir, capacity capFunc, refl []simRefl, tick time.Duration) *sim {
	dc := autorate.DirConfig{Min: 1 * mbit, Base: 20 * mbit, Max: 100 * mbit}
	cfg := autorate.DefaultConfig(dc, dc, nil)
	loaded := &simDir{capacity: capacity, demand: greedy(), fifoLimit: 4e6}
	other := &simDir{capacity: constant(20 * mbit), demand: constant(0.5 * mbit), fifoLimit: 4e6}
	var down, up *simDir
	if dir == autorate.Down {
		loaded.modemLast, other.modemLast = true, false
		down, up = loaded, other
	} else {
		loaded.modemLast, other.modemLast = false, true
		down, up = other, loaded
	}
	return newSim(cfg, refl, down, up, tick)
}

// udpReflectors are n one-way reflectors with base delays 5..25 ms and
// clock offsets, the probes sqm's own servers answer.
func udpReflectors(n int) []simRefl {
	var r []simRefl
	for i := 0; i < n; i++ {
		r = append(r, simRefl{kind: autorate.KindUDP, oneWay: true,
			baseDown: time.Duration(5+4*i) * time.Millisecond, baseUp: time.Duration(4+3*i) * time.Millisecond,
			clock: time.Duration(i*37-50) * time.Millisecond})
	}
	return r
}

func icmpReflectors(n int, bypass bool) []simRefl {
	var r []simRefl
	for i := 0; i < n; i++ {
		r = append(r, simRefl{kind: autorate.KindICMP, bypass: bypass,
			baseDown: time.Duration(6+5*i) * time.Millisecond, baseUp: time.Duration(6+5*i) * time.Millisecond})
	}
	return r
}

var ticks = []time.Duration{50 * time.Millisecond, 100 * time.Millisecond, 200 * time.Millisecond}

var dirs = []autorate.Dir{autorate.Down, autorate.Up}

const target = autorate.DefaultTarget

func TestExplore(t *testing.T) {
	for _, d := range dirs {
		for _, tk := range ticks {
			s := link(d, steps([]time.Duration{0, 30 * time.Second, 50 * time.Second}, []float64{40 * mbit, 20 * mbit, 40 * mbit}), udpReflectors(4), tk)
			s.run(70 * time.Second)
			rec := s.recovery(d, 30*time.Second, 5*time.Second, target)
			share, p99 := s.overShare(d, 31*time.Second, 50*time.Second, target)
			up := s.reach(d, 50*time.Second, 10*time.Second, 0.9)
			u := s.utilisation(d, 31*time.Second, 50*time.Second)
			pre := s.utilisation(d, 20*time.Second, 30*time.Second)
			sh0, p0 := s.overShare(d, 20*time.Second, 30*time.Second, target)
			t.Logf("%v tick %v: pre util %.3f over %.3f p99 %v | down: recovery %v, over %.3f p99 %v util %.3f | up: reach %v", d, tk, pre, sh0, p0, rec, share, p99, u, up)
		}
	}
}
