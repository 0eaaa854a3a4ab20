package cli

import (
	"runtime"
	"runtime/debug"
)

// daemonGCPercent is the collector's pace in the daemon unless GOGC says
// otherwise (issue 24: at most 8 MB peak RSS on a router). The daemon's
// live heap is well under 1 MiB, but at Go's default (100) the first
// collection waits for a 4 MiB heap, so the garbage of start-up (config,
// plans, dumps, JSON state) stays resident; at 25 it comes at 1 MiB and
// the heap stays within about 1.25 times what is live.
//
// It replaced a 4 MiB soft memory limit (8 MiB while autorate ran). A
// limit counts the runtime's own memory beside the heap, and with that
// near the limit the heap goal was 0: in the lab's VM the collector ran
// 160 times in the daemon's first 4 s (about 45 times a second, at up to
// the runtime's cap of half the CPU) and about 3 of the 13 CPU seconds a
// 100 s idle autorate run cost were collections (docs/autorate.md, "The
// daemon as a router runs it"). A percentage has no such cliff: a larger
// live heap only makes collections rarer.
const daemonGCPercent = 25

// setDaemonGC applies daemonGCPercent unless GOGC is set (the runtime
// read that itself), and returns the percentage in force.
func setDaemonGC(getenv func(string) string) int {
	if getenv != nil && getenv("GOGC") != "" {
		p := debug.SetGCPercent(100)
		debug.SetGCPercent(p)
		return p
	}
	debug.SetGCPercent(daemonGCPercent)
	return daemonGCPercent
}

// setDaemonProcs runs the daemon's goroutines on one processor unless
// GOMAXPROCS says otherwise, and returns the count in force. The daemon
// does little at a time (the autorate loop's tick, the status file, a
// page request), and with one processor per core (four on an MT7621) the
// runtime woke idle ones to look for work at each of the loop's ten ticks
// a second: in the lab's VM (two cores) the whole daemon's CPU on the
// step trace fell from 2.74-3.00 s to 2.31-2.53 s with one.
func setDaemonProcs(getenv func(string) string) int {
	if getenv != nil && getenv("GOMAXPROCS") != "" {
		return runtime.GOMAXPROCS(0)
	}
	runtime.GOMAXPROCS(1)
	return 1
}
