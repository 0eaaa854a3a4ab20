//go:build sqm_notest

package irtt

// HMAC says whether this build signs and checks packets: not the router
// package's (see hmac.go). Keyed packets built here carry a zero HMAC,
// which a server drops, and keyed replies fail with ErrBadHMAC; callers
// refuse keys up front with ErrHMACOmitted.
const HMAC = false

func sign(key, b, mac []byte) {}

func verify(key, b []byte) bool { return false }
