// Package autorate is the controller that moves a shaper's rate with a link
// whose capacity moves (LTE/5G, Starlink, busy cable). It is pure logic: no
// I/O, no goroutines, no clock. The daemon feeds it, once per tick, the
// reflector replies, the shaper's byte counters and cake's statistics, with
// the time passed in; it answers with a rate per direction, the reason of the
// decision, and which reflectors the probe layer should replace. Keeping it
// pure is what lets the tests drive it with a simulated link, deterministic
// and fast, and keeps it small enough for the router build.
//
// The algorithm and the reasons for it are in docs/autorate.md.
package autorate

import (
	"errors"
	"strconv"
	"time"
)

// Dir names a direction: the index into the per-direction arrays.
type Dir int

const (
	Down Dir = 0 // from the internet to the LAN (ingress shaper)
	Up   Dir = 1 // from the LAN to the internet (egress shaper)
)

func (d Dir) String() string {
	if d == Down {
		return "download"
	}
	return "upload"
}

// DirConfig bounds one direction. Rates are bits per second.
type DirConfig struct {
	Min  uint64 // never below: the rate a stalled or lying link still gets
	Base uint64 // the start, and where a lightly loaded direction drifts back to
	Max  uint64 // never above: the line's sync rate or contract
	// Target is how far this direction's delay may rise over its baseline
	// before the rate is cut. Zero means DefaultTarget.
	Target time.Duration
	// Packet is a full-size packet's bytes on the wire (zero: 1514, an
	// Ethernet frame of MTU 1500): what a probe may wait for in sqm's own
	// shaper, one packet's time at the rate (see decide).
	Packet uint32
}

// targetPackets is how many full-size packet times at the current rate the
// delay target is at least (TargetAt).
const targetPackets = 3

// TargetAt is the delay target in force at rate (bits/s): Target, or
// targetPackets full-size packet times at that rate where that is longer.
// With nothing queued anywhere a probe still waits for the packet being
// sent in sqm's own shaper and the one in the modem, and, for a round
// trip, one on the way back: at 1.3 Mbit/s each is 9 ms, so a 15 ms
// target there reads packets as a queue, and each such cut (remembered as
// a failed rate) held the VM's 2 Mbit/s step at 1.1-1.3 Mbit/s. It is
// sqm-scripts' fq_codel target autotuning (no target below one MTU's
// serialisation) applied to the controller's own target. dc is a
// configuration after WithDefaults (Controller.Config's).
func (dc *DirConfig) TargetAt(rate uint64) time.Duration {
	if rate == 0 {
		return dc.Target
	}
	if p := time.Duration(targetPackets * uint64(dc.Packet) * 8 * uint64(time.Second) / rate); p > dc.Target {
		return p
	}
	return dc.Target
}

// Kind is how a reflector is probed. Reflectors of one kind share a fate
// (an ISP that prioritises or deprioritises ICMP does it to all of them), so
// the statistic across reflectors is taken per kind, then the worst kind wins.
type Kind uint8

const (
	KindICMP Kind = iota // echo or timestamp requests
	KindUDP              // sqm server, irtt, UDP echo
	KindTCP              // TCP connect or in-band probes
	numKinds
)

func (k Kind) String() string {
	switch k {
	case KindICMP:
		return "icmp"
	case KindUDP:
		return "udp"
	case KindTCP:
		return "tcp"
	}
	return "kind(" + strconv.Itoa(int(k)) + ")"
}

// Config is the controller's whole configuration. Zero fields take the
// defaults (WithDefaults); Validate says what is wrong, naming the field.
type Config struct {
	Dir [2]DirConfig // indexed by Down, Up

	// Reflectors gives each probe slot's kind; the probe layer sends the
	// slot number with every sample and calls Replace when it swaps the
	// reflector in a slot. At most MaxReflectors.
	Reflectors []Kind

	// ProbeInterval is the spacing of probes to one reflector while active,
	// IdleProbeInterval while both directions are idle (Output.ProbeIdle).
	// The controller uses them to know how old a sample may be. Idle
	// probes only keep the baselines and the reflectors' health current
	// (load is seen in the shaper's counters, and brings ProbeInterval
	// back at once), so they can be rare.
	ProbeInterval     time.Duration // default 100ms
	IdleProbeInterval time.Duration // default 10s

	// StallAfter: no reply from any reflector for this long (at least three
	// probe intervals) is a stall: rates are held, not cut.
	StallAfter time.Duration // default 1s
	// IdleAfter: both directions below IdleBelow for this long and the
	// probe layer is told to slow down. Load is seen in the shaper's
	// counters, not in the probes, so an idle link needs no fast probes
	// to wake up: 10 s rides over the pauses between a page's loads
	// (cake-autorate waits 60 s, and probes 20 times a second until then).
	IdleAfter time.Duration // default 10s
	IdleBelow uint64        // bits/s, default 100 kbit/s

	LoadHigh  float64 // utilisation above which a direction may probe up; default 0.75
	LoadLight float64 // utilisation below which it drifts to base; default 0.4

	IncreasePerSec  float64 // growth per second with the delay flat; default 0.5 (+50 %/s)
	CarefulPerSec   float64 // growth near a rate that recently failed; default 0.05
	DriftPerSec     float64 // fraction of the distance to base covered per second; default 0.05
	MaxIncreaseStep float64 // largest increase of one decision; default 0.1 (x1.1)
	MaxDecreaseStep float64 // largest decrease of one decision; default 0.75 (x0.25)
	IncreaseEvery   time.Duration
	DecreaseEvery   time.Duration
	// DrainTime is how fast a decrease aims to empty the queue it found:
	// the cut goes that much below the estimated capacity.
	DrainTime time.Duration // default 500ms
	// MemoryTTL is how long a failed or held rate is remembered.
	MemoryTTL time.Duration // default 30s
	// MinPerKind: a kind of reflector speaks for itself only with at least
	// this many fresh reflectors, or with one whose jitter has been low
	// (under a third of the target); otherwise it is pooled with the rest.
	MinPerKind int // default 2
}

const (
	DefaultTarget = 15 * time.Millisecond
	MaxReflectors = 32
	minRate       = 8000 // 8 kbit/s: below this cake and htb round to nothing
	defaultPacket = 1514 // an Ethernet frame of MTU 1500
)

// DefaultConfig is a configuration for the given per-direction bounds with
// every other field at its default.
func DefaultConfig(down, up DirConfig, reflectors []Kind) Config {
	c := Config{Dir: [2]DirConfig{down, up}, Reflectors: reflectors}
	return c.WithDefaults()
}

// WithDefaults returns c with its zero fields set to the defaults.
func (c Config) WithDefaults() Config {
	for d := range c.Dir {
		if c.Dir[d].Target == 0 {
			c.Dir[d].Target = DefaultTarget
		}
		if c.Dir[d].Packet == 0 {
			c.Dir[d].Packet = defaultPacket
		}
	}
	setDur(&c.ProbeInterval, 100*time.Millisecond)
	setDur(&c.IdleProbeInterval, 10*time.Second)
	setDur(&c.StallAfter, time.Second)
	setDur(&c.IdleAfter, 10*time.Second)
	setDur(&c.IncreaseEvery, 100*time.Millisecond)
	setDur(&c.DecreaseEvery, 100*time.Millisecond)
	setDur(&c.DrainTime, 500*time.Millisecond)
	setDur(&c.MemoryTTL, 30*time.Second)
	if c.IdleBelow == 0 {
		c.IdleBelow = 100000
	}
	setF(&c.LoadHigh, 0.75)
	setF(&c.LoadLight, 0.4)
	setF(&c.IncreasePerSec, 0.5)
	setF(&c.CarefulPerSec, 0.05)
	setF(&c.DriftPerSec, 0.05)
	setF(&c.MaxIncreaseStep, 0.1)
	setF(&c.MaxDecreaseStep, 0.75)
	if c.MinPerKind == 0 {
		c.MinPerKind = 2
	}
	return c
}

func setDur(p *time.Duration, v time.Duration) {
	if *p == 0 {
		*p = v
	}
}

func setF(p *float64, v float64) {
	if *p == 0 {
		*p = v
	}
}

// Validate checks a configuration after WithDefaults; the error names the
// field and says what is wrong with it.
func (c *Config) Validate() error {
	for d := range c.Dir {
		dc := &c.Dir[d]
		p := "autorate: " + Dir(d).String() + ": "
		switch {
		case dc.Min < minRate:
			return errors.New(p + "min rate " + bps(dc.Min) + " is below 8 kbit/s")
		case dc.Base < dc.Min:
			return errors.New(p + "base rate " + bps(dc.Base) + " is below the min rate " + bps(dc.Min))
		case dc.Max < dc.Base:
			return errors.New(p + "max rate " + bps(dc.Max) + " is below the base rate " + bps(dc.Base))
		case dc.Max > 1<<50:
			return errors.New(p + "max rate " + bps(dc.Max) + " is not a rate any link has")
		case dc.Target < time.Millisecond || dc.Target > 10*time.Second:
			return errors.New(p + "delay target " + dc.Target.String() + " is outside 1ms..10s")
		}
	}
	if len(c.Reflectors) == 0 {
		return errors.New("autorate: no reflectors: the controller needs at least one to see the delay")
	}
	if len(c.Reflectors) > MaxReflectors {
		return errors.New("autorate: " + strconv.Itoa(len(c.Reflectors)) + " reflectors; at most " + strconv.Itoa(MaxReflectors))
	}
	for i, k := range c.Reflectors {
		if k >= numKinds {
			return errors.New("autorate: reflector " + strconv.Itoa(i) + ": unknown kind " + k.String())
		}
	}
	durs := [...]struct {
		name string
		v    time.Duration
	}{
		{"probe interval", c.ProbeInterval}, {"idle probe interval", c.IdleProbeInterval},
		{"stall after", c.StallAfter}, {"idle after", c.IdleAfter},
		{"increase every", c.IncreaseEvery}, {"decrease every", c.DecreaseEvery},
		{"drain time", c.DrainTime}, {"memory ttl", c.MemoryTTL},
	}
	for _, d := range durs {
		if d.v <= 0 || d.v > time.Hour {
			return errors.New("autorate: " + d.name + " " + d.v.String() + " is outside 0..1h")
		}
	}
	if c.IdleProbeInterval < c.ProbeInterval {
		return errors.New("autorate: idle probe interval " + c.IdleProbeInterval.String() + " is shorter than the probe interval " + c.ProbeInterval.String())
	}
	fracs := [...]struct {
		name   string
		v, max float64
	}{
		{"load high", c.LoadHigh, 1}, {"load light", c.LoadLight, 1},
		{"increase per second", c.IncreasePerSec, 10}, {"careful per second", c.CarefulPerSec, 10},
		{"drift per second", c.DriftPerSec, 1}, {"max increase step", c.MaxIncreaseStep, 1},
		{"max decrease step", c.MaxDecreaseStep, 0.9},
	}
	for _, f := range fracs {
		if !(f.v > 0 && f.v <= f.max) { // also refuses NaN
			return errors.New("autorate: " + f.name + " " + strconv.FormatFloat(f.v, 'g', -1, 64) + " is outside (0, " + strconv.FormatFloat(f.max, 'g', -1, 64) + "]")
		}
	}
	if c.LoadLight > c.LoadHigh {
		return errors.New("autorate: load light " + strconv.FormatFloat(c.LoadLight, 'g', -1, 64) + " is above load high " + strconv.FormatFloat(c.LoadHigh, 'g', -1, 64))
	}
	if c.MinPerKind < 1 || c.MinPerKind > MaxReflectors {
		return errors.New("autorate: min per kind " + strconv.Itoa(c.MinPerKind) + " is outside 1.." + strconv.Itoa(MaxReflectors))
	}
	return nil
}

func bps(v uint64) string { return strconv.FormatUint(v, 10) + " bit/s" }
