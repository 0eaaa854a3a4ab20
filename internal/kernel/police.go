package kernel

import (
	"encoding/binary"
	"math"
)

// ticksPerMicrosecond converts time to psched ticks. Kernels since 2.6.31
// report (in /proc/net/psched) 1000 ns per µs and 64 ns per tick at a
// 1 MHz clock, so iproute2 computes 1000/64 ticks per µs everywhere.
const ticksPerMicrosecond = 1000.0 / 64.0

// xmitTicks is iproute2's tc_calc_xmittime: the psched ticks needed to send
// size bytes at rate bytes/s. Like tc, it truncates to whole microseconds
// before converting (tc_core_time2tick takes an unsigned int), so a tree
// built here is bit-identical to one built by tc.
func xmitTicks(rate uint64, size uint32, tick float64) uint32 {
	if rate == 0 {
		return 0
	}
	// Floors of non-negative values (tick is positive) by conversion to
	// uint32 below 2^32: math.Floor is 1.4 KB of softfloat code on mipsle.
	usec := 1e6 * float64(size) / float64(rate)
	if usec >= math.MaxUint32 {
		usec = math.MaxUint32
	} else {
		usec = float64(uint32(usec))
	}
	t := usec * tick
	if t >= math.MaxUint32 {
		return math.MaxUint32
	}
	return uint32(t)
}

// rateSpec is struct tc_ratespec.
type rateSpec struct {
	CellLog   uint8
	LinkLayer uint8
	Overhead  uint16
	CellAlign int16
	MPU       uint16
	Rate      uint32 // bytes/s, saturated at 2^32-1 (then a RATE64 attribute follows)
}

func (r rateSpec) put(b []byte) {
	b[0], b[1] = r.CellLog, r.LinkLayer
	binary.NativeEndian.PutUint16(b[2:], r.Overhead)
	binary.NativeEndian.PutUint16(b[4:], uint16(r.CellAlign))
	binary.NativeEndian.PutUint16(b[6:], r.MPU)
	binary.NativeEndian.PutUint32(b[8:], r.Rate)
}

func decodeRateSpec(b []byte) rateSpec {
	if len(b) < 12 {
		return rateSpec{}
	}
	return rateSpec{
		CellLog: b[0], LinkLayer: b[1],
		Overhead:  binary.NativeEndian.Uint16(b[2:]),
		CellAlign: int16(binary.NativeEndian.Uint16(b[4:])),
		MPU:       binary.NativeEndian.Uint16(b[6:]),
		Rate:      binary.NativeEndian.Uint32(b[8:]),
	}
}

func sat32(v uint64) uint32 {
	if v > math.MaxUint32 {
		return math.MaxUint32
	}
	return uint32(v)
}

// calcRateTable is iproute2's tc_calc_rtable: the 256-slot transmission
// time table act_police (and old qdiscs) index by packet size >> cell_log.
// It sets r's cell_log, cell_align and link layer.
func calcRateTable(r *rateSpec, rate uint64, mtu uint32, linkLayer uint8, tick float64) []byte {
	if mtu == 0 {
		mtu = 2047
	}
	cellLog := uint8(0)
	for (mtu >> cellLog) > 255 {
		cellLog++
	}
	b := make([]byte, 1024)
	for i := 0; i < 256; i++ {
		sz := adjustSize(uint32(i+1)<<cellLog, uint32(r.MPU), uint32(linkLayer))
		binary.NativeEndian.PutUint32(b[4*i:], xmitTicks(rate, sz, tick))
	}
	r.CellAlign = -1
	r.CellLog = cellLog
	r.LinkLayer = linkLayer
	return b
}

// tc_police and TCA_POLICE_* (linux/pkt_cls.h).
const (
	tcPoliceLen     = 56
	tcaPoliceTbf    = 1
	tcaPoliceRate   = 2
	tcaPoliceRate64 = 8
	tcActShot       = 2
)

// policeOptions encodes act_police's TCA_ACT_OPTIONS payload as
// `tc ... action police rate R burst B mtu M drop` does: struct tc_police
// with the burst as transmission time, the 1024-byte rate table, and
// RATE64 for rates of 4 GB/s and more.
func policeOptions(rateBits uint64, burst, mtu uint32, tick float64) (tbf []byte, rtab []byte, rate64 uint64) {
	rate := rateBits / 8
	var rs rateSpec
	rs.Rate = sat32(rate)
	rtab = calcRateTable(&rs, rate, mtu, linkLayerEthernet, tick)
	tbf = make([]byte, tcPoliceLen)
	// index 0: let the kernel pick; action: what happens above the rate.
	binary.NativeEndian.PutUint32(tbf[4:], uint32(int32(tcActShot)))
	binary.NativeEndian.PutUint32(tbf[12:], xmitTicks(rate, burst, tick))
	binary.NativeEndian.PutUint32(tbf[16:], mtu)
	rs.put(tbf[20:32])
	if rate >= 1<<32 {
		rate64 = rate
	}
	return tbf, rtab, rate64
}

// rateCfg is the kernel's struct psched_ratecfg: it turns lengths into
// times with a multiply and shift instead of a division.
type rateCfg struct {
	rate      uint64
	mult      uint64
	shift     uint
	overhead  uint32
	mpu       uint32
	linkLayer uint8
}

// newRateCfg is psched_ratecfg_precompute.
func newRateCfg(rate uint64, conf rateSpec) rateCfg {
	r := rateCfg{rate: rate, mult: 1, overhead: uint32(conf.Overhead), mpu: uint32(conf.MPU), linkLayer: conf.LinkLayer}
	if rate > 0 {
		factor := uint64(1e9)
		for {
			r.mult = factor / rate
			if r.mult&(1<<31) != 0 || factor&(1<<63) != 0 {
				break
			}
			factor <<= 1
			r.shift++
		}
	}
	return r
}

// l2tNS is psched_l2t_ns: nanoseconds to send size bytes.
func (r rateCfg) l2tNS(size uint32) uint64 {
	l := size + r.overhead
	if l < r.mpu {
		l = r.mpu
	}
	if r.linkLayer == linkLayerATM {
		l = (l + atmCellPayload - 1) / atmCellPayload * atmCellSize
	}
	return (uint64(l) * r.mult) >> r.shift
}

// tbfRateTable is the legacy rate table tbf's TCA_TBF_RTAB carries, as
// go-tc computed it (mtu 2047, cell_log 3, ethernet, times truncated to
// whole microseconds before they become ticks). The kernel uses it only
// to learn the link layer of a rate spec that does not say (sqm's always
// says), but it must be there.
func tbfRateTable(rate uint64, tick float64) []byte {
	b := make([]byte, 1024)
	for i := 0; i < 256; i++ {
		sz := uint32((i + 1) << 3)
		t := uint32(1e6 * (float64(sz) / float64(rate)))
		binary.NativeEndian.PutUint32(b[4*i:], uint32(float64(t)*tick))
	}
	return b
}
