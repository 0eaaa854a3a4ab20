//go:build !linux || sqm_notest

package cli

// sqm tune shapes the interface (Linux's netlink) and measures with the
// tester, so it needs Linux and a build with the tester.
func cmdTune() *command { return linuxPart("tune", "sqm_notest") }
