package main

import (
	"testing"

	"golang.org/x/sys/unix"
)

// TestDisableTHP checks that disableTHP sets the process's THP-disable
// flag, which the kernel then applies to every later page fault.
func TestDisableTHP(t *testing.T) {
	disableTHP()
	v, err := unix.PrctlRetInt(unix.PR_GET_THP_DISABLE, 0, 0, 0, 0)
	if err != nil {
		t.Skipf("kernel has no PR_GET_THP_DISABLE: %v", err)
	}
	if v != 1 {
		t.Errorf("PR_GET_THP_DISABLE = %d after disableTHP; want 1", v)
	}
}
