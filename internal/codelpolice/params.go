package codelpolice

import (
	"encoding/binary"
	"fmt"
	"time"

	"sqm/internal/plan"
)

// configSize is sizeof(struct config) in codel_police.c.
const configSize = 48

// Flags of struct config.
const (
	flagECN   = 1
	flagFlows = 2
)

// configBytes encodes struct config for the program. l2len is the
// link-layer header in front of the IP header on the device (14 on
// Ethernet, 0 on PPP/tun-like devices).
func configBytes(p *plan.CodelPolice, l2len int) ([]byte, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	if l2len != 0 && l2len != 14 {
		return nil, fmt.Errorf("codel_police: link-layer header of %d bytes; only Ethernet (14) and none (0) are handled", l2len)
	}
	b := make([]byte, configSize)
	e := binary.NativeEndian
	e.PutUint64(b[0:], costMult(p.RateBits))
	e.PutUint64(b[8:], uint64(p.Target))
	e.PutUint64(b[16:], uint64(p.Interval))
	e.PutUint64(b[24:], uint64(p.Limit))
	e.PutUint64(b[32:], uint64(FrameTime(p.RateBits, p.MTU)))
	var flags uint32
	if p.ECN {
		flags |= flagECN
	}
	if p.Flows {
		flags |= flagFlows
	}
	e.PutUint32(b[40:], flags)
	e.PutUint32(b[44:], uint32(l2len))
	return b, nil
}

// costMult is the program's per-byte cost (of the IP packet, as tc's
// police charges at ingress): nanoseconds per byte at the rate in 16.16
// fixed point, so the program multiplies and shifts instead of dividing
// per packet.
func costMult(rateBits uint64) uint64 {
	return (8 * uint64(time.Second) << 16) / rateBits
}

// FrameTime is how long a frame of n bytes takes at the rate.
func FrameTime(rateBits uint64, n uint32) time.Duration {
	return time.Duration(uint64(n) * 8 * uint64(time.Second) / rateBits)
}
