package codelpolice

import (
	"encoding/binary"
	"fmt"
	"strconv"
	"strings"
)

// Counters are what the program counted since it was loaded, summed over
// CPUs. Marked packets were delivered (with CE set); dropped ones were not.
type Counters struct {
	// Passed: packets delivered unchanged (Marked ones are not included).
	Passed      uint64 `json:"passed_packets"`
	PassedBytes uint64 `json:"passed_bytes"`
	// Marked: ECN-capable packets that carried the congestion signal (CE).
	Marked      uint64 `json:"marked_packets"`
	MarkedBytes uint64 `json:"marked_bytes"`
	// DroppedSignal: packets that were due a signal but not ECN-capable.
	DroppedSignal      uint64 `json:"dropped_signal_packets"`
	DroppedSignalBytes uint64 `json:"dropped_signal_bytes"`
	// DroppedLimit: packets dropped because the virtual delay exceeded
	// the hard limit.
	DroppedLimit      uint64 `json:"dropped_limit_packets"`
	DroppedLimitBytes uint64 `json:"dropped_limit_bytes"`
	// Spared: signals passed over a packet of a flow below the average
	// (flow-aware mode) and given to a later packet instead.
	Spared uint64 `json:"spared"`
	// NonIP: packets neither IPv4 nor IPv6 (ARP, ...), never signalled or
	// dropped; also counted in Passed.
	NonIP uint64 `json:"non_ip_packets"`
	// SparedLimit: packets of flows below the average (flow-aware mode)
	// let through past the hard limit (up to twice it); also counted in
	// Passed or Marked.
	SparedLimit uint64 `json:"spared_limit_packets"`
}

// counterSlots is C_NR in codel_police.c.
const counterSlots = 11

func (c *Counters) slots() []*uint64 {
	return []*uint64{&c.Passed, &c.PassedBytes, &c.Marked, &c.MarkedBytes, &c.DroppedSignal, &c.DroppedSignalBytes,
		&c.DroppedLimit, &c.DroppedLimitBytes, &c.Spared, &c.NonIP, &c.SparedLimit}
}

// sumPerCPU adds up a per-CPU array value: ncpu copies of the program's
// slots counters, each padded to 8 bytes (they are already a multiple of
// 8). A program of another sqm version may have fewer slots (they are
// only appended: the missing ones read 0) or more (ignored).
func sumPerCPU(b []byte, ncpu, slots int) (Counters, error) {
	var c Counters
	size := slots * 8
	if slots < 1 || len(b) != size*ncpu {
		return c, fmt.Errorf("codel_police counters: %d bytes for %d CPUs of %d slots", len(b), ncpu, slots)
	}
	s := c.slots()[:min(slots, counterSlots)]
	for cpu := 0; cpu < ncpu; cpu++ {
		for i := range s {
			*s[i] += binary.NativeEndian.Uint64(b[cpu*size+8*i:])
		}
	}
	return c, nil
}

// parseCPUList reads a kernel CPU list such as "0-3,5" (as in
// /sys/devices/system/cpu/possible) and returns how many CPUs the
// per-CPU maps hold: the highest listed CPU plus one.
func parseCPUList(s string) (int, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0, fmt.Errorf("empty CPU list")
	}
	highest := -1
	for _, part := range strings.Split(s, ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.Atoi(lo)
		if err != nil || a < 0 {
			return 0, fmt.Errorf("CPU list %q: bad CPU %q", s, lo)
		}
		b := a
		if isRange {
			if b, err = strconv.Atoi(hi); err != nil || b < a {
				return 0, fmt.Errorf("CPU list %q: bad range %q", s, part)
			}
		}
		highest = max(highest, b)
	}
	const maxCPUs = 1 << 16
	if highest >= maxCPUs {
		return 0, fmt.Errorf("CPU list %q: more than %d CPUs", s, maxCPUs)
	}
	return highest + 1, nil
}
