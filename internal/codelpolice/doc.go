// Package codelpolice loads and reads the codel_police eBPF program: a
// policer for a router's ingress hook that keeps a virtual queue drained
// at the configured rate and signals congestion along CoDel's control law,
// marking ECN-capable packets CE before it drops anything
// (codel_police.c; docs/codel-police.md has the design and the numbers).
//
// The program is compiled ahead of time for both byte orders
// (codel_police_bpfel.o, codel_police_bpfeb.o), so building sqm needs no
// clang; `make bpf` rebuilds them and `make test` checks that the committed
// objects are what clang makes from the source (scripts/check-bpf.sh).
// The binary does not carry the ELF objects: gen.go (package bpfobj, with
// debug/elf) turns them into object_gen.go, the instructions, maps and
// relocations ready to load, and TestObjectGenCurrent and check-bpf.sh
// fail when that file is not what the objects make. Parsing them at run
// time linked debug/elf, debug/dwarf, compress/*, internal/zstd and
// crypto/sha256 (for the tag) into the router build: 0.52 MB of its
// stripped linux/mipsle binary.
//
// The loader is sqm's own: bpf(2) through golang.org/x/sys/unix, legacy
// map definitions without BTF. github.com/cilium/ebpf v0.22.0 would have done
// the same and added 0.95 MB (arm64) to 1.11 MB (mipsle) to the stripped
// router binaries for the loader calls alone; the whole codel_police
// feature with this loader adds 68 kB (arm64) to 80 kB (mipsle) of code
// and data (measured on commit 9fe0323; docs/codel-police.md). The maps
// live only as long as the program, and
// the program as long as the tc filter holding it: deleting the ingress
// qdisc removes everything, nothing is pinned.
package codelpolice
