//go:build !linux || sqm_noweb

package cli

// sqm passwd writes logins for the daemon's web page: Linux only, and left
// out with the page (-tags sqm_noweb).
func cmdPasswd() *command { return linuxPart("passwd", "sqm_noweb") }
