// Command vmrun boots the test VM (internal/vm: Debian's kernel under qemu,
// the host root shared read-only) and runs one command in it, for scripts
// such as bench-start.sh that need the VM's kernel modules (cake, ifb,
// dummy) and want to measure inside it. The command's output streams to
// stdout; its exit status becomes vmrun's.
//
//	go run ./scripts/vmrun [-out DIR] [-timeout 30m] -- CMD [ARG...]
//
// DIR is shared writable at /run/sqm-out inside (host /tmp is not visible
// there). Run it under `flock /tmp/sqm-vm.lock` when others share the
// machine: one VM at a time.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"time"

	"sqm/internal/vm"
)

func main() {
	out := flag.String("out", "", "host `dir` shared writable at "+vm.GuestOutDir+" in the VM")
	timeout := flag.Duration("timeout", 30*time.Minute, "bound on the whole run, boot included")
	flag.Usage = func() {
		fmt.Fprintf(os.Stderr, "usage: go run ./scripts/vmrun [-out DIR] [-timeout D] -- CMD [ARG...]\n")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() == 0 {
		flag.Usage()
		os.Exit(2)
	}
	res, err := vm.Boot(context.Background(), vm.Config{
		Command: flag.Args(), OutDir: *out, Timeout: *timeout, Stdout: os.Stdout,
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "vmrun:", err)
		os.Exit(1)
	}
	fmt.Fprintf(os.Stderr, "vmrun: boot %v, total %v, exit %d\n", res.Boot.Round(time.Millisecond), res.Total.Round(time.Millisecond), res.ExitCode)
	os.Exit(res.ExitCode)
}
