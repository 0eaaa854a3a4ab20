//go:build darwin || freebsd

package cli

import (
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// isTerminal is term_linux.go's check with the BSD spelling of the
// request (TIOCGETA for Linux's TCGETS).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TIOCGETA)
	return err == nil
}
