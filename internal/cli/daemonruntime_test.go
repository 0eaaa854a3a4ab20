package cli

import (
	"runtime"
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

func TestDaemonProcs(t *testing.T) {
	prev := runtime.GOMAXPROCS(4)
	defer runtime.GOMAXPROCS(prev)
	if got := setDaemonProcs(func(string) string { return "" }); got != 1 || runtime.GOMAXPROCS(0) != 1 {
		t.Errorf("without GOMAXPROCS: %d (runtime %d), want 1", got, runtime.GOMAXPROCS(0))
	}
	// GOMAXPROCS wins: the runtime read it at start; sqm leaves it alone.
	runtime.GOMAXPROCS(3)
	env := func(k string) string {
		if k == "GOMAXPROCS" {
			return "3"
		}
		return ""
	}
	if got := setDaemonProcs(env); got != 3 || runtime.GOMAXPROCS(0) != 3 {
		t.Errorf("with GOMAXPROCS=3: %d, want it left at 3", got)
	}
}
