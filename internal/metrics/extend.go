package metrics

import "time"

// extender turns 32-bit kernel counters into 64-bit ones. It remembers,
// per series, the last raw value and the extended value; a raw value
// below the last one is a wrap (add the distance through 2^32) unless the
// series' object was replaced, which is a real reset and starts over.
//
// A replaced object is recognised by its incarnation (device ifindex, the
// time sqm applied the tree, the qdisc's kind and handle) or by its
// witness going backwards: the qdisc's 64-bit byte and packet counts,
// which never wrap and only shrink when the qdisc is new. A reset that
// the witness cannot show (the new qdisc already passed more bytes than
// the old one by the next scrape) is still caught by the incarnation,
// since every apply that rebuilds a tree stamps a new time.
//
// Series not seen in a scrape are forgotten after it, so state does not
// grow with interfaces that come and go.
type extender struct {
	series map[string]*extended
	gen    uint64
}

type extended struct {
	raw     uint32
	value   uint64
	witness uint64
	inc     incarnation
	seen    uint64
}

// incarnation identifies one life of a qdisc.
type incarnation struct {
	ifindex int
	applied time.Time
	kind    string
	handle  uint32
}

func newExtender() *extender { return &extender{series: map[string]*extended{}} }

// begin starts a scrape.
func (e *extender) begin() { e.gen++ }

// end forgets series the scrape did not touch.
func (e *extender) end() {
	for k, s := range e.series {
		if s.seen != e.gen {
			delete(e.series, k)
		}
	}
}

// extend returns the 64-bit value of the series key for a new raw reading.
func (e *extender) extend(key string, raw uint32, witness uint64, inc incarnation) uint64 {
	s, ok := e.series[key]
	if !ok {
		s = &extended{}
		e.series[key] = s
	}
	switch {
	case !ok || s.inc != inc || witness < s.witness:
		s.value = uint64(raw)
	case raw >= s.raw:
		s.value += uint64(raw - s.raw)
	default:
		// Wrapped: what remained to 2^32, then raw more.
		s.value += (1<<32 - uint64(s.raw)) + uint64(raw)
	}
	s.raw, s.witness, s.inc, s.seen = raw, witness, inc, e.gen
	return s.value
}
