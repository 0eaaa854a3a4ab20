//go:build !sqm_notest

package irtt

import (
	"crypto/hmac"
	"crypto/md5"
)

// HMAC says whether this build signs and checks packets. The router
// package (-tags sqm_notest) does not: crypto/md5 and crypto/hmac bring
// Go's FIPS module along, which that build links nowhere else (measured
// on mipsle, 2026-12-02: about 150 KB of text and 33 MB of bss); its
// autorate probes unkeyed irtt servers only.
const HMAC = true

// sign writes the HMAC-MD5 with key of b (whose HMAC field is zero) to mac.
func sign(key, b, mac []byte) {
	m := hmac.New(md5.New, key)
	m.Write(b)
	copy(mac, m.Sum(nil))
}

// verify checks the HMAC of packet b, computed with its HMAC field zeroed.
func verify(key, b []byte) bool {
	var got, zero [hmacLen]byte
	copy(got[:], b[headerLen:])
	m := hmac.New(md5.New, key)
	m.Write(b[:headerLen])
	m.Write(zero[:])
	m.Write(b[headerLen+hmacLen:])
	return hmac.Equal(m.Sum(nil), got[:])
}
