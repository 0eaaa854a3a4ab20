package lab

import "os"

// SQM is how the lab runs sqm as a separate process (`sqm daemon` for
// the autorate runs): the program and its environment. By default this
// very program; a test binary that stands in for sqm (internal/clitest)
// sets its own.
var SQM = func() (path string, env []string, err error) {
	p, err := os.Executable()
	return p, os.Environ(), err
}
