package cli

import (
	"context"
	"flag"
	"fmt"
	"log"
	"net"
	"time"

	"sqm/internal/bloat"
	"sqm/internal/units"
)

func cmdServer() *command {
	var (
		listen      string
		maxDuration time.Duration
		maxStreams  int
		maxClients  int
		secret      string
	)
	return &command{
		name:    "server",
		summary: "serve load and latency probes for 'sqm test' clients",
		usage:   "sqm server [--listen ADDR] [--max-duration D] [--max-streams N] [--max-clients N] [--secret S]",
		help: fmt.Sprintf(`Runs the far end of 'sqm test': TCP load in both directions, UDP latency
probes answered with server timestamps, and a small control protocol. It
listens on TCP and UDP port %d (IPv4 and IPv6) unless --listen says
otherwise; open both in the firewall. It only ever sends to the peer of a
connection it accepted. Stop it with Ctrl-C or SIGTERM.

Example, on a host beyond the router:

  $ sqm server --secret hunter2 --max-clients 2
  sqm server: listening on [::]:%d (tcp and udp)`, bloat.DefaultPort, bloat.DefaultPort),
		flags: func(fs *flag.FlagSet) {
			fs.StringVar(&listen, "listen", fmt.Sprintf(":%d", bloat.DefaultPort), "`address` to listen on, TCP and UDP (e.g. 192.0.2.1:12866, [::]:9000)")
			units.DurationVar(fs, &maxDuration, "max-duration", 3*time.Minute, "longest test a client may run, idle lead and tail included (a session may last up to 30s longer while the client drains its uploads)")
			fs.IntVar(&maxStreams, "max-streams", 16, "most concurrent load streams per client")
			fs.IntVar(&maxClients, "max-clients", 4, "most clients testing at once")
			fs.StringVar(&secret, "secret", "", "shared secret clients must know (sent as an HMAC, never in clear)")
		},
		run: func(ctx context.Context, env *Env, fs *flag.FlagSet, args []string) error {
			if len(args) > 0 {
				return usageError("server takes no arguments, got %q", args)
			}
			if maxDuration <= 0 || maxStreams <= 0 || maxClients <= 0 {
				return usageError("--max-duration, --max-streams and --max-clients must be positive")
			}
			logger := log.New(env.Stderr, "", log.LstdFlags)
			lim := bloat.Limits{MaxDuration: maxDuration, MaxStreams: maxStreams, MaxClients: maxClients, Secret: secret}
			err := bloat.ListenAndServe(ctx, "tcp", listen, lim, logger.Printf, func(a net.Addr) {
				logger.Printf("sqm server: listening on %s (tcp and udp); limits: %v per test, %d streams per client, %d clients", a, maxDuration, maxStreams, maxClients)
			})
			if err != nil {
				return err
			}
			logger.Printf("sqm server: stopped")
			return nil
		},
	}
}
