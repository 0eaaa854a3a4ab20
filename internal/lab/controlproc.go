package lab

import (
	"context"
	"fmt"
	"os/exec"
	"syscall"
	"time"
)

// A controller run as a process of its own (sqm's daemon, cake-autorate)
// is started in its own process group, waited for by a goroutine that
// sends Wait's error on done, and started and ended the same way.

// waitStarted polls ready every 50 ms until it says the controller runs.
// It fails when ready does, when the process exits first (its error is
// put back on done for the one who ends it), when ctx ends, or after
// timeout; name and tail (the end of its log) go in the error.
func waitStarted(ctx context.Context, name string, done chan error, timeout time.Duration, ready func() (bool, error), tail func() string) error {
	for deadline := time.Now().Add(timeout); ; {
		ok, err := ready()
		if err != nil || ok {
			return err
		}
		select {
		case err := <-done:
			done <- err
			return fmt.Errorf("%s exited at start (%v): %s", name, err, tail())
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s not running after %v: %s", name, timeout, tail())
		}
	}
}

// endProcess ends the controller as a service manager would: SIGTERM,
// then after 20 s SIGKILL to its group (killed), and SIGKILL to whatever
// of the group outlived it. Its CPU time and peak RSS are wait4's.
func endProcess(cmd *exec.Cmd, done chan error) (st ControlStats, werr error, killed bool) {
	pid := cmd.Process.Pid
	_ = syscall.Kill(pid, syscall.SIGTERM)
	select {
	case werr = <-done:
	case <-time.After(20 * time.Second):
		_ = syscall.Kill(-pid, syscall.SIGKILL)
		werr, killed = <-done, true
	}
	_ = syscall.Kill(-pid, syscall.SIGKILL) // what outlived it
	if ps := cmd.ProcessState; ps != nil {
		st.CPUSeconds = (ps.UserTime() + ps.SystemTime()).Seconds()
		if ru, ok := ps.SysUsage().(*syscall.Rusage); ok {
			st.MaxRSSKB = int64(ru.Maxrss)
		}
	}
	return st, werr, killed
}
