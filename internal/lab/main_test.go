package lab_test

import (
	"testing"

	"sqm/internal/clitest"
	"sqm/internal/lab"
)

// TestMain lets this test binary be the sqm the lab runs as its
// autorate daemon (lab.SQM), as `sqm lab` runs itself.
func TestMain(m *testing.M) {
	lab.SQM = func() (string, []string, error) { return clitest.Binary(), clitest.Env(), nil }
	clitest.Main(m)
}
