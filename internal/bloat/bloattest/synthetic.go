// Package bloattest provides fixed bloat.Results for tests of the packages
// that render them (report, plot), so golden files do not depend on a
// network run.
package bloattest

import (
	"math"
	"time"

	"sqm/internal/bloat"
	"sqm/internal/stats"
)

// Synthetic builds a deterministic rrul Result shaped like a bloated link:
// 20 ms idle, latency climbing to ~300 ms under load, 19/4.8 Mbit/s.
func Synthetic() *bloat.Result {
	r := &bloat.Result{
		FormatVersion: bloat.ResultVersion, Mode: bloat.ModeRRUL, Server: "10.0.0.2:12866",
		Start: time.Date(2026, 11, 29, 23, 30, 0, 0, time.UTC),
		IdleS: 5, LoadS: 20, StepS: 0.2, TotalS: 30,
	}
	n := int(r.TotalS/r.StepS) + 1
	loaded := func(t float64) bool { return t >= 5 && t < 25 }
	for i := 0; i < n; i++ {
		t := float64(i) * r.StepS
		r.Series.TS = append(r.Series.TS, t)
	}
	marks := []struct {
		l string
		d int
	}{{"BE", 0}, {"BK", 8}, {"CS5", 40}, {"EF", 46}}
	for _, dir := range []string{bloat.DirDown, bloat.DirUp} {
		for j, m := range marks {
			s := bloat.Stream{Dir: dir, Label: m.l, DSCP: m.d, StartS: 5.001, EndS: 25.001}
			rate := 4.75 + 0.1*float64(j)
			if dir == bloat.DirUp {
				rate /= 4
			}
			for _, t := range r.Series.TS {
				v := 0.0
				if t > 5.001 && t <= 25.2 {
					v = rate * (1 + 0.2*math.Sin(t*1.3+float64(j)))
				}
				s.MbpsSeries = append(s.MbpsSeries, v)
			}
			s.Mbps = rate
			s.Bytes = int64(rate * 20 * 1e6 / 8)
			r.Streams = append(r.Streams, s)
		}
	}
	for i, t := range r.Series.TS {
		var d, u float64
		for _, s := range r.Streams {
			if s.Dir == bloat.DirDown {
				d += s.MbpsSeries[i]
			} else {
				u += s.MbpsSeries[i]
			}
		}
		r.Series.DownloadMbps = append(r.Series.DownloadMbps, d)
		r.Series.UploadMbps = append(r.Series.UploadMbps, u)
		_ = t
	}
	kinds := []struct {
		k string
		d int
	}{{"udp-ef", 46}, {"udp-be", 0}, {"udp-bk", 8}, {"icmp", 0}}
	var idle, load []float64
	for ki, k := range kinds {
		var ki2, kl []float64
		for i := 0; i < n-1; i++ {
			ts := float64(i)*r.StepS + float64(ki)*0.05
			rtt := 20 + 0.3*math.Sin(float64(i))
			if loaded(ts) {
				rtt = 30 + 270*math.Min(1, (ts-5)/3) + 10*math.Sin(float64(i)*0.7)
			}
			lost := loaded(ts) && i%37 == ki
			s := bloat.Sample{Kind: k.k, Seq: uint64(i), TS: ts, RTTMs: rtt, Lost: lost}
			if lost {
				s.RTTMs = 0
			} else if loaded(ts) {
				load = append(load, rtt)
				kl = append(kl, rtt)
			} else {
				idle = append(idle, rtt)
				ki2 = append(ki2, rtt)
			}
			r.Samples = append(r.Samples, s)
		}
		r.Probes = append(r.Probes, bloat.ProbeSummary{Kind: k.k, DSCP: k.d,
			Idle: stats.Summarize(ki2, len(ki2)), Loaded: stats.Summarize(kl, 100)})
	}
	r.Idle = stats.Summarize(idle, len(idle))
	r.Loaded = stats.Summarize(load, len(load)+10)
	r.DownloadMbps, r.UploadMbps = 19.4, 4.85
	r.InducedMs = r.Loaded.MedianMs - r.Idle.MedianMs
	r.Grade = stats.Grade(r.InducedMs)
	r.RPM = stats.RPM(r.Loaded.MedianMs)
	r.RPMBand = stats.RPMBand(r.RPM)
	r.Phases = []bloat.Phase{
		{Name: "idle-before", StartS: 0, EndS: 5, Latency: r.Idle},
		{Name: "load", StartS: 5, EndS: 25, DownloadMbps: 19.4, UploadMbps: 4.85, Latency: r.Loaded},
		{Name: "idle-after", StartS: 25, EndS: 30, Latency: r.Idle},
	}
	r.Notes = []string{"example note"}
	return r
}
