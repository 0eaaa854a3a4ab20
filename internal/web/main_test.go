package web_test

import (
	"testing"

	"sqm/internal/clitest"
)

// TestMain lets the test binary run as sqm (clitest.Command): the VM test
// starts the daemon without a go build inside the emulated guest, which
// would take minutes.
func TestMain(m *testing.M) { clitest.Main(m) }
