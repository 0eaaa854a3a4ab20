package metrics

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"

	"sqm/internal/kernel"
	"sqm/internal/service"
)

// ContentType is the exposition format's media type.
const ContentType = "text/plain; version=0.0.4; charset=utf-8"

// family is one metric name with its HELP and TYPE.
type family struct {
	name, typ, help string
}

// families fixes every name, its type and help, and the output order, so
// the output does not depend on which data a scrape happened to have and
// a name cannot be emitted without HELP and TYPE (add panics on an
// undeclared name; the golden test exercises every one).
var families = []family{
	{"sqm_build_info", "gauge", "Always 1; the labels say which sqm build is running."},
	{"sqm_scrape_error", "gauge", "1 if part of the status could not be read for this scrape (the daemon's log says why), else 0."},
	{"sqm_queue_info", "gauge", "Always 1 for each interface sqm shapes; the labels name the config section, recipe and configured qdisc."},
	{"sqm_queue_applied_timestamp_seconds", "gauge", "When sqm last applied this interface's tree (Unix time); counters restart from zero then."},
	{"sqm_queue_rate_bytes_per_second", "gauge", "Configured shaping rate of the direction (the config's kbit/s as bytes per second)."},
	{"sqm_queue_shaping", "gauge", "1 if the direction's shaping qdisc is in the kernel, 0 if it is missing (device gone or tree removed)."},
	{"sqm_queue_root_info", "gauge", "Always 1; the labels name the device and the kind and handle of the qdisc shaping the direction."},
	{"sqm_queue_sent_bytes_total", "counter", "Bytes the direction's shaping qdisc sent."},
	{"sqm_queue_sent_packets_total", "counter", "Packets the direction's shaping qdisc sent."},
	{"sqm_queue_dropped_packets_total", "counter", "Packets dropped in the direction's qdisc tree (AQM drops and overflow)."},
	{"sqm_queue_overlimits_total", "counter", "Times the shaper held a packet back because the rate was exhausted."},
	{"sqm_queue_requeues_total", "counter", "Packets the driver handed back to the qdisc."},
	{"sqm_queue_ecn_marked_packets_total", "counter", "Packets ECN-marked instead of dropped (cake and fq_codel)."},
	{"sqm_queue_backlog_bytes", "gauge", "Bytes queued in the direction's qdisc tree."},
	{"sqm_queue_backlog_packets", "gauge", "Packets queued in the direction's qdisc tree."},
	{"sqm_cake_capacity_estimate_bytes_per_second", "gauge", "Cake's estimate of the link capacity (its shaper rate unless autorate is on)."},
	{"sqm_cake_memory_used_bytes", "gauge", "Memory cake uses for queued packets."},
	{"sqm_cake_memory_limit_bytes", "gauge", "Memory cake may use for queued packets."},
	{"sqm_cake_tin_threshold_rate_bytes_per_second", "gauge", "Rate above which the tin's traffic loses its priority."},
	{"sqm_cake_tin_target_seconds", "gauge", "The tin's AQM target delay."},
	{"sqm_cake_tin_interval_seconds", "gauge", "The tin's AQM interval."},
	{"sqm_cake_tin_peak_delay_seconds", "gauge", "Peak queueing delay in the tin (decaying maximum)."},
	{"sqm_cake_tin_average_delay_seconds", "gauge", "Average queueing delay in the tin."},
	{"sqm_cake_tin_base_delay_seconds", "gauge", "Sparse (minimum) queueing delay in the tin."},
	{"sqm_cake_tin_sent_bytes_total", "counter", "Bytes the tin sent."},
	{"sqm_cake_tin_sent_packets_total", "counter", "Packets the tin sent."},
	{"sqm_cake_tin_dropped_bytes_total", "counter", "Bytes the tin dropped."},
	{"sqm_cake_tin_dropped_packets_total", "counter", "Packets the tin dropped."},
	{"sqm_cake_tin_ecn_marked_bytes_total", "counter", "Bytes the tin ECN-marked."},
	{"sqm_cake_tin_ecn_marked_packets_total", "counter", "Packets the tin ECN-marked."},
	{"sqm_cake_tin_ack_dropped_bytes_total", "counter", "Bytes of redundant TCP ACKs the tin's ACK filter dropped."},
	{"sqm_cake_tin_ack_dropped_packets_total", "counter", "Redundant TCP ACKs the tin's ACK filter dropped."},
	{"sqm_cake_tin_backlog_bytes", "gauge", "Bytes queued in the tin."},
	{"sqm_cake_tin_backlog_packets", "gauge", "Packets queued in the tin."},
	{"sqm_cake_tin_sparse_flows", "gauge", "Flows in the tin that send little (they get priority)."},
	{"sqm_cake_tin_bulk_flows", "gauge", "Flows in the tin with a standing queue."},
	{"sqm_cake_tin_unresponsive_flows", "gauge", "Flows in the tin that do not slow down on drops."},
	{"sqm_autorate_running", "gauge", "1 while the daemon's autorate moves the queue's rates; 0 when it fell back to the base rates or is not running (the status says why)."},
	{"sqm_autorate_rate_changes_total", "counter", "Rate changes autorate set on the queue's shapers (both directions) since it started."},
	{"sqm_autorate_rate_bytes_per_second", "gauge", "The shaping rate autorate set for the direction."},
	{"sqm_autorate_min_rate_bytes_per_second", "gauge", "The lowest rate autorate may set for the direction."},
	{"sqm_autorate_max_rate_bytes_per_second", "gauge", "The highest rate autorate may set for the direction."},
	{"sqm_autorate_load_ratio", "gauge", "What the direction's shaper sent over the last 200 ms as a share of its rate."},
	{"sqm_autorate_delay_seconds", "gauge", "The delay rise over the reflectors' baselines autorate acted on for the direction (absent while no reflector answers)."},
	{"sqm_autorate_target_seconds", "gauge", "The direction's delay target."},
	{"sqm_autorate_decisions_total", "counter", "Autorate's decisions for the direction, one per tick, by reason (increase, delay, hold, ...)."},
	{"sqm_autorate_reflector_delay_seconds", "gauge", "A reflector's latest delay rise over its baseline: one-way down and up, or the round trip (direction rtt)."},
	{"sqm_autorate_reflector_baseline_seconds", "gauge", "A reflector's baseline delay (one-way ones include the unknown offset of the two clocks)."},
	{"sqm_autorate_reflector_lost", "gauge", "Probes to the reflector lost in a row."},
	{"sqm_test_info", "gauge", "Always 1; the labels describe the last bufferbloat test."},
	{"sqm_test_start_timestamp_seconds", "gauge", "When the last bufferbloat test started (Unix time)."},
	{"sqm_test_download_bytes_per_second", "gauge", "Download goodput of the last bufferbloat test."},
	{"sqm_test_upload_bytes_per_second", "gauge", "Upload goodput of the last bufferbloat test."},
	{"sqm_test_latency_median_seconds", "gauge", "Median round-trip time of the last test's probes, idle or under load."},
	{"sqm_test_latency_p90_seconds", "gauge", "90th percentile round-trip time of the last test's probes, idle or under load."},
	{"sqm_test_probe_loss_ratio", "gauge", "Fraction of the last test's latency probes that got no answer, idle or under load."},
	{"sqm_test_induced_latency_seconds", "gauge", "Latency the load added in the last test (loaded median minus idle median)."},
	{"sqm_test_round_trips_per_minute", "gauge", "Responsiveness of the last test: 60 s over the loaded median round trip."},
}

var familyIndex = func() map[string]int {
	m := map[string]int{}
	for i, f := range families {
		m[f.name] = i
	}
	return m
}()

// exposition collects samples per family.
type exposition struct {
	samples [][]string // by family index; each "name{labels} value"
}

func newExposition() *exposition { return &exposition{samples: make([][]string, len(families))} }

// add appends a sample; labels are name, value pairs.
func (x *exposition) add(name string, v float64, labels ...string) {
	i, ok := familyIndex[name]
	if !ok {
		panic("metrics: undeclared family " + name)
	}
	x.samples[i] = append(x.samples[i], name+formatLabels(labels)+" "+formatValue(v))
}

// addInt is add for integer values, printed exactly (a float64 would
// round counters past 2^53).
func (x *exposition) addInt(name string, v uint64, labels ...string) {
	i, ok := familyIndex[name]
	if !ok {
		panic("metrics: undeclared family " + name)
	}
	x.samples[i] = append(x.samples[i], name+formatLabels(labels)+" "+strconv.FormatUint(v, 10))
}

func (x *exposition) write(w io.Writer) error {
	bw := bufio.NewWriter(w)
	for i, f := range families {
		if len(x.samples[i]) == 0 {
			continue
		}
		fmt.Fprintf(bw, "# HELP %s %s\n# TYPE %s %s\n", f.name, escapeHelp(f.help), f.name, f.typ)
		for _, s := range x.samples[i] {
			bw.WriteString(s)
			bw.WriteByte('\n')
		}
	}
	return bw.Flush()
}

func formatLabels(kv []string) string {
	if len(kv) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteByte('{')
	for i := 0; i+1 < len(kv); i += 2 {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(kv[i])
		b.WriteString(`="`)
		b.WriteString(escapeLabel(kv[i+1]))
		b.WriteByte('"')
	}
	b.WriteByte('}')
	return b.String()
}

// escapeLabel also replaces invalid UTF-8, which Prometheus refuses in a
// label value (and with it the whole scrape).
func escapeLabel(s string) string { return escape(strings.ToValidUTF8(s, "\uFFFD"), true) }
func escapeHelp(s string) string  { return escape(s, false) }

// escape writes a backslash before each backslash (and each double quote
// when quote is set) and LF as \n, the escapes of the text format. A
// loop of its own, not strings.NewReplacer, whose machinery costs the
// router build about 10 KB.
func escape(s string, quote bool) string {
	special := "\\\n"
	if quote {
		special = "\\\n\""
	}
	if !strings.ContainsAny(s, special) {
		return s
	}
	b := make([]byte, 0, len(s)+8)
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '\\' || c == '"' && quote:
			b = append(b, '\\', c)
		case c == '\n':
			b = append(b, '\\', 'n')
		default:
			b = append(b, c)
		}
	}
	return string(b)
}

func formatValue(v float64) string {
	switch {
	case math.IsNaN(v):
		return "NaN"
	case math.IsInf(v, 1):
		return "+Inf"
	case math.IsInf(v, -1):
		return "-Inf"
	}
	return strconv.FormatFloat(v, 'g', -1, 64)
}

// Collector renders snapshots and keeps the state that extends 32-bit
// counters between them. Use one per process (the daemon's handler, a
// textfile loop); a fresh one reports raw values on its first render.
// It is safe for concurrent use.
type Collector struct {
	mu  sync.Mutex
	ext *extender
}

// NewCollector returns a Collector with no history.
func NewCollector() *Collector { return &Collector{ext: newExtender()} }

// Write renders snap (nil: only build info and the error) to w. scrapeErr
// sets sqm_scrape_error.
func (c *Collector) Write(w io.Writer, snap *Snapshot, scrapeErr error) error {
	c.mu.Lock()
	x := c.collect(snap, scrapeErr)
	c.mu.Unlock()
	return x.write(w)
}

func (c *Collector) collect(snap *Snapshot, scrapeErr error) *exposition {
	x := newExposition()
	if snap == nil {
		snap = &Snapshot{}
	}
	b := snap.Build
	x.addInt("sqm_build_info", 1, "version", b.Version, "goversion", b.GoVersion)
	x.addInt("sqm_scrape_error", b2i(scrapeErr != nil))
	c.ext.begin()
	for _, q := range snap.Queues {
		c.queue(x, q)
	}
	c.ext.end()
	if t := snap.LastTest; t != nil {
		testMetrics(x, t)
	}
	return x
}

func b2i(b bool) uint64 {
	if b {
		return 1
	}
	return 0
}

func (c *Collector) queue(x *exposition, q Queue) {
	x.addInt("sqm_queue_info", 1, "interface", q.Interface, "section", q.Section, "recipe", q.Recipe, "qdisc", q.Qdisc)
	if !q.AppliedAt.IsZero() {
		x.add("sqm_queue_applied_timestamp_seconds", float64(q.AppliedAt.UnixNano())/1e9, "interface", q.Interface)
	}
	if q.Autorate != nil {
		autorate(x, q.Interface, q.Autorate)
	}
	for _, d := range q.Directions {
		l := []string{"interface", q.Interface, "direction", d.Name}
		x.addInt("sqm_queue_rate_bytes_per_second", d.RateKbit*1000/8, l...)
		x.addInt("sqm_queue_shaping", b2i(d.Root != nil), l...)
		r := d.Root
		if r == nil {
			continue
		}
		x.addInt("sqm_queue_root_info", 1, append(l[:4:4], "device", d.Device, "kind", r.Kind, "handle", r.Handle.String())...)
		inc := incarnation{ifindex: d.Ifindex, applied: q.AppliedAt, kind: r.Kind, handle: uint32(r.Handle)}
		witness := r.Bytes + r.Packets
		key := q.Interface + "\x00" + d.Name + "\x00"
		ext := func(name string, raw uint32) uint64 { return c.ext.extend(key+name, raw, witness, inc) }

		x.addInt("sqm_queue_sent_bytes_total", r.Bytes, l...)
		x.addInt("sqm_queue_sent_packets_total", r.Packets, l...)
		x.addInt("sqm_queue_dropped_packets_total", ext("drops", r.Drops), l...)
		x.addInt("sqm_queue_overlimits_total", ext("overlimits", r.Overlimits), l...)
		x.addInt("sqm_queue_requeues_total", ext("requeues", r.Requeues), l...)
		x.addInt("sqm_queue_backlog_bytes", uint64(r.BacklogBytes), l...)
		x.addInt("sqm_queue_backlog_packets", uint64(r.BacklogPackets), l...)
		switch {
		case r.Cake != nil:
			// The qdisc-level mark count is a sum of 32-bit tin
			// counters: sum the extended ones instead.
			var marks uint64
			for i, t := range r.Cake.Tins {
				marks += cakeTin(x, l, TinName(len(r.Cake.Tins), i), t, func(name string, raw uint32) uint64 {
					return ext(fmt.Sprintf("tin%d\x00%s", i, name), raw)
				})
			}
			x.addInt("sqm_queue_ecn_marked_packets_total", marks, l...)
			cs := r.Cake
			x.addInt("sqm_cake_capacity_estimate_bytes_per_second", cs.CapacityEstimate, l...)
			x.addInt("sqm_cake_memory_used_bytes", uint64(cs.MemoryUsed), l...)
			x.addInt("sqm_cake_memory_limit_bytes", uint64(cs.MemoryLimit), l...)
		case r.FqCodel != nil:
			x.addInt("sqm_queue_ecn_marked_packets_total", ext("ecn", r.FqCodel.ECNMark), l...)
		case len(d.Leaves) > 0:
			// A shaper (htb, tbf) marks nothing itself: sum its
			// leaves' marks, each extended on its own.
			var marks uint64
			for _, lq := range d.Leaves {
				lkey := "leaf" + lq.Handle.String() + "\x00"
				switch {
				case lq.Cake != nil:
					for i, t := range lq.Cake.Tins {
						marks += ext(fmt.Sprintf("%stin%d", lkey, i), t.ECNMarkedPackets)
					}
				case lq.FqCodel != nil:
					marks += ext(lkey+"ecn", lq.FqCodel.ECNMark)
				}
			}
			x.addInt("sqm_queue_ecn_marked_packets_total", marks, l...)
		}
	}
}

// autorate adds a queue's autorate series.
func autorate(x *exposition, iface string, a *service.AutorateStatus) {
	x.addInt("sqm_autorate_running", b2i(a.Running && !a.Fallback), "interface", iface)
	x.addInt("sqm_autorate_rate_changes_total", a.RateChanges, "interface", iface)
	for _, d := range []struct {
		name string
		d    *service.AutorateDir
	}{{"egress", a.Upload}, {"ingress", a.Download}} {
		if d.d == nil {
			continue
		}
		l := []string{"interface", iface, "direction", d.name}
		x.addInt("sqm_autorate_rate_bytes_per_second", d.d.RateKbit*1000/8, l...)
		x.addInt("sqm_autorate_min_rate_bytes_per_second", d.d.MinKbit*1000/8, l...)
		x.addInt("sqm_autorate_max_rate_bytes_per_second", d.d.MaxKbit*1000/8, l...)
		x.add("sqm_autorate_load_ratio", d.d.Load, l...)
		if d.d.DelayMs >= 0 {
			x.add("sqm_autorate_delay_seconds", d.d.DelayMs/1e3, l...)
		}
		x.add("sqm_autorate_target_seconds", d.d.TargetMs/1e3, l...)
		reasons := make([]string, 0, len(d.d.Decisions))
		for r := range d.d.Decisions {
			reasons = append(reasons, r)
		}
		slices.Sort(reasons)
		for _, r := range reasons {
			x.addInt("sqm_autorate_decisions_total", d.d.Decisions[r], append(l[:4:4], "reason", r)...)
		}
	}
	for _, r := range a.Reflectors {
		if !r.Replied {
			x.addInt("sqm_autorate_reflector_lost", uint64(r.Lost), "interface", iface, "reflector", r.Target)
			continue
		}
		dirs := []string{"rtt"}
		if r.OneWay {
			dirs = []string{"ingress", "egress"}
		}
		for i, dir := range dirs {
			l := []string{"interface", iface, "reflector", r.Target, "direction", dir}
			x.add("sqm_autorate_reflector_delay_seconds", r.RiseMs[i]/1e3, l...)
			x.add("sqm_autorate_reflector_baseline_seconds", r.BaselineMs[i]/1e3, l...)
		}
		x.addInt("sqm_autorate_reflector_lost", uint64(r.Lost), "interface", iface, "reflector", r.Target)
	}
}

// cakeTin adds one tin's series and returns its extended ECN mark count.
func cakeTin(x *exposition, l []string, tin string, t kernel.CakeTin, ext func(string, uint32) uint64) uint64 {
	tl := append(l[:4:4], "tin", tin)
	us := func(v uint32) float64 { return float64(v) / 1e6 }
	x.addInt("sqm_cake_tin_threshold_rate_bytes_per_second", t.ThresholdRate, tl...)
	x.add("sqm_cake_tin_target_seconds", us(t.TargetUS), tl...)
	x.add("sqm_cake_tin_interval_seconds", us(t.IntervalUS), tl...)
	x.add("sqm_cake_tin_peak_delay_seconds", us(t.PeakDelayUS), tl...)
	x.add("sqm_cake_tin_average_delay_seconds", us(t.AvgDelayUS), tl...)
	x.add("sqm_cake_tin_base_delay_seconds", us(t.BaseDelayUS), tl...)
	x.addInt("sqm_cake_tin_sent_bytes_total", t.SentBytes, tl...)
	x.addInt("sqm_cake_tin_sent_packets_total", ext("sent", t.SentPackets), tl...)
	x.addInt("sqm_cake_tin_dropped_bytes_total", t.DroppedBytes, tl...)
	x.addInt("sqm_cake_tin_dropped_packets_total", ext("dropped", t.DroppedPackets), tl...)
	x.addInt("sqm_cake_tin_ecn_marked_bytes_total", t.ECNMarkedBytes, tl...)
	marks := ext("marked", t.ECNMarkedPackets)
	x.addInt("sqm_cake_tin_ecn_marked_packets_total", marks, tl...)
	x.addInt("sqm_cake_tin_ack_dropped_bytes_total", t.ACKDropBytes, tl...)
	x.addInt("sqm_cake_tin_ack_dropped_packets_total", ext("ackdrop", t.ACKDropPackets), tl...)
	x.addInt("sqm_cake_tin_backlog_bytes", uint64(t.BacklogBytes), tl...)
	x.addInt("sqm_cake_tin_backlog_packets", uint64(t.BacklogPackets), tl...)
	x.addInt("sqm_cake_tin_sparse_flows", uint64(t.SparseFlows), tl...)
	x.addInt("sqm_cake_tin_bulk_flows", uint64(t.BulkFlows), tl...)
	x.addInt("sqm_cake_tin_unresponsive_flows", uint64(t.UnresponsiveFlows), tl...)
	return marks
}

// TinName is tc's name for tin i of a cake qdisc with n tins: the
// diffserv3 and diffserv4 names, "Tin N" otherwise (besteffort,
// diffserv8, precedence). Names, not indices, label tins because a tin's
// index changes meaning with the diffserv mode (Voice is 2 of 3, 3 of 4).
func TinName(n, i int) string {
	switch n {
	case 3:
		return [...]string{"Bulk", "Best Effort", "Voice"}[i]
	case 4:
		return [...]string{"Bulk", "Best Effort", "Video", "Voice"}[i]
	}
	return fmt.Sprintf("Tin %d", i)
}

func testMetrics(x *exposition, t *TestResult) {
	x.addInt("sqm_test_info", 1, "mode", t.Mode, "server", t.Server, "grade", t.Grade, "rpm_band", t.RPMBand)
	if !t.Start.IsZero() {
		x.add("sqm_test_start_timestamp_seconds", float64(t.Start.UnixNano())/1e9)
	}
	x.add("sqm_test_download_bytes_per_second", t.DownloadBytesPerSecond)
	x.add("sqm_test_upload_bytes_per_second", t.UploadBytesPerSecond)
	for _, l := range []struct {
		load string
		l    Latency
	}{{"idle", t.Idle}, {"loaded", t.Loaded}} {
		x.add("sqm_test_latency_median_seconds", l.l.Median.Seconds(), "load", l.load)
		x.add("sqm_test_latency_p90_seconds", l.l.P90.Seconds(), "load", l.load)
		x.add("sqm_test_probe_loss_ratio", l.l.LossRatio, "load", l.load)
	}
	x.add("sqm_test_induced_latency_seconds", t.Induced.Seconds())
	x.add("sqm_test_round_trips_per_minute", t.RPM)
}
