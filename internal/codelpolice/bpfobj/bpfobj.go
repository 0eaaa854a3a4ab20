// Package bpfobj reads the codel_police ELF objects clang builds and
// writes them out as Go source (internal/codelpolice/object_gen.go), so
// the sqm binary carries the program's instructions, maps and relocations
// ready to load instead of an ELF parser (debug/elf, debug/dwarf and the
// decompressors it pulls in cost the router build about 0.2 MB). Only the
// generator and tests import it.
package bpfobj

import (
	"bytes"
	"crypto/sha256"
	"debug/elf"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"go/format"
	"strings"
)

// Section names the object must have.
const (
	progSection = "classifier"
	mapsSection = "maps"
	mapDefSize  = 20 // struct map_def: five u32
)

// MapSpec is one legacy map definition.
type MapSpec struct {
	Name                                        string
	Type, KeySize, ValueSize, MaxEntries, Flags uint32
}

// Object is a parsed codel_police object: the program's instructions,
// its maps (index = position in the maps section) and where each
// instruction loads a map.
type Object struct {
	Order   binary.ByteOrder
	Insns   []byte
	Maps    []MapSpec
	Relocs  []Reloc
	License string
}

// Reloc is a map load: the byte offset of a ld_imm64 in Insns and the
// index of the map it loads.
type Reloc struct {
	Off, Map int
}

const (
	insnSize    = 8
	opLdImm64   = 0x18
	maxMaps     = 16
	maxInsnsLen = 1 << 20
)

// Parse reads what the loader needs from an ELF object and checks it is
// consistent, so a corrupt or foreign object fails here with a message
// rather than in the verifier.
func Parse(b []byte) (*Object, error) {
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
	o := &Object{Order: f.ByteOrder}
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
			o.License = strings.TrimRight(string(d), "\x00")
		}
	}
	if progIdx < 0 || mapsIdx < 0 {
		return nil, fmt.Errorf("codel_police object: no %q or %q section", progSection, mapsSection)
	}
	if o.License == "" {
		return nil, errors.New("codel_police object: no license")
	}
	prog := f.Sections[progIdx]
	if prog.Size == 0 || prog.Size > maxInsnsLen || prog.Size%insnSize != 0 {
		return nil, fmt.Errorf("codel_police object: program section is %d bytes", prog.Size)
	}
	if o.Insns, err = prog.Data(); err != nil {
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
		if len(o.Maps) == maxMaps {
			return nil, fmt.Errorf("codel_police object: more than %d maps", maxMaps)
		}
		d := md[s.Value:]
		m := MapSpec{Name: s.Name, Type: o.Order.Uint32(d), KeySize: o.Order.Uint32(d[4:]),
			ValueSize: o.Order.Uint32(d[8:]), MaxEntries: o.Order.Uint32(d[12:]), Flags: o.Order.Uint32(d[16:])}
		symMap[i+1] = len(o.Maps)
		o.Maps = append(o.Maps, m)
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
			off := o.Order.Uint64(d[i:])
			info := o.Order.Uint64(d[i+8:])
			m, ok := symMap[int(elf.R_SYM64(info))]
			if !ok {
				return nil, fmt.Errorf("codel_police object: relocation at %d refers to symbol %d, not a map", off, elf.R_SYM64(info))
			}
			if off%insnSize != 0 || off+2*insnSize > uint64(len(o.Insns)) || o.Insns[off] != opLdImm64 {
				return nil, fmt.Errorf("codel_police object: relocation at %d is not on a 64-bit load", off)
			}
			o.Relocs = append(o.Relocs, Reloc{Off: int(off), Map: m})
		}
	}
	return o, nil
}

// Tag is what codelpolice.ObjectTag reports for an object: the first 8
// hex digits of its SHA-256. It goes into the tc filter's name, so a tree
// built by an sqm with another program does not match the plan; it is the
// same value sqm computed at run time before the objects were generated.
func Tag(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:4])
}

// Generate writes the Go source of internal/codelpolice/object_gen.go for
// the little- and big-endian objects.
func Generate(le, be []byte) ([]byte, error) {
	var w bytes.Buffer
	w.WriteString("// Code generated by go run gen.go from codel_police_bpfel.o and codel_police_bpfeb.o; DO NOT EDIT.\n\n")
	w.WriteString("package codelpolice\n\nimport \"encoding/binary\"\n\n")
	for _, v := range []struct {
		name, file, orderName string
		order                 binary.ByteOrder
		b                     []byte
	}{
		{"objectLE", "codel_police_bpfel.o", "binary.LittleEndian", binary.LittleEndian, le},
		{"objectBE", "codel_police_bpfeb.o", "binary.BigEndian", binary.BigEndian, be},
	} {
		o, err := Parse(v.b)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", v.file, err)
		}
		if o.Order != v.order {
			return nil, fmt.Errorf("%s: byte order %v, want %v", v.file, o.Order, v.order)
		}
		fmt.Fprintf(&w, "// %s is %s (%d bytes).\n", v.name, v.file, len(v.b))
		fmt.Fprintf(&w, "var %s = object{\n\torder: %s,\n\ttag: %q,\n\tlicense: %q,\n", v.name, v.orderName, Tag(v.b), o.License)
		w.WriteString("\tmaps: []mapSpec{\n")
		for _, m := range o.Maps {
			fmt.Fprintf(&w, "\t\t{name: %q, typ: %d, keySize: %d, valueSize: %d, maxEntries: %d, flags: %d},\n",
				m.Name, m.Type, m.KeySize, m.ValueSize, m.MaxEntries, m.Flags)
		}
		w.WriteString("\t},\n\trelocs: []reloc{\n")
		for _, r := range o.Relocs {
			fmt.Fprintf(&w, "\t\t{off: %d, m: %d},\n", r.Off, r.Map)
		}
		w.WriteString("\t},\n\tinsns: \"\" +\n")
		for i := 0; i < len(o.Insns); i += 32 {
			line := o.Insns[i:min(i+32, len(o.Insns))]
			w.WriteString("\t\t\"")
			for _, c := range line {
				fmt.Fprintf(&w, "\\x%02x", c)
			}
			w.WriteString("\"")
			if i+32 < len(o.Insns) {
				w.WriteString(" +")
			} else {
				w.WriteString(",")
			}
			w.WriteString("\n")
		}
		w.WriteString("}\n\n")
	}
	return format.Source(w.Bytes())
}
