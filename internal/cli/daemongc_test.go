package cli

import (
	"runtime/debug"
	"testing"
)

func TestDaemonGC(t *testing.T) {
	prev := debug.SetGCPercent(100)
	defer debug.SetGCPercent(prev)
	if got := setDaemonGC(func(string) string { return "" }); got != daemonGCPercent || debug.SetGCPercent(100) != daemonGCPercent {
		t.Errorf("without GOGC: %d, want %d", got, daemonGCPercent)
	}
	// GOGC wins: the runtime read it at start; sqm leaves it alone.
	debug.SetGCPercent(60)
	env := func(k string) string {
		if k == "GOGC" {
			return "60"
		}
		return ""
	}
	if got := setDaemonGC(env); got != 60 || debug.SetGCPercent(100) != 60 {
		t.Errorf("with GOGC=60: %d, want it left at 60", got)
	}
}
