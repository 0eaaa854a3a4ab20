//go:build sqm_noweb

package cli

// The logins are only for the web page; a build without it (-tags
// sqm_noweb) has no use for them.
func cmdPasswd() *command { return omitted("passwd", "sqm_noweb") }
