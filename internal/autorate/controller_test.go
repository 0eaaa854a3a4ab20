package autorate_test

import (
	"flag"
	"fmt"
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
	return linkFrom(dir, 20*mbit, capacity, refl, tick)
}

// linkFrom is link with the loaded direction's base rate (where it starts
// and drifts back to) base.
func linkFrom(dir autorate.Dir, base float64, capacity capFunc, refl []simRefl, tick time.Duration) *sim {
	dc := autorate.DirConfig{Min: 1 * mbit, Base: 20 * mbit, Max: 100 * mbit}
	ldc := dc
	ldc.Base = uint64(base)
	down, up := dc, dc
	if dir == autorate.Down {
		down = ldc
	} else {
		up = ldc
	}
	cfg := autorate.DefaultConfig(down, up, nil)
	loaded := &simDir{capacity: capacity, demand: greedy(), fifoLimit: 4e6}
	other := &simDir{capacity: constant(20 * mbit), demand: constant(0.5 * mbit), fifoLimit: 4e6}
	sd, su := other, loaded
	loaded.modemLast, other.modemLast = false, true
	if dir == autorate.Down {
		loaded.modemLast, other.modemLast = true, false
		sd, su = loaded, other
	}
	return newSim(cfg, refl, sd, su, tick)
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

// TestStepDownQuarter: the download's capacity falls to a quarter (8 to 2
// Mbit/s from 7.2, the VM lab's step) at each 10 ms of the 100 ms tick,
// with two reflectors (one-way UDP and ICMP) probed at the tick, as the
// daemon does, and every other tick 3 ms late (the next 3 ms early). The sender is greedy at our rate, so the modem's queue
// grows 2.6 ms a millisecond until the cut, and its drain is bounded by
// the minimum rate (1 Mbit/s): how late the first cut comes decides the
// rest. Without the probes in flight (Input.Waiting) the cut waited for
// replies that the queue held back, and its timing moved with the step's
// phase: back under target 0.70-3.41 s after, the queue's peak 0.33-1.49
// s; with them 0.70-1.32 s and 0.33-0.60 s.
func TestStepDownQuarter(t *testing.T) {
	for k := range 10 {
		at := step + time.Duration(k)*10*ms
		t.Run(fmt.Sprint(k*10, "ms"), func(t *testing.T) {
			capf := steps([]time.Duration{0, at}, []float64{8 * mbit, 2 * mbit})
			s := linkFrom(autorate.Down, 7.2*mbit, capf, append(udpReflectors(1), icmpReflectors(1, false)...), 100*ms)
			for i := range s.refl {
				s.refl[i].next = 0 // at the tick
			}
			s.lateTick = 3 * ms
			s.run(at + 5*sec)
			rec := s.recovery(autorate.Down, at, 5*sec, target)
			var peak time.Duration
			for _, r := range s.window(at, at+5*sec) {
				peak = max(peak, r.delay[autorate.Down])
			}
			t.Logf("back under target %v after the step, the queue's peak %v", rec, peak.Round(ms))
			if rec > 1400*ms || peak > 700*ms {
				t.Errorf("back under target %v after the capacity fell to a quarter, the queue's peak %v; want <= 1.4 s, 700 ms", rec, peak.Round(ms))
			}
		})
	}
}

// TestIncreaseEachLateTick: with every other tick 3 ms late and the next
// one 3 ms early (a ticker keeps its phase), a climb still raises the
// rate at every 100 ms tick. Held to the exact IncreaseEvery, the early
// ticks were refused and the climb went at half its speed.
func TestIncreaseEachLateTick(t *testing.T) {
	s := linkFrom(autorate.Down, 2*mbit, constant(40*mbit), udpReflectors(2), 100*ms)
	s.lateTick = 3 * ms
	s.run(3 * sec)
	rises := 0
	recs := s.window(1500*ms, 2500*ms)
	for i := 1; i < len(recs); i++ {
		if recs[i].rate[autorate.Down] > recs[i-1].rate[autorate.Down] {
			rises++
		}
	}
	if rises < 9 {
		t.Errorf("%d rises in the second from 1.5 s of a climb, want one a tick (10)", rises)
	}
}

// stepUpChecks runs s (a capacity step up at step; with pktWait, probes
// wait for sqm's own packet) and checks the targets: 90 % of the
// new capacity within 5 s, and the delay over target at most 10 % of the
// 20 s after.
func stepUpChecks(t *testing.T, s *sim, d autorate.Dir, pktWait bool) {
	t.Helper()
	s.pktWait = pktWait
	s.run(step + 20*sec)
	reach := s.reach(d, step, 10*sec, 0.9)
	over, p99 := s.overShare(d, step, step+20*sec, target)
	t.Logf("rate %.2f Mbit/s before; 90%% of the new capacity after %v; over target %.1f%%, p99 %v",
		s.window(step-10*ms, step)[0].rate[d]/mbit, reach, 100*over, p99.Round(100*time.Microsecond))
	if limit := 5 * sec; reach > limit {
		t.Errorf("rate at 90%% of the new capacity after %v, want <= %v", reach, limit)
	}
	if over > 0.10 {
		t.Errorf("delay over target %.1f%% of the time after the step, want <= 10%%", 100*over)
	}
}

func TestStepUp(t *testing.T) {
	for _, d := range dirs {
		for _, tk := range ticks {
			for _, from := range []float64{20 * mbit, 10 * mbit} {
				name := d.String() + "/" + tk.String() + "/from" + strconv.Itoa(int(from/mbit))
				t.Run(name, func(t *testing.T) {
					stepUpChecks(t, link(d, steps([]time.Duration{0, step}, []float64{from, 40 * mbit}), udpReflectors(4), tk), d, false)
				})
			}
		}
	}
}

// TestStepUpLowRate: the capacity doubles from a low rate, where the
// wait for the full-size packet in sqm's own shaper (6 ms at 2 Mbit/s, the
// simulation's probes wait a uniform part of it) is a large part of the
// target: the rate still reaches 90 % of the new capacity within 5 s.
// Over 200 seeds it did within 4.2 s in every case, and the share over
// target passed 10 % in 3 of the 3,600 runs (10.3-11.5 %, upload, 200 ms
// ticks): no margin to run it in TestSeeds.
func TestStepUpLowRate(t *testing.T) {
	for _, d := range dirs {
		for _, tk := range ticks {
			for _, from := range []float64{1.5 * mbit, 2 * mbit, 3 * mbit} {
				name := d.String() + "/" + tk.String() + "/from" + strconv.FormatFloat(from/mbit, 'g', -1, 64)
				t.Run(name, func(t *testing.T) {
					// from 90 % of the first capacity, as sqm's defaults shape a line
					stepUpChecks(t, linkFrom(d, 0.9*from, steps([]time.Duration{0, step}, []float64{from, 2 * from}), udpReflectors(4), tk), d, true)
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
					// The link may stall with a queue growing (the rate
					// probing just above the capacity): the replies already
					// on their way show it, and one early cut for it is
					// right (a few percent: the queue is a third of the
					// target, the slope a few percent). What a stall must
					// not bring is a cut for the replies that stop coming.
					if s.stallMoved {
						t.Errorf("a tick that said stall changed the rate")
					}
					if minIn < 0.9*before {
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

// TestStallAfterCut: a stall that begins a tick after a cut, with a
// probe sent between them still on its way. Its reply is a reply to a
// probe sent since the cut, and the stall's first tick has the shaper's
// count falling to nothing: that read as the capacity and cut the rate to
// a quarter (the largest cut) in 5 of 100 seeds, where a stall must hold
// it. The packet wait's noise is what times probes that way here; 100
// seeds of the 2 s stall, download, 50 ms ticks.
func TestStallAfterCut(t *testing.T) {
	defer func(s uint64) { simSeed = s }(simSeed)
	bad := 0
	for seed := uint64(2); seed < 102; seed++ {
		simSeed = seed
		win := []time.Duration{step, step + 2*sec}
		s := link(autorate.Down, withStalls(constant(40*mbit), win...), udpReflectors(4), 50*ms)
		s.stallS, s.pktWait = win, true
		s.dir[autorate.Up].capacity = withStalls(s.dir[autorate.Up].capacity, win...)
		s.run(step + 4*sec)
		before := s.window(step-10*ms, step)[0].rate[autorate.Down]
		for _, r := range s.window(step, step+2*sec) {
			if r.rate[autorate.Down] < 0.9*before {
				t.Errorf("seed %d: rate fell to %.2f Mbit/s at %v from %.2f: a stall must hold the rate", seed, r.rate[autorate.Down]/mbit, r.t, before/mbit)
				bad++
				break
			}
		}
	}
	if bad > 0 {
		t.Errorf("%d of 100 seeds cut in the stall", bad)
	}
}

// TestHiccups: the host that runs the prober stops for 50 ms now and then
// (twice a second here, adding up to hiccupMax to every probe sent in it,
// whatever the reflector): no statistic across reflectors can vote that
// noise out, and the controller must not read it as a queue and ratchet
// the rate down. The VM lab's runs did (cuts of 20 % at rises of 5-12 ms
// that its ground truth did not see, down to 3 of 8 Mbit/s), with one
// reflector host: one UDP slot and one ICMP slot, the second case. Two UDP
// reflectors probed 50 ms apart are not hit together, and their lower
// median holds: over 200 seeds x both directions x three ticks,
// utilisation 0.896-0.993 (0.989 the median). A lone reflector now needs
// two probes in a row to confirm a rise below the target (qc): over the
// same 1,200 runs with 20 ms hiccups its utilisation went from 0.320-0.984
// (310 runs under 0.85) to 0.742-0.988 (26 under 0.85; 0.936 the median).
// That is not yet good enough for TestSeeds: hiccups over the target
// still cut at once.
func TestHiccups(t *testing.T) {
	for _, c := range []struct {
		name string
		refl []simRefl
		max  time.Duration
	}{
		{"two-udp", udpReflectors(2), 40 * ms},
		{"one-udp+icmp", append(udpReflectors(1), icmpReflectors(1, false)...), 20 * ms},
	} {
		for _, d := range dirs {
			for _, tk := range ticks {
				t.Run(c.name+"/"+d.String()+"/"+tk.String(), func(t *testing.T) {
					s := linkFrom(d, 7.2*mbit, constant(8*mbit), append([]simRefl(nil), c.refl...), tk)
					s.pktWait = true
					s.hiccupEvery, s.hiccupMax = 500*ms, c.max
					s.run(40 * sec)
					u := s.utilisation(d, 10*sec, 40*sec)
					over, p99 := s.overShare(d, 10*sec, 40*sec, target)
					t.Logf("utilisation %.3f, over target %.1f%%, p99 %v", u, 100*over, p99.Round(100*time.Microsecond))
					if u < 0.85 || over > 0.10 {
						t.Errorf("utilisation %.3f, delay over target %.1f%% of the time; want >= 0.85, <= 10%%", u, 100*over)
					}
				})
			}
		}
	}
}

// TestLyingReflector: one of four reflectors adds a constant 40 ms (its
// baseline absorbs it), or a random 0..60 ms to every reply (it disagrees
// with the others and is reported for replacement). The statistic across
// reflectors must not move: the step targets hold as with honest ones.
func TestLyingReflector(t *testing.T) {
	cases := []struct {
		name  string
		lie   func(*simRefl)
		flag  bool // the liar must be reported
		count int
	}{
		{"constant", func(r *simRefl) { r.lieConst = 40 * ms }, false, 4},
		{"random", func(r *simRefl) { r.lieRand = 60 * ms }, true, 4},
		{"random-of-3", func(r *simRefl) { r.lieRand = 60 * ms }, true, 3},
	}
	for _, c := range cases {
		for _, d := range dirs {
			t.Run(c.name+"/"+d.String(), func(t *testing.T) {
				refl := udpReflectors(c.count)
				c.lie(&refl[1])
				s := link(d, down20, refl, 100*ms)
				stepDownChecks(t, s, d)
				flagged := false
				for _, r := range s.out.Replace {
					if r.Slot == 1 && r.Why == autorate.WhyDisagrees {
						flagged = true
					} else {
						t.Errorf("reflector %d reported (%v), only 1 lies", r.Slot, r.Why)
					}
				}
				if flagged != c.flag {
					t.Errorf("liar reported for replacement: %v, want %v", flagged, c.flag)
				}
			})
		}
	}
}

// TestICMPDeprioritised: the ISP gives ICMP its own queue ahead of the
// modem's FIFO, so ICMP replies never show the queue. With two UDP
// reflectors besides three ICMP ones the target holds; with ICMP only it
// cannot (the control case: it shows the emulation hides the queue).
func TestICMPDeprioritised(t *testing.T) {
	for _, d := range dirs {
		t.Run("udp+icmp/"+d.String(), func(t *testing.T) {
			refl := append(icmpReflectors(3, true), udpReflectors(2)...)
			stepDownChecks(t, link(d, down20, refl, 100*ms), d)
		})
		t.Run("one-udp+icmp/"+d.String(), func(t *testing.T) {
			// a single UDP reflector, quiet, speaks for its kind
			refl := append(icmpReflectors(3, true), udpReflectors(1)...)
			stepDownChecks(t, link(d, down20, refl, 100*ms), d)
		})
		t.Run("one-udp-jittery-under-load+icmp/"+d.String(), func(t *testing.T) {
			// a single UDP reflector beside one deprioritised ICMP one
			// (the lab's: one reflector host), quiet while the link is
			// idle for its first 5 s, 0-6 ms more jitter each way under
			// load: its idle jitter lets it speak for its kind. Judged
			// by its jitter over all samples (before 2026-12-03) it did
			// not, and the queue stayed hidden: over target 62-100 % of
			// the time after the step, p99 1.6 s. (With 10 ms or more of
			// such jitter no one reflector can hold a 15 ms target: the
			// rate collapses instead, utilisation 0.2-0.6.)
			refl := append(icmpReflectors(1, true), udpReflectors(1)...)
			refl[1].loadJitter = 6 * ms
			s := link(d, down20, refl, 100*ms)
			loaded := s.dir[d]
			greedy := loaded.demand
			loaded.demand = func(t time.Duration) float64 {
				if t < 5*sec {
					return 0
				}
				return greedy(t)
			}
			s.run(step + 20*sec)
			rec := s.recovery(d, step, 5*sec, target)
			over, p99 := s.overShare(d, step+1*sec, step+20*sec, target)
			u := s.utilisation(d, step+1*sec, step+20*sec)
			t.Logf("step: back under target after %v; after: over target %.1f%%, p99 %v, utilisation %.3f", rec, 100*over, p99.Round(ms), u)
			if rec > sec || over > 0.10 {
				t.Errorf("back under target after %v, over target %.1f%% of the time after: want <= 1s and <= 10%% (the UDP reflector's queue was not seen)", rec, 100*over)
			}
			if u < 0.85 {
				t.Errorf("utilisation %.3f after the step, want >= 0.85 (the UDP reflector's jitter taken for a queue)", u)
			}
		})
		t.Run("lone-udp-liar+icmp/"+d.String(), func(t *testing.T) {
			// a single UDP reflector that lies (random) does not: the
			// honest ICMP round trips decide
			refl := append(icmpReflectors(3, false), udpReflectors(1)...)
			refl[3].lieRand = 60 * ms
			stepDownChecks(t, link(d, down20, refl, 100*ms), d)
		})
		t.Run("icmp-only-rtt/"+d.String(), func(t *testing.T) {
			// round trips through the queue (not deprioritised) work too
			stepDownChecks(t, link(d, down20, icmpReflectors(3, false), 100*ms), d)
		})
		t.Run("icmp-only-deprioritised/"+d.String(), func(t *testing.T) {
			s := link(d, down20, icmpReflectors(3, true), 100*ms)
			s.run(step + 20*sec)
			over, p99 := s.overShare(d, step, step+20*sec, target)
			t.Logf("ICMP only, deprioritised: over target %.1f%% of the time, p99 %v", 100*over, p99.Round(ms))
			if over < 0.5 {
				t.Errorf("with only deprioritised ICMP reflectors the delay was over target only %.1f%% of the time: the emulation does not hide the queue", 100*over)
			}
		})
	}
}

// TestIdle: after 30 s of load on an 80 Mbit/s link (base 20) the load
// stops (idle) or drops to 5 Mbit/s (light). The rate never rises again,
// drifts back to base, and only the idle link tells the probe layer to slow
// down, IdleAfter (10 s) after the load stopped.
func TestIdle(t *testing.T) {
	const loadEnd = 30 * sec
	for _, light := range []float64{0, 5 * mbit} {
		for _, d := range dirs {
			name := "idle/" + d.String()
			if light > 0 {
				name = "light/" + d.String()
			}
			t.Run(name, func(t *testing.T) {
				s := link(d, constant(80*mbit), udpReflectors(4), 100*ms)
				s.dir[d].demand = steps([]time.Duration{0, loadEnd}, []float64{math.Inf(1), light})
				s.dir[1-d].demand = steps([]time.Duration{0, loadEnd}, []float64{0.5 * mbit, 0})
				s.run(loadEnd + 150*sec)
				// the load measure spans 200 ms: from then on no increase
				w := s.window(loadEnd+300*ms, loadEnd+150*sec)
				peak := w[0].rate[d]
				for i := 1; i < len(w); i++ {
					if w[i].rate[d] > w[i-1].rate[d] {
						t.Fatalf("rate rose from %.2f to %.2f Mbit/s at %v with the load gone", w[i-1].rate[d]/mbit, w[i].rate[d]/mbit, w[i].t)
					}
				}
				base := float64(s.ctrl.Config().Dir[d].Base)
				end := w[len(w)-1].rate[d]
				slowed := "never"
				if s.idleAt >= 0 {
					slowed = (s.idleAt - loadEnd).String() + " after the load"
				}
				t.Logf("rate at the end of the load %.2f Mbit/s, 150 s later %.2f (base %.2f); probes slowed: %s", peak/mbit, end/mbit, base/mbit, slowed)
				if peak < 0.9*80*mbit {
					t.Errorf("rate under load reached only %.2f Mbit/s of 80", peak/mbit)
				}
				if math.Abs(end-base) > 0.01*base {
					t.Errorf("rate %.2f Mbit/s 150 s after the load, want base %.2f within 1%%", end/mbit, base/mbit)
				}
				switch {
				case light > 0 && s.idleAt >= 0:
					t.Errorf("probing slowed at %v with 5 Mbit/s still flowing", s.idleAt)
				case light == 0 && (s.idleAt < loadEnd+s.ctrl.Config().IdleAfter || s.idleAt > loadEnd+s.ctrl.Config().IdleAfter+sec):
					t.Errorf("probing slowed %v after the load stopped, want IdleAfter (%v) to a second more", s.idleAt-loadEnd, s.ctrl.Config().IdleAfter)
				}
			})
		}
	}
}

// TestIdleFromStart: a controller started on an idle link slows the
// probes once each reflector has had startProbes (1 s at 100 ms), not
// IdleAfter later, and a load that starts after 5 s of that on a link at
// half the base rate has the delay under target within 1.5 s
// (TestLoadStart's bound, where light traffic kept the probes fast). The
// sim ticks at 100 ms throughout; the daemon's 1 s idle tick adds up to a
// second before the load is seen (TestRunIdleTicks in autorun).
func TestIdleFromStart(t *testing.T) {
	const loadAt = 5 * sec
	for _, d := range dirs {
		t.Run(d.String(), func(t *testing.T) {
			s := linkFrom(d, 20*mbit, constant(10*mbit), udpReflectors(4), 100*ms)
			s.dir[d].demand = steps([]time.Duration{0, loadAt}, []float64{0, math.Inf(1)})
			s.dir[1-d].demand = constant(0)
			s.run(loadAt + 10*sec)
			rec := s.recovery(d, loadAt, 5*sec, target)
			t.Logf("probes slowed at %v; under target %v after the load began", s.idleAt, rec)
			if s.idleAt < sec || s.idleAt > sec+200*ms {
				t.Errorf("probes slowed at %v, want 1 s after the start (ten probes each), to 200 ms more", s.idleAt)
			}
			if rec > 1500*ms {
				t.Errorf("delay back under target %v after the load began, want <= 1.5s", rec)
			}
		})
	}
}

// TestReload: a load on a 40 Mbit/s link (base 20) that settled at the
// capacity, light for 60 s (the rate drifts back to base), then greedy
// again: the rate is back at 90 % of the capacity as fast as from a fresh
// start (TestStepUp's from20: about 2 s), whatever the first load left in
// memory (failures, rates that held, a failure it went past).
func TestReload(t *testing.T) {
	const again = 120 * sec
	for _, d := range dirs {
		t.Run(d.String(), func(t *testing.T) {
			s := link(d, constant(40*mbit), udpReflectors(4), 100*ms)
			s.dir[d].demand = steps([]time.Duration{0, 30 * sec, again}, []float64{math.Inf(1), 0.5 * mbit, math.Inf(1)})
			s.run(again + 10*sec)
			before := s.window(again-10*ms, again)[0].rate[d]
			reach := s.reach(d, again, 10*sec, 0.9)
			t.Logf("rate %.2f Mbit/s when the load came back; 90 %% of the capacity %v later", before/mbit, reach)
			if reach > 3*sec {
				t.Errorf("90 %% of the capacity %v after the load came back, want <= 3s", reach)
			}
		})
	}
}

// TestNoReply: a reflector that never answers is reported while the others
// answer; during a stall (nobody answers) nobody is.
func TestNoReply(t *testing.T) {
	refl := udpReflectors(4)
	refl[2].dead = true
	win := []time.Duration{20 * sec, 35 * sec}
	s := link(autorate.Down, withStalls(constant(40*mbit), win...), refl, 100*ms)
	s.dir[1].capacity = withStalls(s.dir[1].capacity, win...)
	s.stallS = win
	s.run(19 * sec)
	if len(s.out.Replace) != 1 || s.out.Replace[0] != (autorate.Replacement{Slot: 2, Why: autorate.WhyNoReply}) {
		t.Fatalf("replace %v, want slot 2 (no reply)", s.out.Replace)
	}
	s.ctrl.Replace(2, autorate.KindUDP) // the probe layer swapped it
	s.refl[2].dead = false
	s.run(25 * sec)
	if len(s.out.Replace) != 0 {
		t.Errorf("during a stall: replace %v, want none", s.out.Replace)
	}
	s.run(45 * sec)
	if len(s.out.Replace) != 0 {
		t.Errorf("after the stall: replace %v, want none", s.out.Replace)
	}
}

// TestJitter: every probe's one-way delays jitter by 0..jit each way (a
// busy radio link). The controller must not collapse or cut without a
// queue, and still meet the step targets.
func TestJitter(t *testing.T) {
	for _, jit := range []time.Duration{2 * ms, 5 * ms, 10 * ms} {
		for _, d := range dirs {
			t.Run(jit.String()+"/"+d.String(), func(t *testing.T) {
				refl := udpReflectors(4)
				for i := range refl {
					refl[i].jitter = jit
				}
				s := link(d, down20, refl, 100*ms)
				stepDownChecks(t, s, d)
				if len(s.out.Replace) != 0 {
					t.Errorf("replace %v: jitter shared by all is not a reflector's fault", s.out.Replace)
				}
			})
		}
	}
}

// TestBothDirections: both directions loaded, one-way reflectors: the
// upload's capacity halves, the download's does not move. The upload meets
// the step target; the download is not cut for the upload's queue.
func TestBothDirections(t *testing.T) {
	s := link(autorate.Up, down20, udpReflectors(4), 100*ms)
	s.dir[autorate.Down].capacity = constant(40 * mbit)
	s.dir[autorate.Down].demand = greedy()
	stepDownChecks(t, s, autorate.Up)
	u := s.utilisation(autorate.Down, step, step+20*sec)
	over, p99 := s.overShare(autorate.Down, step, step+20*sec, target)
	t.Logf("download meanwhile: utilisation %.3f, over target %.1f%%, p99 %v", u, 100*over, p99.Round(100*time.Microsecond))
	if u < 0.9 || over > 0.10 {
		t.Errorf("download utilisation %.3f, over target %.1f%% while the upload's capacity moved; want >= 0.9, <= 10%%", u, 100*over)
	}
}

// simSeeds is how many seeds TestSeeds runs the randomised tests with
// beyond the first (which the tests themselves use).
var simSeeds = flag.Int("sim.seeds", 8, "TestSeeds: run the randomised simulations with this many more seeds")

// TestSeeds runs the tests whose simulation draws random numbers (probe
// losses at a full FIFO, jitter, a lying reflector) again with other seeds:
// one lucky seed must not be what makes a controller pass. The controller
// is deterministic, so a failing seed reproduces with -run
// 'TestSeeds/seed=N/'.
func TestSeeds(t *testing.T) {
	tests := []struct {
		name string
		f    func(*testing.T)
	}{
		{"StepDown", TestStepDown}, {"StepUp", TestStepUp}, {"Ramp", TestRamp}, {"Stall", TestStall},
		{"LyingReflector", TestLyingReflector}, {"ICMPDeprioritised", TestICMPDeprioritised},
		{"Jitter", TestJitter}, {"BothDirections", TestBothDirections}, {"Reload", TestReload},
	}
	defer func(s uint64) { simSeed = s }(simSeed)
	for seed := uint64(2); seed < uint64(2+*simSeeds); seed++ {
		simSeed = seed
		t.Run("seed="+strconv.FormatUint(seed, 10), func(t *testing.T) {
			for _, tc := range tests {
				t.Run(tc.name, tc.f)
			}
		})
	}
}

// loadAt is when loadAfterQuiet's load begins: after a quiet minute, in
// which the rate drifted back to the base.
const loadAt = 60 * sec

// quietThenLoad is d on a link of constant capacity, from base, with 0.5
// Mbit/s of traffic until loadAt and a greedy load from then; not run yet.
func quietThenLoad(d autorate.Dir, base, capacity float64, tk time.Duration) *sim {
	s := linkFrom(d, base, constant(capacity), udpReflectors(4), tk)
	s.dir[d].demand = steps([]time.Duration{0, loadAt}, []float64{0.5 * mbit, math.Inf(1)})
	return s
}

// loadAfterQuiet runs quietThenLoad from link's base until loadAt+after.
func loadAfterQuiet(d autorate.Dir, capacity float64, tk, after time.Duration) *sim {
	s := quietThenLoad(d, 20*mbit, capacity, tk)
	s.run(loadAt + after)
	return s
}

// TestLoadStart: a load begins after a quiet minute on a link whose
// capacity (10 Mbit/s) is half the base rate (the rate drifted back to the
// base while quiet): the delay is under target within 1.5 s, and the rate
// then holds near the capacity. The download's shaper sees the bottleneck
// below it at once; the upload's is judged by the probes' slopes.
func TestLoadStart(t *testing.T) {
	for _, d := range dirs {
		for _, tk := range ticks {
			t.Run(d.String()+"/"+tk.String(), func(t *testing.T) {
				s := loadAfterQuiet(d, 10*mbit, tk, 20*sec)
				rec := s.recovery(d, loadAt, 5*sec, target)
				over, p99 := s.overShare(d, loadAt+2*sec, loadAt+20*sec, target)
				u := s.utilisation(d, loadAt+2*sec, loadAt+20*sec)
				t.Logf("under target %v after the load began; then over target %.1f%%, p99 %v, utilisation %.3f", rec, 100*over, p99.Round(100*time.Microsecond), u)
				if rec > 1500*ms {
					t.Errorf("delay back under target %v after the load began, want <= 1.5s", rec)
				}
				if over > 0.10 || u < 0.85 {
					t.Errorf("after: over target %.1f%%, utilisation %.3f; want <= 10%%, >= 0.85", 100*over, u)
				}
			})
		}
	}
}

// TestSettleBeforeProbing: a load begins after a quiet minute on a link
// with twice the base rate's capacity. In its first second the rate is not
// raised (loadSettle: the senders' slow start is still coming, and in the
// VM probing up then overshot into it); it still reaches 90 % of the
// capacity within 3 s.
func TestSettleBeforeProbing(t *testing.T) {
	for _, d := range dirs {
		for _, tk := range ticks {
			t.Run(d.String()+"/"+tk.String(), func(t *testing.T) {
				s := loadAfterQuiet(d, 40*mbit, tk, 10*sec)
				before := s.window(loadAt-10*ms, loadAt)[0].rate[d]
				var most float64
				for _, r := range s.window(loadAt, loadAt+900*ms) {
					most = math.Max(most, r.rate[d])
				}
				reach := s.reach(d, loadAt, 10*sec, 0.9)
				t.Logf("rate %.2f Mbit/s at the load's start, at most %.2f in its first 0.9 s; 90 %% of the capacity after %v", before/mbit, most/mbit, reach)
				if most > before {
					t.Errorf("rate raised to %.2f Mbit/s within 0.9 s of the load's start (from %.2f)", most/mbit, before/mbit)
				}
				if reach > 3*sec {
					t.Errorf("90 %% of the capacity %v after the load began, want <= 3s", reach)
				}
			})
		}
	}
}

// TestLoadStartBurst: a load begins after a quiet minute on a link at the
// base rate's capacity (the base 90 % of it, as sqm's defaults shape a
// line), and the download's senders start with a burst at the server's
// line rate (TCP's slow start) that fills the modem's FIFO for a moment.
// The queue is the burst's, not a capacity below the rate: the cut drains
// it from the rate (not below 70 % of the capacity; the probes' slopes,
// which assume a queue fed at our rate, read the VM's 8 Mbit/s as 4.8-5.8
// and cut to 4.9 here), the delay is under target within 1 s, and the
// rate is back at 90 % of the capacity within 2.5 s of the load's start
// (remembered as a failed rate, the cut's careful band made that 3.2 s
// here, and held the VM's 8 Mbit/s step at 6.3-6.7 for 2 s).
func TestLoadStartBurst(t *testing.T) {
	for _, tk := range ticks {
		t.Run(tk.String(), func(t *testing.T) {
			const c = 8 * mbit
			s := quietThenLoad(autorate.Down, 0.9*c, c, tk)
			s.dir[autorate.Down].burst = steps([]time.Duration{0, loadAt, loadAt + 100*ms}, []float64{0, c, 0})
			s.run(loadAt + 10*sec)
			low, cut := math.Inf(1), time.Duration(0)
			for _, r := range s.window(loadAt, loadAt+2*sec) {
				if r.rate[autorate.Down] < low {
					low, cut = r.rate[autorate.Down], r.t
				}
			}
			back := s.reach(autorate.Down, cut, 10*sec, 0.9)
			rec := s.recovery(autorate.Down, loadAt, 5*sec, target)
			over, p99 := s.overShare(autorate.Down, loadAt+3*sec, loadAt+10*sec, target)
			t.Logf("delay under target %v after the load began; cut to %.2f Mbit/s after %v; back at 90 %% %v after the cut; then over target %.1f%%, p99 %v",
				rec, low/mbit, cut-loadAt, back, 100*over, p99.Round(100*time.Microsecond))
			if low >= 0.9*c {
				t.Fatalf("no cut at the burst (lowest rate %.2f Mbit/s): the test tests nothing", low/mbit)
			}
			if low < 0.7*c {
				t.Errorf("cut to %.2f Mbit/s at the burst, want at least 70 %% of the %.0f Mbit/s capacity", low/mbit, c/mbit)
			}
			if rec > sec {
				t.Errorf("delay back under target %v after the load began, want <= 1s", rec)
			}
			if cut-loadAt+back > 2500*ms {
				t.Errorf("rate back at 90 %% of the capacity %v after the load began, want <= 2.5s", cut-loadAt+back)
			}
			if over > 0.10 {
				t.Errorf("delay over target %.1f%% of the time after, want <= 10%%", 100*over)
			}
		})
	}
}

// TestStaleFailure: a burst of the download's senders (TCP's slow start,
// bunched acks: 40 ms into the modem's FIFO at 2 Mbit/s) cuts the rate a
// second before the capacity goes from 2 to 8 Mbit/s, and the cut
// remembers a failed rate under the old capacity. After the step, the
// download's shaper full at its rate with the delay calm shows that rate
// stale: the climb does not crawl through the careful band around it
// (from the failed rate to 1.15 times it within 700 ms, where the crawl
// takes over a second; in the VM the crawl cost up to 2 s of the 5 s the
// step up has).
func TestStaleFailure(t *testing.T) {
	for _, tk := range ticks {
		t.Run(tk.String(), func(t *testing.T) {
			s := linkFrom(autorate.Down, 1.8*mbit, steps([]time.Duration{0, step}, []float64{2 * mbit, 8 * mbit}), udpReflectors(4), tk)
			s.pktWait = true
			s.dir[autorate.Down].burst = steps([]time.Duration{0, step - sec, step - sec + 40*ms}, []float64{0, 2 * mbit, 0})
			s.dir[autorate.Down].overfill = 0.05
			s.run(step)
			var st autorate.Status
			s.ctrl.Status(&st)
			f := float64(st.Dir[autorate.Down].Failed)
			if f == 0 {
				t.Fatal("no failed rate remembered at the step: the test tests nothing")
			}
			s.run(step + 10*sec)
			at, past := time.Duration(-1), time.Duration(-1)
			for _, r := range s.window(step, step+10*sec) {
				if at < 0 && r.rate[autorate.Down] >= f {
					at = r.t
				}
				if past < 0 && r.rate[autorate.Down] >= 1.15*f {
					past = r.t
				}
			}
			t.Logf("failed rate %.2f Mbit/s; reached %v after the step, 1.15 times it %v later", f/mbit, at-step, past-at)
			if at < 0 || past < 0 || past-at > 700*ms {
				t.Errorf("from the failed rate to 1.15 times it took %v, want <= 700ms", past-at)
			}
		})
	}
}

// TestLoadStartLongBurst: as TestLoadStartBurst, with the senders' start
// longer than the probes take to show it, so that the first cut sees its
// beginning only: a burst at the capacity for 200 ms, and a slow start
// doubling every 50 ms from a quarter of the capacity to twice it (the
// modem's queue up to 170-180 ms, as in the one failing run of
// TestVMTraceAutorate, where the first second averaged 74 ms and the p95
// went over its bound). The first cut counts the queue's growth since its
// probes (their slope), and a cut that probes sent after it show too
// shallow is deepened: the delay is under target within 1 s (1.12 s for
// both without either), and the rate is back at 90 % of the capacity
// within 2.5 s with utilisation over the first 3 s at least 85 %.
func TestLoadStartLongBurst(t *testing.T) {
	const c = 8 * mbit
	bursts := []struct {
		name string
		at   []time.Duration
		rate []float64
	}{
		{"flat", []time.Duration{0, loadAt, loadAt + 200*ms}, []float64{0, c, 0}},
		{"slow-start", []time.Duration{0, loadAt, loadAt + 50*ms, loadAt + 100*ms, loadAt + 150*ms, loadAt + 200*ms},
			[]float64{0, c / 4, c / 2, c, 2 * c, 0}},
	}
	for _, b := range bursts {
		for _, tk := range ticks {
			t.Run(b.name+"/"+tk.String(), func(t *testing.T) {
				s := quietThenLoad(autorate.Down, 0.9*c, c, tk)
				s.dir[autorate.Down].burst = steps(b.at, b.rate)
				s.run(loadAt + 10*sec)
				var most time.Duration
				low, cut := math.Inf(1), time.Duration(0)
				for _, r := range s.window(loadAt, loadAt+2*sec) {
					most = max(most, r.delay[autorate.Down])
					if r.rate[autorate.Down] < low {
						low, cut = r.rate[autorate.Down], r.t
					}
				}
				rec := s.recovery(autorate.Down, loadAt, 5*sec, target)
				back := cut - loadAt + s.reach(autorate.Down, cut, 10*sec, 0.9)
				u := s.utilisation(autorate.Down, loadAt, loadAt+3*sec)
				t.Logf("queue up to %v; under target %v after the load began; 90 %% of the capacity after %v; utilisation %.3f over 3 s",
					most.Round(ms), rec, back, u)
				if most < 150*ms {
					t.Fatalf("the burst queued only %v: the test tests nothing", most)
				}
				if rec > sec {
					t.Errorf("delay back under target %v after the load began, want <= 1s", rec)
				}
				if back > 2500*ms {
					t.Errorf("rate back at 90 %% of the capacity %v after the load began, want <= 2.5s", back)
				}
				if u < 0.85 {
					t.Errorf("utilisation %.3f over the load's first 3 s, want >= 0.85", u)
				}
			})
		}
	}
}
