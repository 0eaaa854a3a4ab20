package cli

import (
	"io"
	"os"

	"golang.org/x/sys/windows"
)

// isTerminal reports whether w is a console, which answers
// GetConsoleMode; pipes and files (and mintty without ConPTY) do not, and
// get only the result.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	var mode uint32
	return windows.GetConsoleMode(windows.Handle(f.Fd()), &mode) == nil
}
