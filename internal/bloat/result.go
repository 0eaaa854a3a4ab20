package bloat

import (
	"time"

	"sqm/internal/stats"
)

// Mode is the shape of a test.
type Mode string

const (
	// ModeRRUL is flent's Realtime Response Under Load: 4 downloads and 4
	// uploads at once marked CS0, CS1, CS5 and EF, probes throughout, idle
	// latency before and after.
	ModeRRUL Mode = "rrul"
	// ModeSpeedtest is betterspeedtest's shape: N download streams, then N
	// upload streams, probes throughout.
	ModeSpeedtest Mode = "speedtest"
	// ModeIdle measures latency only.
	ModeIdle Mode = "idle"
)

// ResultVersion is the version of the Result JSON layout. Fields are only
// added within one version.
const ResultVersion = 1

// Result is one test run. It is exactly what `sqm test --json` prints; the
// headline field names (download_mbps ... rpm) are fixed by the issue and
// must not change.
type Result struct {
	FormatVersion int    `json:"format_version"`
	Mode          Mode   `json:"mode"`
	Server        string `json:"server"` // address tested against, host:port
	// Servers says which servers the run used, as URLs: the load server
	// (sqm://host:port or iperf3://host:port) and where each kind of latency
	// probe went (sqm://, irtt://host:port, icmp://host).
	Servers *Servers  `json:"servers,omitempty"`
	Start   time.Time `json:"start"` // wall clock at t=0 of the time series
	// Durations of the parts of the run, in seconds: idle lead and tail
	// (each), load (each load phase), probe/sampling step, and the whole run.
	IdleS  float64 `json:"idle_s"`
	LoadS  float64 `json:"load_s"`
	StepS  float64 `json:"step_s"`
	TotalS float64 `json:"total_s"`

	// Goodput over the load phases, all streams of a direction summed,
	// divided by the time they ran (first stream open to the phase's stop:
	// the phase length less the streams' setup): for downloads the bytes
	// the client received during the phase (as iperf3's receiver counts),
	// for uploads the bytes sent during the phase that reached the server
	// (its count after FIN, or an iperf3 server's results, capped by what
	// had left the socket buffer).
	DownloadMbps float64 `json:"download_mbps"`
	UploadMbps   float64 `json:"upload_mbps"`
	// Round-trip latency of all probe kinds pooled, idle (the lead before
	// any load; the tail after it is in Phases, since it starts with the
	// queue the load left) and loaded (during any load phase).
	Idle   stats.Summary `json:"idle"`
	Loaded stats.Summary `json:"loaded"`
	// InducedMs is the loaded median minus the idle median.
	InducedMs float64 `json:"induced_ms"`
	Grade     string  `json:"grade"`    // DSLReports band of InducedMs
	RPM       float64 `json:"rpm"`      // 60000 / loaded median RTT (ms)
	RPMBand   string  `json:"rpm_band"` // Poor, Fair, Good, Excellent

	Phases  []Phase        `json:"phases"`
	Probes  []ProbeSummary `json:"probes"`
	Streams []Stream       `json:"streams"`
	Series  Series         `json:"series"`
	Samples []Sample       `json:"samples"`
	// Notes are things the user should know about the run, e.g. that ICMP
	// probes were unavailable.
	Notes []string `json:"notes,omitempty"`
}

// Phase is one stretch of the run with its own load.
type Phase struct {
	Name         string        `json:"name"` // idle-before, load, download, upload, idle-after, idle
	StartS       float64       `json:"start_s"`
	EndS         float64       `json:"end_s"`
	DownloadMbps float64       `json:"download_mbps"`
	UploadMbps   float64       `json:"upload_mbps"`
	Latency      stats.Summary `json:"latency"`
}

// ProbeSummary is the latency of one probe kind.
type ProbeSummary struct {
	Kind string `json:"kind"` // udp-ef, udp-be, udp-bk, icmp
	DSCP int    `json:"dscp"`
	// Server is the host:port (ICMP: the host) the probes went to, and
	// Protocol what answered them: sqm (an 'sqm server'), irtt or icmp.
	Server   string        `json:"server"`
	Protocol string        `json:"protocol"`
	Idle     stats.Summary `json:"idle"`
	Loaded   stats.Summary `json:"loaded"`
	// Medians of the one-way delays under load (UDP only). The clock offset
	// is estimated from the fastest probe, assuming its path was symmetric,
	// so these are estimates, not synchronized-clock OWDs; except for an
	// irtt server whose stamps are consistent with synchronised clocks
	// (ClocksSynced), whose one-way delays are taken as stamped.
	LoadedOWDUpMs   float64 `json:"loaded_owd_up_median_ms,omitempty"`
	LoadedOWDDownMs float64 `json:"loaded_owd_down_median_ms,omitempty"`
	// Loaded minus idle median of the raw one-way delays (server clock
	// minus ours): the clock offset cancels, so these hold whether or not
	// the clocks are synchronised (as long as neither steps during the run).
	InducedOWDUpMs   float64 `json:"induced_owd_up_ms,omitempty"`
	InducedOWDDownMs float64 `json:"induced_owd_down_ms,omitempty"`
	// ClocksSynced says whether the server's timestamps are consistent with
	// synchronised clocks (no one-way delay came out negative or above the
	// RTT); false means the raw one-way delays carry an unknown offset. Absent
	// without server timestamps.
	ClocksSynced *bool `json:"clocks_synced,omitempty"`
	// DSCP of the probes as they arrived at the server (up) and back here
	// (down); different from DSCP means the path re-marked them. -1: unknown.
	ArrivedDSCPUp   int `json:"arrived_dscp_up"`
	ArrivedDSCPDown int `json:"arrived_dscp_down"`
}

// Stream is one TCP load stream.
type Stream struct {
	Dir    string  `json:"dir"`   // down or up
	Label  string  `json:"label"` // BE, BK, CS5, EF
	DSCP   int     `json:"dscp"`
	StartS float64 `json:"start_s"`
	EndS   float64 `json:"end_s"`
	Bytes  int64   `json:"bytes"`
	// PeerBytes is the far end's own count for the stream where its
	// protocol reports one (iperf3: what the server received on an upload,
	// what it sent on a download); Bytes is what counts for goodput.
	PeerBytes int64   `json:"peer_bytes,omitempty"`
	Mbps      float64 `json:"mbps"`
	// MbpsSeries is the goodput in each step, aligned with Series.TS:
	// bytes received (down) or acknowledged (up, so it lags by the reverse
	// path's queue and is lumpier than the total).
	MbpsSeries []float64 `json:"mbps_series"`
}

// Servers are the servers a run used.
type Servers struct {
	Load    string   `json:"load"`
	Latency []string `json:"latency"`
}

// Series is the throughput over time, one value per step ending at TS[i].
type Series struct {
	TS           []float64 `json:"t_s"`
	DownloadMbps []float64 `json:"download_mbps"`
	UploadMbps   []float64 `json:"upload_mbps"`
	// AtS is when each sample was really taken (TS is when it was due):
	// value i is the mean over (AtS[i-1], AtS[i]]. On a busy machine (an
	// emulated VM on a loaded host) samples run late and then bunch up,
	// so the bits of sample i are its value times that span, not times
	// the step.
	AtS []float64 `json:"at_s,omitempty"`
}

// Sample is one latency probe.
type Sample struct {
	Kind      string  `json:"kind"`
	Seq       uint64  `json:"seq"`
	TS        float64 `json:"t_s"` // send time since Start
	RTTMs     float64 `json:"rtt_ms"`
	OWDUpMs   float64 `json:"owd_up_ms,omitempty"`
	OWDDownMs float64 `json:"owd_down_ms,omitempty"`
	Lost      bool    `json:"lost,omitempty"`
}

// Progress is reported once per step while a test runs.
type Progress struct {
	Phase        string
	Elapsed      time.Duration
	Total        time.Duration
	DownloadMbps float64 // last step
	UploadMbps   float64
	LatencyMs    float64 // last answered probe; 0 before the first
}

// LoadedSamples are the probes of the loaded phases, each timed from the
// start of its phase: what a caller needs to tell the start of a load
// from its steady part (internal/tune does).
func (r *Result) LoadedSamples() []stats.Timed {
	var out []stats.Timed
	for _, p := range r.Phases {
		if p.Name != "load" && p.Name != "download" && p.Name != "upload" {
			continue
		}
		for _, s := range r.Samples {
			if s.TS >= p.StartS && s.TS < p.EndS {
				out = append(out, stats.Timed{T: time.Duration((s.TS - p.StartS) * float64(time.Second)), RTTMs: s.RTTMs, Lost: s.Lost})
			}
		}
	}
	return out
}
