//go:build sqm_notest

package cli

// A router build may leave out the bufferbloat tester (-tags sqm_notest):
// `sqm test` and `sqm server` then drop internal/bloat, internal/plot and
// internal/report from the binary. A router is rarely the place to test
// from; run the tester on a machine behind it.

func cmdTest() *command   { return omitted("test", "sqm_notest") }
func cmdServer() *command { return omitted("server", "sqm_notest") }
