//go:build ignore

// gen writes object_gen.go from the committed eBPF objects (go generate,
// run by scripts/check-bpf.sh -w); with -check it fails if object_gen.go
// is not what the objects make (scripts/check-bpf.sh, TestObjectGenCurrent).
package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"

	"sqm/internal/codelpolice/bpfobj"
)

func main() {
	check := flag.Bool("check", false, "fail if object_gen.go is stale instead of writing it")
	flag.Parse()
	le, err := os.ReadFile("codel_police_bpfel.o")
	if err == nil {
		var be []byte
		if be, err = os.ReadFile("codel_police_bpfeb.o"); err == nil {
			var src []byte
			if src, err = bpfobj.Generate(le, be); err == nil {
				if *check {
					old, _ := os.ReadFile("object_gen.go")
					if !bytes.Equal(old, src) {
						err = fmt.Errorf("object_gen.go is not what codel_police_bpf{el,eb}.o make; run 'go generate ./internal/codelpolice'")
					}
				} else {
					err = os.WriteFile("object_gen.go", src, 0o644)
				}
			}
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "codelpolice gen:", err)
		os.Exit(1)
	}
}
