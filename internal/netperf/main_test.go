//go:build linux

package netperf_test

import (
	"testing"

	"sqm/internal/clitest"
)

// TestMain lets the test binary stand in for sqm (clitest.Command), so the
// namespace tests run the real `sqm server --netperf` and `sqm test`.
func TestMain(m *testing.M) { clitest.Main(m) }
