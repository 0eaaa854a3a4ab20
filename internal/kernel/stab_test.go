package kernel

import (
	"testing"

	"sqm/internal/plan"
)

// kernelPacketLen is net/sched/sch_api.c __qdisc_calculate_pkt_len over
// the table this package sends.
func kernelPacketLen(s sizeSpec, tab []uint16, skbLen int) int {
	l := skbLen + int(s.Overhead)
	if tab != nil {
		slot := max(l+int(s.CellAlign), 0) >> s.CellLog
		if slot < int(s.TSize) {
			l = int(tab[slot])
		} else {
			l = int(tab[s.TSize-1])*(slot/int(s.TSize)) + int(tab[slot%int(s.TSize)])
		}
		l <<= s.SizeLog
	}
	return max(l, 1)
}

// TestStabPacketLenMatchesTable keeps plan.Stab.PacketLen (which sizes
// tbf's bucket) equal to what the kernel computes from the table
// calcSizeTable builds, including lengths past the table's end.
func TestStabPacketLenMatchesTable(t *testing.T) {
	for _, st := range []plan.Stab{
		{LinkLayer: "ethernet", Overhead: 38},
		{LinkLayer: "ethernet", Overhead: 38, MPU: 64, MTU: 2047, TSize: 512},
		{LinkLayer: "atm", Overhead: 44, MTU: 2047, TSize: 512},
		{LinkLayer: "atm", Overhead: 100, MTU: 2047, TSize: 512},
		{LinkLayer: "atm", Overhead: -20, MPU: 96, MTU: 1500, TSize: 128},
		{LinkLayer: "atm", Overhead: 1500, MTU: 65536, TSize: 64},
		{LinkLayer: "atm", Overhead: 0, MTU: 9000, TSize: 3},
		{LinkLayer: "ethernet", Overhead: -1500, MPU: 60, MTU: 576, TSize: 1},
	} {
		ll, err := linkLayerValue(st.LinkLayer)
		if err != nil {
			t.Fatal(err)
		}
		spec := sizeSpec{Overhead: st.Overhead, LinkLayer: ll, MPU: st.MPU, MTU: st.MTU, TSize: st.TSize}
		tab, err := calcSizeTable(&spec)
		if err != nil {
			t.Fatal(err)
		}
		for n := 1; n <= 70000; n++ {
			if got, want := st.PacketLen(n), kernelPacketLen(spec, tab, n); int(got) != want {
				t.Fatalf("%+v: PacketLen(%d) = %d, kernel computes %d", st, n, got, want)
			}
		}
	}
}
