// Package bloat measures bufferbloat: latency under load. It holds both
// ends of the test, the server (TCP load in both directions, UDP latency
// probes with server timestamps, a small versioned control protocol) and the
// client (RRUL, speedtest and idle modes, UDP and ICMP probes, goodput and
// latency time series), and returns a Result that is exactly what
// `sqm test --json` prints.
//
// It owns the wire protocol and the measurement; summaries (internal/stats),
// text/JSON/flent output (internal/report) and pictures (internal/plot) live
// elsewhere. It does not touch qdiscs or links.
//
// Network namespaces: the client creates every socket inside
// Options.Enter(fn) when that hook is set, so a caller can pass a function
// that runs fn on an OS thread locked into a namespace (internal/netns Do).
// Sockets keep their namespace afterwards, whichever goroutine uses them.
// The server takes already-created listeners, so the caller creates them in
// whatever namespace it wants.
package bloat
