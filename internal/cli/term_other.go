//go:build !linux && !darwin && !freebsd && !windows

package cli

import "io"

// isTerminal is false where sqm has no terminal check: the progress line
// is then left out, which only costs the live display.
func isTerminal(w io.Writer) bool { return false }
