package bpfobj

import (
	"encoding/binary"
	"os"
	"strings"
	"testing"
)

func objects(t testing.TB) (le, be []byte) {
	le, err := os.ReadFile("../codel_police_bpfel.o")
	if err != nil {
		t.Fatal(err)
	}
	be, err = os.ReadFile("../codel_police_bpfeb.o")
	if err != nil {
		t.Fatal(err)
	}
	return le, be
}

// TestParse: both committed objects parse with their byte order, and every
// relocation is on a 64-bit load of a map.
func TestParse(t *testing.T) {
	le, be := objects(t)
	for _, c := range []struct {
		name  string
		b     []byte
		order binary.ByteOrder
	}{{"bpfel", le, binary.LittleEndian}, {"bpfeb", be, binary.BigEndian}} {
		o, err := Parse(c.b)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if o.Order != c.order || len(o.Maps) != 4 || len(o.Relocs) == 0 || o.License != "GPL" {
			t.Errorf("%s: order %v, %d maps, %d relocations, license %q", c.name, o.Order, len(o.Maps), len(o.Relocs), o.License)
		}
		for _, r := range o.Relocs {
			if o.Insns[r.Off] != opLdImm64 || r.Map >= len(o.Maps) {
				t.Errorf("%s: relocation %+v", c.name, r)
			}
		}
	}
}

func TestParseRejects(t *testing.T) {
	le, _ := objects(t)
	for _, c := range []struct {
		name string
		b    []byte
		want string
	}{
		{"empty", nil, "codel_police object"},
		{"not elf", []byte("hello, world, this is not an ELF object at all"), "codel_police object"},
		{"truncated", le[:len(le)/2], "codel_police object"},
	} {
		_, err := Parse(c.b)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error containing %q", c.name, err, c.want)
		}
	}
	// Generate refuses objects of the wrong byte order for their slot.
	le, be := objects(t)
	if _, err := Generate(be, le); err == nil || !strings.Contains(err.Error(), "byte order") {
		t.Errorf("swapped objects: %v", err)
	}
}

func FuzzParse(f *testing.F) {
	le, be := objects(f)
	f.Add(le)
	f.Add(be)
	f.Add([]byte("\x7fELF"))
	f.Fuzz(func(t *testing.T, b []byte) {
		o, err := Parse(b)
		if err != nil {
			return
		}
		// Whatever parses must have relocations inside its instructions.
		for _, r := range o.Relocs {
			if r.Off < 0 || r.Off+16 > len(o.Insns) || r.Map < 0 || r.Map >= len(o.Maps) {
				t.Errorf("relocation %+v outside %d bytes / %d maps", r, len(o.Insns), len(o.Maps))
			}
		}
	})
}
