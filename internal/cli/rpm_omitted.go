//go:build !sqm_notest && sqm_notls

package cli

import (
	"context"
	"flag"
	"slices"
	"time"
)

// Without TLS there is no RPM test: the IETF draft's clients and servers
// speak HTTP/2 over TLS, and crypto/tls with net/http costs about 3.5 MB
// on a MIPS router, half of sqm-full's budget (docs/testing.md, "Package
// sizes"). The flags stay, so a script that passes them learns why
// rather than reading "flag provided but not defined".
const rpmOmitted = "is not in this build (built with -tags sqm_notls: RPM needs TLS and HTTP/2, which sqm-full leaves out; the developer build has it)"

func (r *rpmTestFlags) run(ctx context.Context, env *Env, fs *flag.FlagSet, args []string,
	duration time.Duration, v4, v6, jsonOut, quiet bool, secret, secretFile string) (bool, error) {
	var given string
	fs.Visit(func(f *flag.Flag) {
		if given == "" && (f.Name == "rpm" || slices.Contains(rpmCompanions, f.Name)) {
			given = f.Name
		}
	})
	if given != "" {
		return true, usageError("--%s: RPM %s", given, rpmOmitted)
	}
	return false, nil
}

func (r *rpmServerFlags) start(ctx context.Context, maxDuration time.Duration, secret string, logf func(string, ...any)) (func(), error) {
	if r.addr == "" && r.cert == "" && r.key == "" {
		return func() {}, nil
	}
	return nil, usageError("--rpm: RPM %s", rpmOmitted)
}
