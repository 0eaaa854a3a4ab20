package codelpolice

import (
	"encoding/binary"
)

//go:generate go run gen.go

// nativeObject is the object compiled for this machine's byte order.
// Both are in object_gen.go, generated from the committed ELF objects
// (codel_police_bpf{el,eb}.o) so the binary needs no ELF parser.
func nativeObject() *object {
	if binary.NativeEndian.Uint16([]byte{1, 0}) == 1 {
		return &objectLE
	}
	return &objectBE
}

// ObjectTag identifies the compiled program (the first 8 hex digits of the
// native ELF object's SHA-256, computed when object_gen.go was generated).
// It goes into the tc filter's name, so a tree built by an older sqm with
// another program does not match the plan.
func ObjectTag() string { return nativeObject().tag }

// ProgName is the program's name in the kernel (and the tc filter's).
const ProgName = "codel_police"

// mapSpec is one legacy map definition.
type mapSpec struct {
	name                                       string
	typ, keySize, valueSize, maxEntries, flags uint32
}

// object is a codel_police program ready to load: its instructions, its
// maps (index = position in the object's maps section) and where each
// instruction loads a map.
type object struct {
	order   binary.ByteOrder
	tag     string
	license string
	maps    []mapSpec
	relocs  []reloc
	insns   string
}

type reloc struct {
	off int // byte offset of a ld_imm64 in insns
	m   int // index into maps
}

// patched returns the instructions with each map load pointing at the map
// file descriptors (BPF_PSEUDO_MAP_FD in the source register).
func (o *object) patched(fds []int) []byte {
	insns := []byte(o.insns)
	for _, r := range o.relocs {
		regs := insns[r.off+1]
		if o.order == binary.ByteOrder(binary.BigEndian) {
			insns[r.off+1] = regs&0xf0 | pseudoMapFD // dst high, src low
		} else {
			insns[r.off+1] = regs&0x0f | pseudoMapFD<<4 // dst low, src high
		}
		o.order.PutUint32(insns[r.off+4:], uint32(fds[r.m]))
	}
	return insns
}

const (
	pseudoMapFD = 1
	insnSize    = 8
	maxMaps     = 16 // a program of sqm's has at most this many maps
)

// mapIndex finds a map by name.
func (o *object) mapIndex(name string) int {
	for i, m := range o.maps {
		if m.name == name {
			return i
		}
	}
	return -1
}
