package codelpolice

import (
	"bytes"
	"encoding/binary"
	"os"
	"strings"
	"testing"
	"time"

	"sqm/internal/codelpolice/bpfobj"
	"sqm/internal/plan"
)

// TestObjects: both generated objects have the maps the program and this
// package agree on, and every map load is relocated.
func TestObjects(t *testing.T) {
	for name, o := range map[string]*object{"bpfel": &objectLE, "bpfeb": &objectBE} {
		want := map[string]mapSpec{
			"config":   {name: "config", typ: 2, keySize: 4, valueSize: configSize, maxEntries: 1},
			"state":    {name: "state", typ: 2, keySize: 4, valueSize: 88, maxEntries: 1},
			"counters": {name: "counters", typ: 6, keySize: 4, valueSize: counterSlots * 8, maxEntries: 1},
			"flows":    {name: "flows", typ: 9, keySize: 4, valueSize: 24, maxEntries: 4096},
		}
		if len(o.maps) != len(want) || len(o.maps) > maxMaps {
			t.Errorf("%s: %d maps, want %d", name, len(o.maps), len(want))
		}
		for _, m := range o.maps {
			if m != want[m.name] {
				t.Errorf("%s: map %+v, want %+v", name, m, want[m.name])
			}
		}
		if len(o.relocs) == 0 || o.license != "GPL" || len(o.insns)%insnSize != 0 {
			t.Errorf("%s: %d relocations, license %q, %d bytes of instructions", name, len(o.relocs), o.license, len(o.insns))
		}
		wantOrder := binary.ByteOrder(binary.LittleEndian)
		if name == "bpfeb" {
			wantOrder = binary.BigEndian
		}
		if o.order != wantOrder {
			t.Errorf("%s: byte order %v", name, o.order)
		}
		// Patching sets the pseudo-map source register and the fd, and
		// leaves the destination register alone, in either byte order.
		fds := []int{101, 102, 103, 104}
		insns := o.patched(fds)
		for _, r := range o.relocs {
			regs := insns[r.off+1]
			src, dst := regs>>4, regs&0xf
			if o.order == binary.ByteOrder(binary.BigEndian) {
				src, dst = regs&0xf, regs>>4
			}
			if src != pseudoMapFD || dst != 1 && dst != 2 && dst != 3 && dst != 4 && dst != 6 && dst != 7 && dst != 8 && dst != 9 {
				t.Errorf("%s: insn at %d: regs %02x", name, r.off, regs)
			}
			if got := o.order.Uint32(insns[r.off+4:]); got != uint32(fds[r.m]) {
				t.Errorf("%s: insn at %d loads fd %d, want %d", name, r.off, got, fds[r.m])
			}
		}
		if o.insns[:8] != string(insns[:8]) && o.relocs[0].off != 0 {
			t.Errorf("%s: patching changed an instruction without a relocation", name)
		}
		// Patching works on a copy: the object stays loadable again.
		if o.patched([]int{1, 2, 3, 4}); string(o.patched(fds)) != string(insns) {
			t.Errorf("%s: a second patch differs from the first", name)
		}
	}
}

// TestObjectGenCurrent: object_gen.go is exactly what the committed ELF
// objects make, so an object rebuilt by 'make bpf' cannot ship with the
// program of the one before (and ObjectTag is the objects' hash).
func TestObjectGenCurrent(t *testing.T) {
	le, err := os.ReadFile("codel_police_bpfel.o")
	if err != nil {
		t.Fatal(err)
	}
	be, err := os.ReadFile("codel_police_bpfeb.o")
	if err != nil {
		t.Fatal(err)
	}
	want, err := bpfobj.Generate(le, be)
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile("object_gen.go")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Error("object_gen.go is not what codel_police_bpf{el,eb}.o make: run 'go generate ./internal/codelpolice'")
	}
	if objectLE.tag != bpfobj.Tag(le) || objectBE.tag != bpfobj.Tag(be) {
		t.Errorf("tags %s/%s, want %s/%s", objectLE.tag, objectBE.tag, bpfobj.Tag(le), bpfobj.Tag(be))
	}
}

func TestParseCPUList(t *testing.T) {
	for _, c := range []struct {
		in   string
		want int
		bad  bool
	}{
		{"0", 1, false}, {"0-3\n", 4, false}, {"0-1,4-5", 6, false}, {"0,2", 3, false},
		{"", 0, true}, {"x", 0, true}, {"3-1", 0, true}, {"-1", 0, true}, {"0-", 0, true}, {"0-70000", 0, true},
	} {
		got, err := parseCPUList(c.in)
		if (err != nil) != c.bad || got != c.want {
			t.Errorf("parseCPUList(%q) = %d, %v", c.in, got, err)
		}
	}
}

func FuzzParseCPUList(f *testing.F) {
	for _, s := range []string{"0", "0-3", "0-1,4-5", "", "3-1", "0-,", "1,,2"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := parseCPUList(s)
		if err == nil && (n < 1 || n > 1<<16) {
			t.Errorf("parseCPUList(%q) = %d without error", s, n)
		}
	})
}

// TestSumPerCPU: two CPUs' slots added up; a program of an older sqm
// (fewer slots: the newer ones read 0) and of a newer one (more slots:
// ignored) are read by the slots they have.
func TestSumPerCPU(t *testing.T) {
	values := func(slots int) []byte {
		b := make([]byte, 2*slots*8)
		for cpu := 0; cpu < 2; cpu++ {
			for i := 0; i < slots; i++ {
				binary.NativeEndian.PutUint64(b[cpu*slots*8+8*i:], uint64(10*cpu+i+1))
			}
		}
		return b
	}
	all := Counters{Passed: 12, PassedBytes: 14, Marked: 16, MarkedBytes: 18, DroppedSignal: 20, DroppedSignalBytes: 22,
		DroppedLimit: 24, DroppedLimitBytes: 26, Spared: 28, NonIP: 30, SparedLimit: 32}
	older := all
	older.SparedLimit = 0
	for _, c := range []struct {
		slots int
		want  Counters
	}{{counterSlots, all}, {counterSlots - 1, older}, {counterSlots + 3, all}} {
		got, err := sumPerCPU(values(c.slots), 2, c.slots)
		if err != nil {
			t.Fatal(err)
		}
		if got != c.want {
			t.Errorf("%d slots: sum = %+v, want %+v", c.slots, got, c.want)
		}
	}
	if _, err := sumPerCPU(values(counterSlots)[:8], 2, counterSlots); err == nil {
		t.Error("short value accepted")
	}
	if _, err := sumPerCPU(nil, 2, 0); err == nil {
		t.Error("no slots accepted")
	}
}

// TestConfigBytes pins the layout struct config in codel_police.c reads.
func TestConfigBytes(t *testing.T) {
	p := &plan.CodelPolice{RateBits: 50e6, Target: 5 * time.Millisecond, Interval: 100 * time.Millisecond,
		Limit: 200 * time.Millisecond, MTU: 1514, ECN: true, Flows: false}
	b, err := configBytes(p, 14)
	if err != nil {
		t.Fatal(err)
	}
	e := binary.NativeEndian
	// 160 ns a byte at 50 Mbit/s, in 16.16 fixed point.
	if m := e.Uint64(b[0:]); m != 160<<16 {
		t.Errorf("mult = %d, want %d", m, 160<<16)
	}
	if e.Uint64(b[8:]) != 5e6 || e.Uint64(b[16:]) != 100e6 || e.Uint64(b[24:]) != 200e6 {
		t.Errorf("target/interval/limit = %d/%d/%d ns", e.Uint64(b[8:]), e.Uint64(b[16:]), e.Uint64(b[24:]))
	}
	if e.Uint64(b[32:]) != 1514*160 {
		t.Errorf("mtu time = %d ns, want %d", e.Uint64(b[32:]), 1514*160)
	}
	if e.Uint32(b[40:]) != flagECN || e.Uint32(b[44:]) != 14 {
		t.Errorf("flags %d l2len %d", e.Uint32(b[40:]), e.Uint32(b[44:]))
	}
	if _, err := configBytes(p, 18); err == nil || !strings.Contains(err.Error(), "link-layer header of 18") {
		t.Errorf("l2len 18: %v", err)
	}
	p.Target = 0
	if _, err := configBytes(p, 14); err == nil || !strings.Contains(err.Error(), "target") {
		t.Errorf("target 0: %v", err)
	}
}
