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
