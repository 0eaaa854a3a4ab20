package service_test

import (
	"testing"

	"sqm/internal/clitest"
)

// TestMain lets the test binary act as the sqm command (clitest.Command), so
// that multi-process tests (concurrent starts, a daemon killed mid-apply) run
// the code under test without a separate build.
func TestMain(m *testing.M) { clitest.Main(m) }
