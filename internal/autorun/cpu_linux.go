package autorun

import (
	"runtime"

	"golang.org/x/sys/unix"
)

// lockThread wires the calling goroutine to its OS thread and returns a
// function, to be called by the same goroutine, that unlocks it and
// returns the CPU seconds (user + system) the kernel accounted to the
// thread in between (getrusage RUSAGE_THREAD). A locked thread runs no
// other goroutine, so this is the goroutine's own CPU, with the runtime
// work it does itself (GC assists of its allocations) and without the
// garbage collector's background workers.
func lockThread() func() float64 {
	runtime.LockOSThread()
	t0 := threadCPU()
	return func() float64 {
		d := threadCPU() - t0
		runtime.UnlockOSThread()
		return d
	}
}

func threadCPU() float64 {
	var ru unix.Rusage
	if unix.Getrusage(unix.RUSAGE_THREAD, &ru) != nil {
		return 0
	}
	return float64(ru.Utime.Sec+ru.Stime.Sec) + float64(ru.Utime.Usec+ru.Stime.Usec)/1e6
}
