package codelpolice

import (
	"bytes"
	"crypto/sha256"
	"debug/elf"
	_ "embed"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
)

//go:embed codel_police_bpfel.o
var objectLE []byte

//go:embed codel_police_bpfeb.o
var objectBE []byte

// nativeObject is the object compiled for this machine's byte order.
func nativeObject() []byte {
	if binary.NativeEndian.Uint16([]byte{1, 0}) == 1 {
		return objectLE
	}
	return objectBE
}

// ObjectTag identifies the compiled program (the first 8 hex digits of the
// native object's SHA-256). It goes into the tc filter's name, so a tree
// built by an older sqm with another program does not match the plan.
func ObjectTag() string {
	h := sha256.Sum256(nativeObject())
	return hex.EncodeToString(h[:4])
}

// Section and symbol names the object must have.
const (
	progSection = "classifier"
	mapsSection = "maps"
	ProgName    = "codel_police"
	mapDefSize  = 20 // struct map_def: five u32
)

// mapSpec is one legacy map definition.
type mapSpec struct {
	name                                       string
	typ, keySize, valueSize, maxEntries, flags uint32
}

// object is a parsed codel_police object: the program's instructions,
// its maps (index = position in the maps section) and where each
// instruction loads a map.
type object struct {
	order   binary.ByteOrder
	insns   []byte
	maps    []mapSpec
	relocs  []reloc
	license string
}

type reloc struct {
	off int // byte offset of a ld_imm64 in insns
	m   int // index into maps
}

const (
	insnSize    = 8
	opLdImm64   = 0x18
	maxMaps     = 16
	maxInsnsLen = 1 << 20
)

// parseObject reads what the loader needs from an ELF object and checks
// it is consistent, so a corrupt or foreign object fails here with a
// message rather than in the verifier.
func parseObject(b []byte) (*object, error) {
	f, err := elf.NewFile(bytes.NewReader(b))
	if err != nil {
		return nil, fmt.Errorf("codel_police object: %w", err)
	}
	if f.Machine != elf.EM_BPF || f.Class != elf.ELFCLASS64 {
		return nil, fmt.Errorf("codel_police object: not a 64-bit BPF object (machine %v, class %v)", f.Machine, f.Class)
	}
	// debug/elf allocates what a section header claims before reading
	// it: refuse claims the object cannot hold.
	for _, sec := range f.Sections {
		if sec.Type != elf.SHT_NOBITS && (sec.Offset > uint64(len(b)) || sec.Size > uint64(len(b))-sec.Offset) {
			return nil, fmt.Errorf("codel_police object: section %q (%d bytes at %d) lies outside the %d-byte object", sec.Name, sec.Size, sec.Offset, len(b))
		}
	}
	o := &object{order: f.ByteOrder}
	var progIdx, mapsIdx = -1, -1
	for i, s := range f.Sections {
		switch s.Name {
		case progSection:
			progIdx = i
		case mapsSection:
			mapsIdx = i
		case "license":
			d, err := s.Data()
			if err != nil {
				return nil, fmt.Errorf("codel_police object: license: %w", err)
			}
			o.license = strings.TrimRight(string(d), "\x00")
		}
	}
	if progIdx < 0 || mapsIdx < 0 {
		return nil, fmt.Errorf("codel_police object: no %q or %q section", progSection, mapsSection)
	}
	if o.license == "" {
		return nil, errors.New("codel_police object: no license")
	}
	prog := f.Sections[progIdx]
	if prog.Size == 0 || prog.Size > maxInsnsLen || prog.Size%insnSize != 0 {
		return nil, fmt.Errorf("codel_police object: program section is %d bytes", prog.Size)
	}
	if o.insns, err = prog.Data(); err != nil {
		return nil, fmt.Errorf("codel_police object: program: %w", err)
	}
	md, err := f.Sections[mapsIdx].Data()
	if err != nil {
		return nil, fmt.Errorf("codel_police object: maps: %w", err)
	}
	syms, err := f.Symbols()
	if err != nil {
		return nil, fmt.Errorf("codel_police object: symbols: %w", err)
	}
	// symMap maps a symbol table index (1-based in relocations) to a map.
	symMap := map[int]int{}
	for i, s := range syms {
		if int(s.Section) != mapsIdx || elf.ST_TYPE(s.Info) != elf.STT_OBJECT {
			continue
		}
		if s.Value%mapDefSize != 0 || s.Value+mapDefSize > uint64(len(md)) || s.Size != mapDefSize {
			return nil, fmt.Errorf("codel_police object: map %q at %d size %d is not a whole map definition", s.Name, s.Value, s.Size)
		}
		if len(o.maps) == maxMaps {
			return nil, fmt.Errorf("codel_police object: more than %d maps", maxMaps)
		}
		d := md[s.Value:]
		m := mapSpec{name: s.Name, typ: o.order.Uint32(d), keySize: o.order.Uint32(d[4:]),
			valueSize: o.order.Uint32(d[8:]), maxEntries: o.order.Uint32(d[12:]), flags: o.order.Uint32(d[16:])}
		symMap[i+1] = len(o.maps)
		o.maps = append(o.maps, m)
	}
	for _, s := range f.Sections {
		if s.Type != elf.SHT_REL || int(s.Info) != progIdx {
			continue
		}
		d, err := s.Data()
		if err != nil {
			return nil, fmt.Errorf("codel_police object: relocations: %w", err)
		}
		if len(d)%16 != 0 {
			return nil, fmt.Errorf("codel_police object: relocation section is %d bytes", len(d))
		}
		for i := 0; i < len(d); i += 16 {
			off := o.order.Uint64(d[i:])
			info := o.order.Uint64(d[i+8:])
			m, ok := symMap[int(elf.R_SYM64(info))]
			if !ok {
				return nil, fmt.Errorf("codel_police object: relocation at %d refers to symbol %d, not a map", off, elf.R_SYM64(info))
			}
			if off%insnSize != 0 || off+2*insnSize > uint64(len(o.insns)) || o.insns[off] != opLdImm64 {
				return nil, fmt.Errorf("codel_police object: relocation at %d is not on a 64-bit load", off)
			}
			o.relocs = append(o.relocs, reloc{off: int(off), m: m})
		}
	}
	return o, nil
}

// patched returns the instructions with each map load pointing at the map
// file descriptors (BPF_PSEUDO_MAP_FD in the source register).
func (o *object) patched(fds []int) []byte {
	insns := bytes.Clone(o.insns)
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

const pseudoMapFD = 1

// mapIndex finds a map by name.
func (o *object) mapIndex(name string) int {
	for i, m := range o.maps {
		if m.name == name {
			return i
		}
	}
	return -1
}
