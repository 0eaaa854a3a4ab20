//go:build !sqm_notest

package cli

import (
	"sqm/internal/bloat"
	"sqm/internal/irtt"
)

// irttOptions sets the irtt server and its HMAC key from --irtt,
// --irtt-hmac, --irtt-hmac-file or $SQM_IRTT_HMAC (in that order; the flag
// and the file exclude each other). The key is wanted off the command line
// because ps shows it there.
func irttOptions(env *Env, o *bloat.Options, addr, key, file string) error {
	if key != "" && file != "" {
		return usageError("--irtt-hmac and --irtt-hmac-file exclude each other")
	}
	if file != "" {
		var err error
		if key, err = readSecretFile("--irtt-hmac-file", file); err != nil {
			return err
		}
	}
	if key == "" {
		key = env.Getenv("SQM_IRTT_HMAC")
	}
	if key != "" && addr == "" {
		if file != "" || env.Getenv("SQM_IRTT_HMAC") == "" {
			return usageError("an irtt HMAC key needs --irtt HOST[:PORT]")
		}
		key = "" // the environment's key is for runs that use irtt
	}
	if addr == "" {
		return nil
	}
	if key != "" {
		k, err := irtt.ParseKey(key)
		if err != nil {
			return usageError("irtt HMAC key: %v", err)
		}
		o.IRTTKey = k
	}
	o.IRTT = addr
	return nil
}
