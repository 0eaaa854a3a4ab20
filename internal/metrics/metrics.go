// Package metrics renders sqm's status in the Prometheus text exposition
// format 0.0.4, for a scraper (metricshttp.Handler, mounted by the
// daemon's HTTP server) and for node_exporter's textfile collector
// (Collector.WriteFile; prometheus-node-exporter-lua on OpenWrt reads the
// same files). It does not import net/http, so `sqm status --prom` costs
// a router build no HTTP code.
//
// The format is written directly: it is a few lines of text, and
// client_golang would add megabytes to a router binary for nothing the
// exposition needs.
//
// Names follow Prometheus' conventions: prefix sqm_, base units (bytes,
// seconds, bytes per second), counters end in _total, every family has
// HELP and TYPE lines. Labels: interface (the configured interface, also
// for the IFB that shapes its ingress), direction (egress, ingress), tin
// (cake's name for the tin, as tc prints it).
//
// The kernel keeps several counters in 32 bits (qdisc drops, overlimits,
// requeues; cake's per-tin packet counts). A busy link wraps them, and a
// wrapped counter looks like a counter reset to Prometheus, which would
// then count the whole new value again. Collector extends them to 64 bits
// with state kept between scrapes; see extender.
package metrics

import (
	"runtime"
	"time"

	"sqm/internal/kernel"
	"sqm/internal/service"
)

// Snapshot is everything one scrape shows.
type Snapshot struct {
	Queues []Queue
	// LastTest is the most recent bufferbloat test the service ran, nil if
	// it keeps none.
	LastTest *TestResult
	Build    BuildInfo
}

// BuildInfo labels sqm_build_info.
type BuildInfo struct {
	Version   string
	GoVersion string
}

// DefaultBuild is the build info of this binary with the given version.
func DefaultBuild(version string) BuildInfo {
	return BuildInfo{Version: version, GoVersion: runtime.Version()}
}

// Queue is one shaped interface (one config section).
type Queue struct {
	Interface string
	Section   string
	Recipe    string // script without .qos
	Qdisc     string // the configured leaf qdisc
	AppliedAt time.Time
	// Directions are egress and ingress, those the section shapes.
	Directions []Direction
	// Autorate is the daemon's autorate of the queue (its status file);
	// nil when autorate is off or no daemon runs it.
	Autorate *service.AutorateStatus
}

// Direction is one shaped direction of a queue.
type Direction struct {
	Name     string // "egress" or "ingress"
	Device   string // the interface for egress, its IFB for ingress
	RateKbit uint64 // configured rate in kbit/s (1000 bit/s)
	// Root is the qdisc that does this direction's shaping (the device's
	// root qdisc; the ingress qdisc where ingress is policed, not
	// redirected), nil if the kernel has none: the device is gone or the
	// tree was removed.
	Root *kernel.QdiscStatus
	// Leaves are the other qdiscs of the root's tree (htb's fq_codel or
	// cake leaves), whose ECN marks the root does not count.
	Leaves []kernel.QdiscStatus
	// Ifindex tells a re-created device from the old one.
	Ifindex int
}

// TestResult is what the metrics show of a bufferbloat test (the
// headline numbers of a bloat.Result, in base units). It is its own type
// so the metrics do not depend on the tester, which a router build may
// leave out.
type TestResult struct {
	Mode, Server, Grade, RPMBand string
	Start                        time.Time
	// Goodput in bytes per second.
	DownloadBytesPerSecond, UploadBytesPerSecond float64
	Idle, Loaded                                 Latency
	Induced                                      time.Duration // loaded median minus idle median
	RPM                                          float64       // round trips per minute under load
}

// Latency summarises one phase's probes.
type Latency struct {
	Median, P90 time.Duration
	LossRatio   float64 // unanswered probes / sent, 0..1
}

// Source produces a Snapshot per scrape. An error with a nil snapshot
// fails the scrape; an error with a snapshot is shown as sqm_scrape_error
// and the snapshot is still rendered.
type Source interface {
	Snapshot() (*Snapshot, error)
}

// SourceFunc adapts a function to Source.
type SourceFunc func() (*Snapshot, error)

// Snapshot calls f.
func (f SourceFunc) Snapshot() (*Snapshot, error) { return f() }
