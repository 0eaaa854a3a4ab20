//go:build !sqm_notest && !sqm_notls

package cli

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"time"

	"sqm/internal/rpm"
)

// run runs the RPM test if --rpm (or one of its companions) was given and
// reports whether it did; test.go goes on with the bufferbloat test
// otherwise.
func (r *rpmTestFlags) run(ctx context.Context, env *Env, fs *flag.FlagSet, args []string,
	duration time.Duration, v4, v6, jsonOut, quiet bool, secret, secretFile string) (bool, error) {
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if r.url == "" {
		for _, n := range rpmCompanions {
			if set[n] {
				return true, usageError("--%s only applies to --rpm", n)
			}
		}
		return false, nil
	}
	for n := range set {
		if !rpmAllowed[n] {
			return true, usageError("--%s does not apply to --rpm (an RPM test follows the IETF draft's own procedure)", n)
		}
	}
	if len(args) != 0 {
		return true, usageError("--rpm takes the server from its URL; drop %q", args)
	}
	u, err := rpm.ConfigURL(r.url)
	if err != nil {
		return true, usageError("%v", err)
	}
	// An 'sqm server --rpm' with a secret serves under a path derived
	// from it; the secret comes from where the bufferbloat test takes it.
	secret, err = clientSecret(env, fs, "test", secret, secretFile, "")
	if err != nil {
		return true, err
	}
	o := rpm.Options{URL: u, Insecure: r.insecure, Direction: r.direction, Duration: duration, Secret: secret}
	switch r.direction {
	case "both", "down", "up":
	default:
		return true, usageError("--rpm-load %q: use both, down or up", r.direction)
	}
	switch {
	case v4 && v6:
		return true, usageError("-4 and -6 exclude each other")
	case v4:
		o.Network = "tcp4"
	case v6:
		o.Network = "tcp6"
	}
	if duration != 0 && duration < 8*time.Second {
		return true, usageError("--duration %v: an RPM test needs at least 8s (two moving-average windows of 4 one-second intervals)", duration)
	}
	if r.caFile != "" {
		if r.insecure {
			return true, usageError("--ca and --insecure exclude each other")
		}
		pem, err := os.ReadFile(r.caFile)
		if err != nil {
			return true, fmt.Errorf("--ca: %w", err)
		}
		o.RootCAs = x509.NewCertPool()
		if !o.RootCAs.AppendCertsFromPEM(pem) {
			return true, fmt.Errorf("--ca %s: no PEM certificate in it", r.caFile)
		}
	}
	st := newStatus(env, quiet)
	o.Logf = st.logf
	res, err := rpm.Run(ctx, o)
	if err != nil {
		if ctx.Err() != nil && errors.Is(err, context.Canceled) {
			return true, errors.New("interrupted; no result (the run must finish to be summarised)")
		}
		return true, err
	}
	if jsonOut {
		return true, rpm.JSON(env.Stdout, res)
	}
	return true, rpm.Text(env.Stdout, res)
}

// start validates the flags and starts the RPM server if --rpm was given;
// the returned function stops it and waits for it.
func (r *rpmServerFlags) start(ctx context.Context, maxDuration time.Duration, secret string, logf func(string, ...any)) (func(), error) {
	if r.addr == "" {
		if r.cert != "" || r.key != "" {
			return nil, usageError("--rpm-cert and --rpm-key only apply to --rpm")
		}
		return func() {}, nil
	}
	if (r.cert == "") != (r.key == "") {
		return nil, usageError("--rpm-cert and --rpm-key go together")
	}
	var cert tls.Certificate
	var err error
	how := ""
	if r.cert != "" {
		if cert, err = tls.LoadX509KeyPair(r.cert, r.key); err != nil {
			return nil, fmt.Errorf("--rpm-cert/--rpm-key: %w", err)
		}
		how = "certificate " + r.cert
	} else {
		if cert, err = rpm.SelfSigned(); err != nil {
			return nil, err
		}
		how = "self-signed certificate (clients need --insecure), SHA-256 " + rpm.Fingerprint(&cert)
	}
	ctx, cancel := context.WithCancel(ctx)
	ln, err := rpm.Listen(ctx, r.addr)
	if err != nil {
		cancel()
		return nil, fmt.Errorf("--rpm %s: %w", r.addr, err)
	}
	// With a secret, the URL logged is the credential: the operator hands
	// it to clients that cannot derive it (goresponsiveness,
	// networkQuality); it is not the secret itself (see rpm.PathToken).
	access := "no secret: anyone who can reach it may test"
	if secret != "" {
		access = "secret: other paths get 404"
	}
	logf("sqm server: rpm: listening on https://%s%s%s (%s; %s); transfers end after %v", ln.Addr(), rpm.PathPrefix(secret), rpm.WellKnownPath, how, access, maxDuration)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := rpm.Serve(ctx, ln, rpm.ServerOptions{Cert: &cert, MaxDuration: maxDuration, Secret: secret, Logf: logf}); err != nil && !errors.Is(err, net.ErrClosed) {
			logf("sqm server: rpm: %v", err)
		}
	}()
	return func() { cancel(); <-done }, nil
}
