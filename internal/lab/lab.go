// Package lab builds an emulated bloated broadband link out of network
// namespaces on the local machine, measures it with the bufferbloat tester,
// shapes it with sqm, and measures again: `sqm lab`, what `make demo` runs.
//
// Topology (README of the lab, §3):
//
//	client --lan-- router --wan-- isp --srv-- server
//	10.77.1.2   .1 |      .1 10.77.2.2 |  .1  10.77.3.2
//	               shaped by sqm       netem modem, both directions
//
// The isp namespace is the modem: netem on its two veths with the line rate,
// half the base RTT as delay each way and a deep FIFO. That part is
// lab-specific and configured here with go-tc directly; the shaping on the
// router's WAN veth is exactly what `sqm apply` does (internal/plan and
// internal/kernel). Measurement is internal/bloat, client in the client
// namespace, server in the server namespace.
//
// Everything the lab creates lives in named namespaces (internal/netns,
// sqmlab-ROLE-PID-N, visible to `ip netns`), so two labs can run at once;
// deleting the namespaces removes every veth, IFB and qdisc with them,
// which Run does on return whatever happened (error, context cancelled by
// Ctrl-C).
package lab

import (
	"context"
	"fmt"
	"time"

	"sqm/internal/bloat"
	"sqm/internal/kernel"
	"sqm/internal/plan"
)

// Options configure one lab run.
type Options struct {
	Link     Link          // the emulated line (resolved)
	Mode     string        // "rrul" or "speedtest"
	Duration time.Duration // load time of each test
	// Idle is the tester's idle lead and tail; 0 means 3 s (enough probes
	// for an idle median without stretching the run under emulation).
	Idle    time.Duration
	Shaping Shaping
	// ECN makes the client and the server ask for ECN on their TCP
	// connections (net.ipv4.tcp_ecn=1 in both namespaces), so the load in
	// both directions is ECN-capable and an AQM's signals can be marks.
	// Off, both keep Linux's default (2: accept ECN, never ask for it), so
	// the lab's own connections carry no ECN, as most hosts' do today.
	ECN bool
	// Progress, if set, is told each phase as it starts.
	Progress func(phase string)

	traces *[2]traceDir // set by RunTrace: the modem follows these
}

// DefaultOptions is `sqm lab` with no flags: the README §3 testbed
// measured the way that testbed was, download then upload (speedtest mode),
// 20 s each. Sequential directions keep the upload free of the download's
// ACKs, so shaped goodput is comparable with the line rate; 20 s rather
// than 10 s because in the VM the first second of each phase (slow start,
// emulation hiccups) cost a 10 s upload about 3 % of its goodput, enough to
// swing it across the 80 % mark (measured: 79.6 % at 10 s, 83 % at 20 s).
func DefaultOptions() Options {
	return Options{Link: DefaultLink(), Mode: "speedtest", Duration: 20 * time.Second}
}

// Report is the outcome of one lab run; it marshals as `sqm lab --json`
// prints it, Before and After being exactly `sqm test --json`'s object.
type Report struct {
	Before  *bloat.Result `json:"before"`
	After   *bloat.Result `json:"after"`
	Link    LinkReport    `json:"link"`
	Shaping ShapingReport `json:"shaping"`
}

// LinkReport is the emulated line as the lab built it.
type LinkReport struct {
	Link
	RTTMs float64 `json:"rtt_ms"`
	// MaxGoodput*Mbps is the most full-size TCP segments can carry on the
	// emulated line once its framing is paid: the yardstick for "throughput
	// given up".
	MaxGoodputDownMbps float64  `json:"max_goodput_down_mbps"`
	MaxGoodputUpMbps   float64  `json:"max_goodput_up_mbps"`
	Namespaces         []string `json:"namespaces"`
	// TCPECN is net.ipv4.tcp_ecn in the client and server namespaces
	// (Options.ECN): 1 asks for ECN, 2 only accepts it.
	TCPECN int      `json:"tcp_ecn"`
	nsIDs  []string // /proc identities, for tests
	// Modem is the netem counters of each direction (dn0 towards the
	// client, up0 towards the server) after each run; they are cumulative,
	// so "after" minus "before" is the shaped run's share. Drops and a
	// backlog at the modem mean the queue formed there, not at sqm.
	Modem struct {
		Before []kernel.DeviceStatus `json:"before"`
		After  []kernel.DeviceStatus `json:"after"`
	} `json:"modem"`
}

// ShapingReport is what sqm put on the router's WAN side for the "after" run.
type ShapingReport struct {
	Interface    string     `json:"interface"`
	Script       string     `json:"script"`
	Qdisc        string     `json:"qdisc"`
	DownloadKbit uint64     `json:"download_kbit"`
	UploadKbit   uint64     `json:"upload_kbit"`
	LinkLayer    string     `json:"linklayer"`
	Overhead     int        `json:"overhead"`
	Source       string     `json:"source"` // "defaults", "flags" or the config file
	Plan         *plan.Plan `json:"plan"`
	// Status is sqm's qdiscs as the kernel reported them after the shaped
	// run (WAN egress and the IFB), with cake's statistics.
	Status []kernel.DeviceStatus `json:"status"`
}

func (o *Options) progress(format string, args ...any) {
	if o.Progress != nil {
		o.Progress(fmt.Sprintf(format, args...))
	}
}

// Run builds the lab, measures without and with shaping and tears it all
// down. It needs root and a kernel with netem, the shaping qdisc and ifb; if
// one is missing the error names the module.
func Run(ctx context.Context, o Options) (rep *Report, err error) {
	r, err := setup(ctx, &o)
	if err != nil {
		return nil, err
	}
	defer func() {
		if cerr := r.teardown(&o); cerr != nil && err == nil {
			err = cerr
		}
	}()
	t := r.t
	rep = &Report{Link: r.link}

	o.progress("measuring without SQM (%s, %v load)", o.Mode, o.Duration)
	if rep.Before, err = t.measure(ctx, &o, "without SQM"); err != nil {
		return nil, err
	}
	rep.Link.Modem.Before = t.status(t.isp, ispDown, ispUp)

	var undo func() error
	if rep.Shaping, undo, err = r.shape(&o); err != nil {
		return nil, err
	}
	defer func() {
		if uerr := undo(); uerr != nil && err == nil {
			err = uerr
		}
	}()

	o.progress("measuring with SQM (%s, %v load)", o.Mode, o.Duration)
	if rep.After, err = t.measure(ctx, &o, "with SQM"); err != nil {
		return nil, err
	}
	rep.Link.Modem.After = t.status(t.isp, ispDown, ispUp)
	devs := []string{wanDev}
	if p := rep.Shaping.Plan; p.Ingress != nil && p.Ingress.IFB != "" {
		devs = append(devs, p.Ingress.IFB)
	}
	rep.Shaping.Status = t.status(t.router, devs...)
	return rep, nil
}
