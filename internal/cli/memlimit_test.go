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

// TestAutorateMemoryLimit: the limit is 8 MiB while autorate loops run
// and back to the daemon's 4 MiB without; GOMEMLIMIT still wins.
func TestAutorateMemoryLimit(t *testing.T) {
	prev := debug.SetMemoryLimit(math.MaxInt64)
	defer debug.SetMemoryLimit(prev)
	on := autorateLimit(func(string) string { return "" })
	on(2)
	if got := debug.SetMemoryLimit(-1); got != autorateMemoryLimit {
		t.Errorf("with 2 loops: limit %d, want %d", got, autorateMemoryLimit)
	}
	on(0)
	if got := debug.SetMemoryLimit(-1); got != daemonMemoryLimit {
		t.Errorf("with none: limit %d, want %d", got, daemonMemoryLimit)
	}
	debug.SetMemoryLimit(64 << 20)
	autorateLimit(func(k string) string {
		if k == "GOMEMLIMIT" {
			return "64MiB"
		}
		return ""
	})(1)
	if got := debug.SetMemoryLimit(-1); got != 64<<20 {
		t.Errorf("with GOMEMLIMIT: limit %d, want it left at %d", got, 64<<20)
	}
}
