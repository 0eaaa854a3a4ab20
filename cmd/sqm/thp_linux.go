package main

import "golang.org/x/sys/unix"

// disableTHP stops the kernel from backing sqm's memory with transparent
// huge pages. Each huge page fault zeroes 2 MB, while a start's whole heap
// is under 1 MB; with THP "always" (Debian's kernel) a `sqm start` took
// three such faults, measured in the VM as clear_huge_page in a fifth of
// its CPU samples. The runtime has faulted its first arena in by the time
// main runs; this spares the later faults. A kernel that refuses (older
// than 3.15, or a seccomp filter) only costs that speed, so the error is
// ignored.
func disableTHP() {
	_ = unix.Prctl(unix.PR_SET_THP_DISABLE, 1, 0, 0, 0)
}
