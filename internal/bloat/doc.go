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
// What is measured:
//   - Round-trip time of UDP probes, taken from kernel receive timestamps
//     (SO_TIMESTAMPNS) on both ends, minus the server's receive-to-send
//     time, so Go scheduling on either host stays out of it; ICMP echo the
//     same way on the client.
//   - One-way delays of UDP probes, estimated: the clock offset comes from
//     the fastest probe, assumed symmetric (as crusader does).
//   - The DSCP each probe arrived with at the server and back, to show
//     paths that re-mark (the server answers with the request's mark).
//   - Goodput per stream; see Result.DownloadMbps for what is counted.
//
// Accuracy, as asserted by TestVMAccuracy (a VM test, so part of `make
// test`) on a namespace pair with 10 ms of netem delay and 20 Mbit/s
// each way: idle median RTT of UDP and of ICMP probes within 0.5 ms of
// ping's, sampled side by side, and download and upload goodput within
// 5 % of iperf3's with the same streams and time. Measured there:
// -0.06 to +0.13 ms and -1.2 to -0.1 %. A tester that took receive
// times in user space missed by 1.0-1.3 ms, one that counted bytes
// written rather than delivered by +8 %; both fail it.
//
// Network namespaces: the client creates every socket inside
// Options.Enter(fn) when that hook is set, so a caller can pass a function
// that runs fn on an OS thread locked into a namespace (internal/netns Do).
// Sockets keep their namespace afterwards, whichever goroutine uses them.
// The server takes already-created listeners, so the caller creates them in
// whatever namespace it wants. A lab runs both ends like this:
//
//	var ln net.Listener
//	var pc net.PacketConn
//	serverNS.Do(func() (err error) {
//		if ln, err = net.Listen("tcp", "10.0.0.1:0"); err != nil {
//			return err
//		}
//		pc, err = net.ListenPacket("udp", ln.Addr().String())
//		return err
//	})
//	go bloat.NewServer(bloat.Limits{}, log.Printf).Serve(ctx, ln, pc)
//	res, err := bloat.Run(ctx, bloat.Options{Addr: ln.Addr().String(), Enter: clientNS.Do})
//	report.Text(os.Stdout, res); plot.Write(f, "run.svg", res)
package bloat
