//go:build !sqm_notest

package cli

import (
	"flag"
	"fmt"
	"strings"
)

// clientSecretFlags registers the flags a client of an 'sqm server' takes
// for its shared secret. `sqm test` and `sqm tune` both measure against
// one, so they take the secret the same way, and the server's own sources
// (serverSecret): a file or the environment keeps it out of ps.
func clientSecretFlags(fs *flag.FlagSet, secret, file *string) {
	fs.StringVar(secret, "secret", "", "shared secret of the 'sqm server'; visible in ps: prefer --secret-file or "+serverSecretEnv)
	fs.StringVar(file, "secret-file", "", "read the shared secret of the 'sqm server' from the first line of `FILE`")
}

// clientSecret resolves those flags for command cmd. With an iperf3 load
// server there is no sqm server to authenticate to: a secret from the
// environment (meant for sqm servers) is dropped, one given by flag is an
// error rather than silently unused. --secret itself works but warns.
func clientSecret(env *Env, fs *flag.FlagSet, cmd, secret, file, iperf3Addr string) (string, error) {
	secret, source, err := serverSecret(env, fs, secret, file)
	if err != nil {
		return "", err
	}
	if iperf3Addr != "" && source != "" {
		if source == serverSecretEnv {
			return "", nil
		}
		return "", usageError("%s is for an 'sqm server'; iperf3 servers' authentication is not supported", strings.Fields(source)[0])
	}
	if source == "--secret" {
		fmt.Fprintf(env.Stderr, "sqm %s: warning: --secret is visible to every user of this host (ps, /proc); use --secret-file or %s\n", cmd, serverSecretEnv)
	}
	return secret, nil
}
