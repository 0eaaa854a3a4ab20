package irtt

import (
	"encoding/binary"
	"fmt"
	"time"
)

// Parameter keys on the wire.
const (
	keyVersion = iota + 1
	keyDuration
	keyInterval
	keyLength
	keyReceivedStats
	keyStampAt
	keyClock
	keyDSCP
	keyServerFill
)

// maxFill is the longest server fill pattern name irtt accepts.
const maxFill = 32

// Params are a test's parameters: what the client asks for in its open
// request, and what the server grants in its reply. Zero values are not
// sent (and mean none, or the server's default).
type Params struct {
	Version       int
	Duration      time.Duration
	Interval      time.Duration
	Length        int // reply length the server pads to; 0: just the fields
	ReceivedStats ReceivedStats
	StampAt       StampAt
	Clock         Clock
	DSCP          int
	ServerFill    string
}

// Append encodes p onto b.
func (p *Params) Append(b []byte) []byte {
	put := func(k uint64, v int64) {
		if v != 0 {
			b = binary.AppendUvarint(b, k)
			b = binary.AppendVarint(b, v)
		}
	}
	put(keyVersion, int64(p.Version))
	put(keyDuration, int64(p.Duration))
	put(keyInterval, int64(p.Interval))
	put(keyLength, int64(p.Length))
	put(keyReceivedStats, int64(p.ReceivedStats))
	put(keyStampAt, int64(p.StampAt))
	put(keyClock, int64(p.Clock))
	put(keyDSCP, int64(p.DSCP))
	if f := p.ServerFill; f != "" {
		if len(f) > maxFill {
			f = f[:maxFill]
		}
		b = binary.AppendUvarint(b, keyServerFill)
		b = binary.AppendUvarint(b, uint64(len(f)))
		b = append(b, f...)
	}
	return b
}

// ParseParams decodes parameters, refusing values that cannot be meant
// (a non-positive duration or interval, unknown stamp, clock or stats
// bits) and truncated input. Unknown keys are skipped, as irtt does, so a
// newer server's additions do not break the client.
func ParseParams(b []byte) (Params, error) {
	var p Params
	for i := 0; i < len(b); {
		k, n := binary.Uvarint(b[i:])
		if n <= 0 {
			return p, fmt.Errorf("irtt: parameters: bad key at byte %d", i)
		}
		i += n
		if k == keyServerFill {
			l, n := binary.Uvarint(b[i:])
			if n <= 0 {
				return p, fmt.Errorf("irtt: parameters: bad server fill length at byte %d", i)
			}
			i += n
			if l > maxFill || l > uint64(len(b)-i) {
				return p, fmt.Errorf("irtt: parameters: server fill of %d bytes at byte %d (at most %d, %d left)", l, i, maxFill, len(b)-i)
			}
			p.ServerFill = string(b[i : i+int(l)])
			i += int(l)
			continue
		}
		v, n := binary.Varint(b[i:])
		if n <= 0 {
			return p, fmt.Errorf("irtt: parameters: bad value for key %d at byte %d", k, i)
		}
		i += n
		switch k {
		case keyVersion:
			p.Version = int(v)
		case keyDuration:
			if v <= 0 {
				return p, fmt.Errorf("irtt: parameters: duration %d ns is not positive", v)
			}
			p.Duration = time.Duration(v)
		case keyInterval:
			if v <= 0 {
				return p, fmt.Errorf("irtt: parameters: interval %d ns is not positive", v)
			}
			p.Interval = time.Duration(v)
		case keyLength:
			if v < 0 || v > 1<<16 {
				return p, fmt.Errorf("irtt: parameters: length %d outside 0..65536", v)
			}
			p.Length = int(v)
		case keyReceivedStats:
			if v < 0 || v > int64(ReceivedCount|ReceivedWindow) {
				return p, fmt.Errorf("irtt: parameters: received stats %d unknown", v)
			}
			p.ReceivedStats = ReceivedStats(v)
		case keyStampAt:
			if v < 0 || v > int64(AtMidpoint) {
				return p, fmt.Errorf("irtt: parameters: stamp-at %d unknown", v)
			}
			p.StampAt = StampAt(v)
		case keyClock:
			if v < int64(Wall) || v > int64(BothClocks) {
				return p, fmt.Errorf("irtt: parameters: clock %d unknown", v)
			}
			p.Clock = Clock(v)
		case keyDSCP:
			if v < 0 || v > 255 {
				return p, fmt.Errorf("irtt: parameters: DSCP %d outside 0..255", v)
			}
			p.DSCP = int(v)
		}
	}
	return p, nil
}
