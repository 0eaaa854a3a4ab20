package cli

import "runtime/debug"

// daemonMemoryLimit is the soft memory limit the daemon runs under unless
// GOMEMLIMIT says otherwise (issue 24: at most 8 MB peak RSS on a
// router). The daemon's live heap is well under 1 MiB, but without a limit
// the first collection waits for a 4 MiB heap, so the garbage of start-up
// (config, plans, dumps, JSON state) stays resident: with the limit the
// peak anonymous memory of `sqm daemon` shaping one interface fell from
// 2.9 to 2.35 MB (amd64, 5 runs each; limits of 2 to 4 MiB measured the
// same, 6 MiB no better than none). It is soft: a larger live heap only
// makes the collector run more often, and the runtime caps that at about
// half the CPU, a state a daemon this size does not reach.
const daemonMemoryLimit = 4 << 20

// setDaemonMemoryLimit applies daemonMemoryLimit unless GOMEMLIMIT is
// set, and returns the limit in force.
func setDaemonMemoryLimit(getenv func(string) string) int64 {
	if getenv != nil && getenv("GOMEMLIMIT") != "" {
		return debug.SetMemoryLimit(-1)
	}
	debug.SetMemoryLimit(daemonMemoryLimit)
	return daemonMemoryLimit
}

// autorateMemoryLimit is the soft limit while the daemon runs autorate:
// under daemonMemoryLimit the collector ran 21 times a second with one
// autorate loop (amd64, idle, GODEBUG=gctrace=1: heap goal 0 MB, the
// runtime's own memory beside the heap at the limit), and the daemon used
// 31-44 ms of CPU a second instead of 3; at 8 MiB it collected 10 times in
// 35 s and used 9 ms a second (all of it, autorate's loop and probes
// included).
const autorateMemoryLimit = 8 << 20

// autorateLimit returns the Daemon.OnAutorate hook: the daemon's memory
// limit follows whether any autorate loop runs, unless GOMEMLIMIT set it.
func autorateLimit(getenv func(string) string) func(loops int) {
	if getenv != nil && getenv("GOMEMLIMIT") != "" {
		return func(int) {}
	}
	return func(loops int) {
		if loops > 0 {
			debug.SetMemoryLimit(autorateMemoryLimit)
		} else {
			debug.SetMemoryLimit(daemonMemoryLimit)
		}
	}
}
