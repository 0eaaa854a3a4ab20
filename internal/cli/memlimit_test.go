package cli

import (
	"math"
	"runtime/debug"
	"testing"
)

func TestDaemonMemoryLimit(t *testing.T) {
	prev := debug.SetMemoryLimit(math.MaxInt64)
	defer debug.SetMemoryLimit(prev)
	if got := setDaemonMemoryLimit(func(string) string { return "" }); got != daemonMemoryLimit || debug.SetMemoryLimit(-1) != daemonMemoryLimit {
		t.Errorf("without GOMEMLIMIT: limit %d (runtime %d), want %d", got, debug.SetMemoryLimit(-1), daemonMemoryLimit)
	}
	// GOMEMLIMIT wins: the runtime read it at start; sqm leaves it alone.
	debug.SetMemoryLimit(64 << 20)
	env := func(k string) string {
		if k == "GOMEMLIMIT" {
			return "64MiB"
		}
		return ""
	}
	if got := setDaemonMemoryLimit(env); got != 64<<20 || debug.SetMemoryLimit(-1) != 64<<20 {
		t.Errorf("with GOMEMLIMIT: limit %d, want %d", got, 64<<20)
	}
}
