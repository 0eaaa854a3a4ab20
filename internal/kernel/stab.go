package kernel

import (
	"encoding/binary"
	"fmt"
)

// Link-layer values of struct tc_sizespec and tc_ratespec (iproute2's
// enum link_layer; TC_LINKLAYER_* in the kernel).
const (
	linkLayerUnaware  = 0
	linkLayerEthernet = 1
	linkLayerATM      = 2
)

// ATM cells carry 48 payload bytes in 53 bytes on the wire.
const (
	atmCellPayload = 48
	atmCellSize    = 53
)

// sizeSpec is struct tc_sizespec.
type sizeSpec struct {
	CellLog   uint8
	SizeLog   uint8
	CellAlign int16
	Overhead  int32
	LinkLayer uint32
	MPU       uint32
	MTU       uint32
	TSize     uint32
}

const sizeSpecLen = 24

func (s sizeSpec) marshal() []byte {
	b := make([]byte, sizeSpecLen)
	b[0], b[1] = s.CellLog, s.SizeLog
	binary.NativeEndian.PutUint16(b[2:], uint16(s.CellAlign))
	binary.NativeEndian.PutUint32(b[4:], uint32(s.Overhead))
	binary.NativeEndian.PutUint32(b[8:], s.LinkLayer)
	binary.NativeEndian.PutUint32(b[12:], s.MPU)
	binary.NativeEndian.PutUint32(b[16:], s.MTU)
	binary.NativeEndian.PutUint32(b[20:], s.TSize)
	return b
}

func decodeSizeSpec(b []byte) (sizeSpec, error) {
	if len(b) < sizeSpecLen {
		return sizeSpec{}, fmt.Errorf("decode tc_sizespec: %d bytes, want %d", len(b), sizeSpecLen)
	}
	return sizeSpec{
		CellLog: b[0], SizeLog: b[1],
		CellAlign: int16(binary.NativeEndian.Uint16(b[2:])),
		Overhead:  int32(binary.NativeEndian.Uint32(b[4:])),
		LinkLayer: binary.NativeEndian.Uint32(b[8:]),
		MPU:       binary.NativeEndian.Uint32(b[12:]),
		MTU:       binary.NativeEndian.Uint32(b[16:]),
		TSize:     binary.NativeEndian.Uint32(b[20:]),
	}, nil
}

// linkLayerValue maps the plan's link-layer name.
func linkLayerValue(s string) (uint32, error) {
	switch s {
	case "", "ethernet":
		return linkLayerEthernet, nil
	case "atm", "adsl":
		return linkLayerATM, nil
	}
	return 0, fmt.Errorf("unknown link layer %q (want ethernet or atm)", s)
}

// adjustSize is iproute2's tc_adjust_size: apply the MPU, then round up to
// whole ATM cells.
func adjustSize(sz, mpu uint32, linkLayer uint32) uint32 {
	if sz < mpu {
		sz = mpu
	}
	if linkLayer == linkLayerATM {
		cells := (sz + atmCellPayload - 1) / atmCellPayload
		return cells * atmCellSize
	}
	return sz
}

// maxStabTSize is the largest table the kernel can be sent: TCA_STAB is
// one netlink attribute (16-bit length) holding its own header,
// TCA_STAB_BASE (header + tc_sizespec) and TCA_STAB_DATA (header + 2 bytes
// per cell). config.MaxStabTSize must equal it (tested).
const maxStabTSize = (0xffff - nlaHdrLen - (nlaHdrLen + sizeSpecLen) - nlaHdrLen) / 2

// maxStabMTU bounds the MTU the table covers: no device has a larger MTU
// than loopback's 65536, and cell sizes are computed in 32 bits, which a
// 4 GB "mtu" with ATM framing would overflow. config.MaxStabMTU equals it.
const maxStabMTU = 1 << 16

const nlaHdrLen = 4

// calcSizeTable ports iproute2's tc_calc_size_table. It fills in the
// derived fields of s and returns the table (nil when only an overhead is
// needed: the kernel then adds Overhead and ignores MPU, which is why an
// MPU or ATM framing needs the table at all). It checks TSize before
// allocating: the table is TSize cells of 2 bytes, so an unchecked
// 4000000000 (a typo in tcTSIZE) would allocate 8 GB.
func calcSizeTable(s *sizeSpec) ([]uint16, error) {
	if s.LinkLayer <= linkLayerEthernet && s.MPU == 0 {
		s.MTU, s.TSize, s.CellLog, s.CellAlign = 0, 0, 0, 0
		return nil, nil
	}
	if s.MTU == 0 {
		s.MTU = 2047
	}
	if s.TSize == 0 {
		s.TSize = 512
	}
	if s.TSize > maxStabTSize {
		return nil, fmt.Errorf("size table of %d cells is larger than the kernel accepts (at most %d)", s.TSize, maxStabTSize)
	}
	if s.MTU > maxStabMTU {
		return nil, fmt.Errorf("size-table mtu %d is larger than any device's MTU (at most %d)", s.MTU, maxStabMTU)
	}
	s.CellLog = 0
	for (s.MTU >> s.CellLog) > s.TSize-1 {
		s.CellLog++
	}
	s.SizeLog = 0
	tab := make([]uint16, s.TSize)
again:
	for i := int(s.TSize) - 1; i >= 0; i-- {
		sz := adjustSize(uint32(i+1)<<s.CellLog, s.MPU, s.LinkLayer)
		if sz>>s.SizeLog > 0xffff {
			s.SizeLog++
			goto again
		}
		tab[i] = uint16(sz >> s.SizeLog)
	}
	s.CellAlign = -1 // the table is indexed by (size - 1) >> cell_log
	return tab, nil
}

// tableBytes is the TCA_STAB_DATA payload.
func tableBytes(tab []uint16) []byte {
	b := make([]byte, 2*len(tab))
	for i, v := range tab {
		binary.NativeEndian.PutUint16(b[2*i:], v)
	}
	return b
}
