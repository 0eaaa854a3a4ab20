package kernel

import (
	"math"
	"testing"
)

// TestXmitTicksLikeFloor holds xmitTicks to the math.Floor formula it
// replaced (tc's), from one byte at the slowest rate to the clamps.
func TestXmitTicksLikeFloor(t *testing.T) {
	floor := func(rate uint64, size uint32, tick float64) uint32 {
		usec := math.Floor(1e6 * float64(size) / float64(rate))
		if usec > math.MaxUint32 {
			usec = math.MaxUint32
		}
		t := math.Floor(usec * tick)
		if t > math.MaxUint32 {
			return math.MaxUint32
		}
		return uint32(t)
	}
	for _, rate := range []uint64{1, 3, 1000, 8000, 125000, 1250000, 1e9 / 8, 1e12, 1<<64 - 1} {
		for _, size := range []uint32{0, 1, 2, 1500, 1749, 4294, 4295, 65535, 1 << 20, math.MaxUint32} {
			for _, tick := range []float64{ticksPerMicrosecond, 1, 15.625, 64, 1000, 1e6} {
				if got, want := xmitTicks(rate, size, tick), floor(rate, size, tick); got != want {
					t.Errorf("xmitTicks(%d, %d, %v) = %d, the Floor formula gives %d", rate, size, tick, got, want)
				}
			}
		}
	}
}
