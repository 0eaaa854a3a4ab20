//go:build !linux

package autorun

// lockThread: no per-thread accounting outside Linux (autorate runs on
// routers); the loop reports 0 CPU seconds.
func lockThread() func() float64 { return func() float64 { return 0 } }
