package report

import (
	"compress/gzip"
	"fmt"
	"io"
	"math"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"time"

	"sqm/internal/bloat"
	"sqm/internal/json"
)

// flentVersion is the flent release whose data format (file format version
// 4) this writer follows; flent refuses files newer than it understands.
const flentVersion = "2.1.1"

// flentSeries maps our probe kinds to flent's RRUL series names.
var flentPing = map[string]string{
	"udp-ef": "Ping (ms) UDP EF",
	"udp-be": "Ping (ms) UDP BE",
	"udp-bk": "Ping (ms) UDP BK",
	"icmp":   "Ping (ms) ICMP",
}

// Flent writes r as a gzipped flent data file (format version 4) of flent's
// "rrul" test, with the series names rrul's plots use ("TCP download BE" ...
// "Ping (ms) ICMP", plus the avg/sum/totals series flent would compute), so
// `flent -i FILE -p all_scaled` plots it. Only rrul runs map onto a flent
// test; other modes are refused. filename is recorded in the metadata.
func Flent(w io.Writer, r *bloat.Result, filename string) error {
	if r.Mode != bloat.ModeRRUL {
		return fmt.Errorf("report: flent output needs an rrul run (this was %s); use --mode rrul", r.Mode)
	}
	doc := flentDoc(r, filename)
	zw := gzip.NewWriter(w)
	enc := json.NewEncoder(zw)
	enc.SetIndent("", "  ")
	if err := enc.Encode(doc); err != nil {
		return fmt.Errorf("report: write flent data: %w", err)
	}
	if err := zw.Close(); err != nil {
		return fmt.Errorf("report: write flent data: %w", err)
	}
	return nil
}

// WriteFlentFile writes the flent data file to path (conventionally
// *.flent.gz).
func WriteFlentFile(path string, r *bloat.Result) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("report: %w", err)
	}
	if err := Flent(f, r, filepath.Base(path)); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("report: %w", err)
	}
	return nil
}

// flentTime formats like flent's format_date with utc=True.
func flentTime(t time.Time) string {
	return t.UTC().Format("2006-01-02T15:04:05.000000Z")
}

func flentDoc(r *bloat.Result, filename string) map[string]any {
	x := r.Series.TS
	n := len(x)
	t0 := float64(r.Start.UnixNano()) / 1e9
	results := map[string][]*float64{}
	raw := map[string][]map[string]any{}
	seriesMeta := map[string]any{}

	val := func(v float64) *float64 { return &v }
	// TCP streams: values only while the stream ran, as netperf reports.
	var downNames, upNames []string
	for _, s := range r.Streams {
		dir := "download"
		if s.Dir == bloat.DirUp {
			dir = "upload"
		}
		name := fmt.Sprintf("TCP %s %s", dir, s.Label)
		vals := make([]*float64, n)
		var rv []map[string]any
		for i := 0; i < n && i < len(s.MbpsSeries); i++ {
			if x[i] <= s.StartS || x[i] > s.EndS+r.StepS/2 {
				continue
			}
			vals[i] = val(s.MbpsSeries[i])
			rv = append(rv, map[string]any{"t": t0 + x[i], "val": s.MbpsSeries[i]})
		}
		results[name] = vals
		raw[name] = rv
		seriesMeta[name] = map[string]any{"MARKING": strings.ToLower(s.Label), "UNITS": "Mbits/s", "MEAN_VALUE": s.Mbps}
		if s.Dir == bloat.DirUp {
			upNames = append(upNames, name)
		} else {
			downNames = append(downNames, name)
		}
	}
	// Latency probes: each step holds the mean of the probes sent in it.
	var pingNames []string
	for _, p := range r.Probes {
		name, ok := flentPing[p.Kind]
		if !ok {
			continue
		}
		sum := make([]float64, n)
		cnt := make([]int, n)
		var rv []map[string]any
		for _, s := range r.Samples {
			if s.Kind != p.Kind || s.Lost {
				continue
			}
			rv = append(rv, map[string]any{"t": t0 + s.TS, "val": s.RTTMs, "seq": s.Seq})
			i := int(math.Ceil(s.TS/r.StepS - 1e-9))
			if i >= 0 && i < n {
				sum[i] += s.RTTMs
				cnt[i]++
			}
		}
		vals := make([]*float64, n)
		for i := range vals {
			if cnt[i] > 0 {
				vals[i] = val(sum[i] / float64(cnt[i]))
			}
		}
		results[name] = vals
		raw[name] = rv
		seriesMeta[name] = map[string]any{"UNITS": "ms", "MEAN_VALUE": p.Loaded.MeanMs, "RTT_MEDIAN": p.Loaded.MedianMs,
			"PACKET_LOSS_RATE": p.Loaded.LossPct / 100}
		pingNames = append(pingNames, name)
	}
	// The computed series flent's rrul defines.
	combine := func(names []string, avg bool) []*float64 {
		out := make([]*float64, n)
		for i := range out {
			s, c := 0.0, 0
			for _, name := range names {
				if v := results[name][i]; v != nil {
					s += *v
					c++
				}
			}
			if c > 0 {
				if avg {
					s /= float64(c)
				}
				out[i] = val(s)
			}
		}
		return out
	}
	results["TCP download sum"] = combine(downNames, false)
	results["TCP download avg"] = combine(downNames, true)
	results["TCP upload sum"] = combine(upNames, false)
	results["TCP upload avg"] = combine(upNames, true)
	results["TCP totals"] = combine(append(append([]string{}, downNames...), upNames...), false)
	results["Ping (ms) avg"] = combine(pingNames, true)

	host := r.Server
	ipVersion := 4
	if ap, err := netip.ParseAddrPort(r.Server); err == nil {
		host = ap.Addr().String()
		if ap.Addr().Is6() {
			ipVersion = 6
		}
	}
	localHost, _ := os.Hostname()
	meta := map[string]any{
		"NAME":            "rrul",
		"TITLE":           "sqm test",
		"NOTE":            flentNote(r),
		"HOST":            host,
		"HOSTS":           []string{host},
		"LOCAL_HOST":      localHost,
		"TIME":            flentTime(r.Start),
		"T0":              flentTime(r.Start),
		"LENGTH":          r.LoadS,
		"TOTAL_LENGTH":    r.TotalS,
		"STEP_SIZE":       r.StepS,
		"FLENT_VERSION":   flentVersion,
		"IP_VERSION":      ipVersion,
		"DATA_FILENAME":   filename,
		"TEST_PARAMETERS": map[string]any{},
		"SERIES_META":     seriesMeta,
		"BATCH_NAME":      nil,
		"BATCH_TIME":      nil,
		"BATCH_TITLE":     nil,
		"BATCH_UUID":      nil,
	}
	return map[string]any{
		"metadata":   meta,
		"version":    4,
		"x_values":   x,
		"results":    results,
		"raw_values": raw,
	}
}

// flentNote says in the file's metadata who wrote it and which server put
// the load on the link: flent's own files come from netperf clients, and a
// reader comparing the two must know whether this one did too.
func flentNote(r *bloat.Result) string {
	load := "sqm's own server"
	if r.Servers != nil && r.Servers.Load != "" {
		load = r.Servers.Load
	}
	return fmt.Sprintf("written by sqm test (%s mode); load by %s", r.Mode, load)
}
