package autorate_test

import (
	"math"
	"strconv"
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

const (
	sec  = time.Second
	ms   = time.Millisecond
	step = 30 * sec // when the capacity moves, after the controller settled
)

// stepDownChecks runs a 40 -> 20 Mbit/s step and checks the target:
// the induced delay back under target within 1 s, and then kept there.
func stepDownChecks(t *testing.T, s *sim, d autorate.Dir) {
	t.Helper()
	s.run(step + 20*sec)
	pre := s.utilisation(d, step-10*sec, step)
	preOver, preP99 := s.overShare(d, step-10*sec, step, target)
	rec := s.recovery(d, step, 5*sec, target)
	over, p99 := s.overShare(d, step+1*sec, step+20*sec, target)
	u := s.utilisation(d, step+1*sec, step+20*sec)
	t.Logf("before: utilisation %.3f, over target %.1f%%, p99 %v; step: back under target after %v; after: over target %.1f%%, p99 %v, utilisation %.3f",
		pre, 100*preOver, preP99.Round(100*time.Microsecond), rec, 100*over, p99.Round(100*time.Microsecond), u)
	if rec > sec {
		t.Errorf("delay back under target %v after the capacity halved, want <= 1s", rec)
	}
	if over > 0.10 || preOver > 0.10 {
		t.Errorf("delay over target %.1f%% before, %.1f%% after the step; want <= 10%%", 100*preOver, 100*over)
	}
	if p99 > 2*target || preP99 > 2*target {
		t.Errorf("p99 delay %v before, %v after the step; want <= %v", preP99, p99, 2*target)
	}
	if pre < 0.9 || u < 0.85 {
		t.Errorf("utilisation %.3f before, %.3f after the step; want >= 0.9, 0.85", pre, u)
	}
}

var down20 = steps([]time.Duration{0, step}, []float64{40 * mbit, 20 * mbit})

func TestStepDown(t *testing.T) {
	for _, d := range dirs {
		for _, tk := range ticks {
			t.Run(d.String()+"/"+tk.String(), func(t *testing.T) {
				stepDownChecks(t, link(d, down20, udpReflectors(4), tk), d)
			})
		}
	}
}

func TestStepUp(t *testing.T) {
	for _, d := range dirs {
		for _, tk := range ticks {
			for _, from := range []float64{20 * mbit, 10 * mbit} {
				name := d.String() + "/" + tk.String() + "/from" + strconv.Itoa(int(from/mbit))
				t.Run(name, func(t *testing.T) {
					s := link(d, steps([]time.Duration{0, step}, []float64{from, 40 * mbit}), udpReflectors(4), tk)
					s.run(step + 20*sec)
					reach := s.reach(d, step, 10*sec, 0.9)
					over, p99 := s.overShare(d, step, step+20*sec, target)
					t.Logf("90%% of the new capacity after %v; over target %.1f%%, p99 %v", reach, 100*over, p99.Round(100*time.Microsecond))
					if limit := 5 * sec; reach > limit {
						t.Errorf("rate at 90%% of the new capacity after %v, want <= %v", reach, limit)
					}
					if over > 0.10 {
						t.Errorf("delay over target %.1f%% of the time after the step, want <= 10%%", 100*over)
					}
				})
			}
		}
	}
}

// ramp: 40 -> 10 Mbit/s over 20 s, back over 20 s.
func ramp(t0 time.Duration) capFunc {
	return func(t time.Duration) float64 {
		x := (t - t0).Seconds()
		switch {
		case x < 0:
			return 40 * mbit
		case x < 20:
			return (40 - 1.5*x) * mbit
		case x < 40:
			return (10 + 1.5*(x-20)) * mbit
		}
		return 40 * mbit
	}
}

func TestRamp(t *testing.T) {
	for _, d := range dirs {
		for _, tk := range ticks {
			t.Run(d.String()+"/"+tk.String(), func(t *testing.T) {
				s := link(d, ramp(step), udpReflectors(4), tk)
				s.run(step + 45*sec)
				over, p99 := s.overShare(d, step, step+45*sec, target)
				u := s.utilisation(d, step, step+45*sec)
				t.Logf("over target %.1f%%, p99 %v, utilisation %.3f", 100*over, p99.Round(100*time.Microsecond), u)
				if over > 0.10 || p99 > 2*target {
					t.Errorf("delay over target %.1f%% of the time, p99 %v; want <= 10%%, <= %v", 100*over, p99, 2*target)
				}
				if u < 0.85 {
					t.Errorf("utilisation %.3f, want >= 0.85", u)
				}
			})
		}
	}
}

// stalled capacity: no capacity in either direction (and so no replies)
// over the windows given.
func withStalls(c capFunc, win ...time.Duration) capFunc {
	return func(t time.Duration) float64 {
		for i := 0; i+1 < len(win); i += 2 {
			if t >= win[i] && t < win[i+1] {
				return 0
			}
		}
		return c(t)
	}
}

// TestStall: no capacity and no replies for 2 s and 15 s. The rate is held
// (not cut to the minimum, not cut at all); after the stall, the greedy
// sender has left the modem's FIFO full (4 MB, 800 ms at 40 Mbit/s). No
// controller can see that before the first reply comes back through it
// (~0.85 s), and the deepest cut one decision allows (x0.25) drains it at
// 0.75 s/s (~1.1 s): so the delay is back under target within 2.5 s, not
// the 1 s of a capacity step, and the rate back at 90 % within 5 s.
func TestStall(t *testing.T) {
	for _, d := range dirs {
		for _, length := range []time.Duration{2 * sec, 15 * sec} {
			for _, tk := range ticks {
				t.Run(d.String()+"/"+length.String()+"/"+tk.String(), func(t *testing.T) {
					win := []time.Duration{step, step + length}
					s := link(d, withStalls(constant(40*mbit), win...), udpReflectors(4), tk)
					s.stallS = win
					// the other direction stalls too
					s.dir[1-d].capacity = withStalls(s.dir[1-d].capacity, win...)
					s.run(step + length + 20*sec)
					before := s.window(step-10*ms, step)[0].rate[d]
					minIn := math.Inf(1)
					for _, r := range s.window(step, step+length) {
						minIn = math.Min(minIn, r.rate[d])
					}
					end := step + length
					rec := s.recovery(d, end, 5*sec, target)
					reach := s.reach(d, end+rec, 10*sec, 0.9) + rec
					over, p99 := s.overShare(d, end+3*sec, end+20*sec, target)
					t.Logf("rate before %.2f Mbit/s, lowest during the stall %.2f; after: delay back under target in %v, 90%% of capacity in %v, then over target %.1f%%, p99 %v",
						before/mbit, minIn/mbit, rec, reach, 100*over, p99.Round(100*time.Microsecond))
					if minIn < 0.95*before {
						t.Errorf("rate fell to %.2f Mbit/s during the stall from %.2f: a stall must hold the rate", minIn/mbit, before/mbit)
					}
					if rec > 2500*ms || reach > 5*sec || !s.sawStall {
						t.Errorf("after the stall: delay under target after %v (want <= 2.5s), 90%% of capacity after %v (want <= 5s); controller said stall: %v", rec, reach, s.sawStall)
					}
					if over > 0.10 || p99 > 2*target {
						t.Errorf("from 3 s after the stall delay over target %.1f%% of the time, p99 %v; want <= 10%%, <= %v", 100*over, p99, 2*target)
					}
				})
			}
		}
	}
}
