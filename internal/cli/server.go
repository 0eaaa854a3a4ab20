//go:build !sqm_notest

package cli

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"os"
	"strings"
	"time"

	"sqm/internal/bloat"
	"sqm/internal/netperf"
	"sqm/internal/units"
)

// serverSecretEnv names the environment variable `sqm server` takes its
// secret from when no flag gives one: unlike a flag, it does not show in ps.
const serverSecretEnv = "SQM_SERVER_SECRET"

// maxSecretLen bounds a secret file, so a wrong path (a log, /dev/zero) is
// an error rather than a huge read.
const maxSecretLen = 1024

func cmdServer() *command {
	var (
		listen       string
		maxDuration  time.Duration
		maxStreams   int
		maxClients   int
		perAddr      int
		handshakes   int
		handshakesPA int
		hsTimeout    time.Duration
		secret       string
		secretFile   string
		rpmSrv       rpmServerFlags
		netperfSrv   netperfFlag
	)
	return &command{
		name:    "server",
		summary: "serve load and latency probes for 'sqm test' clients",
		usage:   "sqm server [--listen ADDR] [--netperf[=ADDR]] [--secret-file FILE] [--max-clients N] [--max-clients-per-addr N] [limits...]",
		help: fmt.Sprintf(`Runs the far end of 'sqm test': TCP load in both directions, UDP latency
probes answered with server timestamps, and a small control protocol.

By default it listens on ALL ADDRESSES, TCP and UDP port %d (IPv4 and IPv6),
because a test server has to be reached from beyond the router under test;
open both in the firewall. Without a secret anyone who can reach the port
can run tests (each is bounded by the limits below); give one with
--secret-file or the %s environment variable, or bind to one
address with --listen (e.g. --listen 127.0.0.1:%d for local use).

Limits against abuse: each address (IPv6: each /64) may run
--max-clients-per-addr tests at once and hold --max-handshakes-per-addr
connections that have not yet said what they are, out of --max-handshakes
for all strangers; a running test's load streams are counted against its
own session, so strangers cannot block them. Refusals are logged once per
reason per 10 s, with a count. It only ever sends to the peer of a
connection it accepted. Stop it with Ctrl-C or SIGTERM.

--rpm ADDR also serves responsiveness clients (IETF draft; 'sqm test --rpm',
Apple's networkQuality -C, goresponsiveness) over HTTP/2 and TLS: the
configuration at /.well-known/nq and its three objects. Without
--rpm-cert/--rpm-key the certificate is self-signed, made at start, and
clients must skip its verification (see 'sqm help test'). With a secret,
every RPM endpoint is under a path derived from it (the start-up line
prints the configuration URL to give other clients, goresponsiveness or
Apple's networkQuality; 'sqm test --rpm' derives it from the secret) and
any other path gets an empty 404. Per address (IPv6: /64) it keeps 256
connections (a new one replaces the one idle longest), 256 requests and
64 transfers at once; a transfer that moves nothing for 10 s is ended.

--netperf also answers netperf clients (netperf 2.6 or later, flent's
RRUL, betterspeedtest.sh) as netserver does, on TCP port %d of the
--listen host or on --netperf=ADDR: omni TCP_STREAM, TCP_MAERTS, TCP_RR
and UDP_RR tests in seconds (-l), each on a data port the server picks
on the control connection's address, open to that peer only. The tests
an address runs at once are one test of this server's: --max-streams of
them, --max-duration each and, from the first to the last, no longer
than --max-duration plus 30 s. With a secret a netperf client must give
-Z PASSPHRASE (printed at start; netperf sends it in clear); flent and
betterspeedtest.sh cannot, so run those against a server without one.
Off by default: a stock netperf client can prove no secret.

Example, on a host beyond the router:

  $ head -c 24 /dev/urandom | base64 > /etc/sqm-server.secret
  $ sqm server --secret-file /etc/sqm-server.secret --max-clients 2
  sqm server: listening on [::]:%d (tcp and udp); ...`, bloat.DefaultPort, serverSecretEnv, bloat.DefaultPort, netperf.DefaultPort, bloat.DefaultPort),
		flags: func(fs *flag.FlagSet) {
			fs.StringVar(&listen, "listen", fmt.Sprintf(":%d", bloat.DefaultPort), "`address` to listen on, TCP and UDP; the default is every address (e.g. 192.0.2.1:12866, [::1]:9000)")
			units.DurationVar(fs, &maxDuration, "max-duration", 3*time.Minute, "longest test a client may run, idle lead and tail included (a session may last up to 30s longer while the client drains its uploads)")
			fs.IntVar(&maxStreams, "max-streams", 16, "most concurrent load streams per client")
			fs.IntVar(&maxClients, "max-clients", 4, "most clients testing at once")
			fs.IntVar(&perAddr, "max-clients-per-addr", 1, "most tests at once from one address (IPv6: one /64)")
			fs.IntVar(&handshakes, "max-handshakes", 128, "most connections from addresses without a test that may be in handshake at once")
			fs.IntVar(&handshakesPA, "max-handshakes-per-addr", 8, "most of those from one address (IPv6: one /64)")
			units.DurationVar(fs, &hsTimeout, "handshake-timeout", 5*time.Second, "time a connection has to finish its handshake")
			fs.StringVar(&secretFile, "secret-file", "", "read the shared secret clients must know from the first line of `FILE`")
			fs.StringVar(&secret, "secret", "", "shared secret clients must know (sent as an HMAC, never in clear); visible in ps: prefer --secret-file or "+serverSecretEnv)
			rpmSrv.register(fs)
			fs.Var(&netperfSrv, "netperf", fmt.Sprintf("also answer netperf clients (flent, betterspeedtest.sh) on TCP port %d of the --listen host, or on --netperf=`ADDR`", netperf.DefaultPort))
		},
		run: func(ctx context.Context, env *Env, fs *flag.FlagSet, args []string) error {
			if len(args) > 0 {
				if netperfSrv.on && netperfSrv.addr == "" {
					return usageError("server takes no arguments, got %q (--netperf takes its address with '=': --netperf=%s)", args, args[0])
				}
				return usageError("server takes no arguments, got %q", args)
			}
			if maxDuration <= 0 || maxStreams <= 0 || maxClients <= 0 || perAddr <= 0 || handshakes <= 0 || handshakesPA <= 0 || hsTimeout <= 0 {
				return usageError("--max-duration, --max-streams, --max-clients, --max-clients-per-addr, --max-handshakes, --max-handshakes-per-addr and --handshake-timeout must be positive")
			}
			if perAddr > maxClients {
				return usageError("--max-clients-per-addr %d exceeds --max-clients %d", perAddr, maxClients)
			}
			if handshakesPA > handshakes {
				return usageError("--max-handshakes-per-addr %d exceeds --max-handshakes %d", handshakesPA, handshakes)
			}
			logger := log.New(env.Stderr, "", log.LstdFlags)
			secret, source, err := serverSecret(env, fs, secret, secretFile)
			if err != nil {
				return err
			}
			if source == "--secret" {
				logger.Printf("sqm server: warning: --secret is visible to every user of this host (ps, /proc); use --secret-file or %s", serverSecretEnv)
			}
			stopRPM, err := rpmSrv.start(ctx, maxDuration, secret, logger.Printf)
			if err != nil {
				return err
			}
			defer stopRPM()
			lim := bloat.Limits{MaxDuration: maxDuration, MaxStreams: maxStreams, MaxClients: maxClients, Secret: secret,
				MaxClientsPerAddr: perAddr, MaxHandshakes: handshakes, MaxHandshakesPerAddr: handshakesPA, HandshakeTimeout: hsTimeout}
			srv := bloat.NewServer(lim, logger.Printf)
			stopNetperf, err := netperfSrv.start(ctx, listen, srv, lim, logger.Printf)
			if err != nil {
				return err
			}
			defer stopNetperf()
			err = srv.ListenAndServe(ctx, "tcp", listen, func(a net.Addr) {
				auth := "no secret: anyone who can reach it may test"
				if secret != "" {
					auth = "secret from " + source
				}
				logger.Printf("sqm server: listening on %s (tcp and udp)%s; %s; limits: %v per test, %d streams per client, %d clients, %d per address",
					a, everyAddress(a), auth, maxDuration, maxStreams, maxClients, perAddr)
			})
			if err != nil {
				return err
			}
			logger.Printf("sqm server: stopped")
			return nil
		},
	}
}

// netperfFlag is --netperf: off by default, since a stock netperf client
// can prove no secret (only send a passphrase in clear) and a netserver
// port is one more a stranger can load the uplink through. Given alone it
// serves netserver's port on the --listen host; --netperf=ADDR names the
// address. (A boolean flag, so --netperf ADDR with a space is an
// argument, which `sqm server` refuses.)
type netperfFlag struct {
	on   bool
	addr string
}

func (f *netperfFlag) String() string {
	switch {
	case f == nil || !f.on:
		return ""
	case f.addr == "":
		return "true"
	}
	return f.addr
}

func (f *netperfFlag) Set(v string) error {
	switch v {
	case "true":
		f.on, f.addr = true, ""
	case "false":
		f.on, f.addr = false, ""
	default:
		if _, _, err := net.SplitHostPort(v); err != nil {
			return fmt.Errorf("want HOST:PORT or :PORT (e.g. :12865, 192.0.2.1:12865), got %q", v)
		}
		f.on, f.addr = true, v
	}
	return nil
}

func (f *netperfFlag) IsBoolFlag() bool { return true }

// start listens (so a taken port is an error before the server starts)
// and serves netperf clients beside srv, sharing its admission; the
// returned func stops it and waits for its tests to end.
func (f *netperfFlag) start(ctx context.Context, listen string, srv *bloat.Server, lim bloat.Limits, logf func(string, ...any)) (func(), error) {
	if !f.on {
		return func() {}, nil
	}
	addr := f.addr
	if addr == "" {
		host, _, err := net.SplitHostPort(listen)
		if err != nil {
			return nil, usageError("--listen %q: %v", listen, err)
		}
		addr = net.JoinHostPort(host, fmt.Sprint(netperf.DefaultPort))
	}
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--netperf: listen tcp %s: %w (is netserver running? choose another with --netperf=ADDR)", addr, err)
	}
	auth := "no secret: anyone who can reach it may run netperf tests"
	if lim.Secret != "" {
		auth = "netperf clients must give -Z " + netperf.Passphrase(lim.Secret) + " (sent in clear; it opens netperf tests only)"
	}
	logf("sqm server: netperf: listening on %s (tcp)%s; %s; limits: %v per test, %d tests per address at once", ln.Addr(), everyAddress(ln.Addr()), auth, lim.MaxDuration, lim.MaxStreams)
	s := netperf.NewServer(netperf.ServerConfig{Gate: srv, MaxDuration: lim.MaxDuration, MaxTests: lim.MaxStreams,
		HandshakeTimeout: lim.HandshakeTimeout, Secret: lim.Secret, SetDSCP: bloat.SetDSCP})
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := s.Serve(ctx, ln); err != nil {
			logf("sqm server: netperf: %v", err)
		}
	}()
	return func() { cancel(); <-done }, nil
}

// everyAddress notes when the server is reachable on all of the host's
// addresses, so nobody runs a public server without knowing it.
func everyAddress(a net.Addr) string {
	if ta, ok := a.(*net.TCPAddr); ok && ta.IP.IsUnspecified() {
		return ", on every address of this host"
	}
	return ""
}

// serverSecret picks the secret from --secret-file, --secret or the
// environment: a flag wins over the environment, and giving both flags is
// an error. It returns where the secret came from, for the log. `sqm
// server` and `sqm test` both use it, so the two ends of a test read one
// file or variable the same way.
func serverSecret(env *Env, fs *flag.FlagSet, flagSecret, file string) (secret, source string, err error) {
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	switch {
	case set["secret"] && set["secret-file"]:
		return "", "", usageError("give the secret with --secret or --secret-file, not both")
	case set["secret-file"]:
		s, err := readSecretFile("--secret-file", file)
		return s, "--secret-file " + file, err
	case set["secret"]:
		if flagSecret == "" {
			return "", "", usageError("--secret is empty; leave it out to run without a secret")
		}
		return flagSecret, "--secret", nil
	}
	if s := env.Getenv(serverSecretEnv); s != "" {
		return s, serverSecretEnv, nil
	}
	return "", "", nil
}

// readSecretFile returns the first line of path, which must be the only
// one; a trailing newline (as editors and echo write) is not part of it.
// flagName (--secret-file, --irtt-hmac-file) says in errors which flag
// named the file. Every secret or key file goes through here, so all are
// bounded and refuse extra lines alike.
func readSecretFile(flagName, path string) (string, error) {
	if path == "" {
		return "", usageError("%s needs a file name", flagName)
	}
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("%s: %w", flagName, err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxSecretLen+2))
	if err != nil {
		return "", fmt.Errorf("%s %s: %w", flagName, path, err)
	}
	s := strings.TrimSuffix(strings.TrimSuffix(string(b), "\n"), "\r")
	switch {
	case len(s) > maxSecretLen:
		return "", fmt.Errorf("%s %s: longer than %d bytes; is it the right file?", flagName, path, maxSecretLen)
	case s == "":
		return "", fmt.Errorf("%s %s: empty; put the secret on its first line", flagName, path)
	case strings.ContainsAny(s, "\r\n"):
		return "", fmt.Errorf("%s %s: more than one line; put only the secret in it", flagName, path)
	}
	return s, nil
}
