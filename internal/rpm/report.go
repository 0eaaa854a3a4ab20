package rpm

import (
	"fmt"
	"io"
	"strings"

	"sqm/internal/json"
)

// JSON writes the result as `sqm test --rpm --json` prints it.
func JSON(w io.Writer, r *Result) error {
	e := json.NewEncoder(w)
	e.SetIndent("", "  ")
	return e.Encode(r)
}

// Text writes the summary a person reads: the headline RPM with its band
// and grade, as `sqm test` shows them, then the draft's parts so the
// number can be traced to the round trips that made it.
func Text(w io.Writer, r *Result) error {
	var b strings.Builder
	f := func(format string, a ...any) { fmt.Fprintf(&b, format, a...) }
	f("Responsiveness test against %s (%s, %s)\n", r.ConfigURL, r.Server, r.Protocol)
	if r.Direction != "both" {
		f("Load: %s only\n", r.Direction)
	}
	f("\n")
	f("  %-34s %10.2f\n", "Download (Mbit/s)", r.DownloadMbps)
	f("  %-34s %10.2f\n", "Upload (Mbit/s)", r.UploadMbps)
	f("  %-34s %10.0f  (%.1f ms)\n", "Idle responsiveness (RPM)", r.IdleRPM, r.IdleRTTMs)
	f("  %-34s %10.0f  (%.1f ms) %s\n", "Responsiveness under load (RPM)", r.RPM, r.LoadedRTTMs, r.RPMBand)
	f("  %-34s %10.1f  grade %s\n", "Induced latency (ms)", r.InducedMs, r.Grade)
	f("  %-34s %10s / %s\n", "Confidence (goodput / RPM)", r.GoodputConfidence, r.ResponsivenessConfidence)
	f("\n  %-22s %9s %9s %9s %9s %9s %9s\n", "trimmed means (ms)", "TCP", "TLS", "HTTP new", "HTTP load", "foreign", "self")
	for _, row := range []struct {
		name string
		a    Aggregate
	}{{"idle", r.Idle}, {"loaded", r.Loaded}} {
		f("  %-22s %9.1f %9.1f %9.1f %9s %9s %9s\n", fmt.Sprintf("%s (%d+%d probes)", row.name, row.a.Foreign, row.a.Self),
			row.a.TCPMs, row.a.TLSMs, row.a.HTTPForeignMs, optMs(row.a.HTTPSelfMs), optRPM(row.a.ForeignRPM), optRPM(row.a.SelfRPM))
	}
	f("  (foreign and self in RPM; RPM = their mean, draft-ietf-ippm-responsiveness)\n")
	if len(r.Notes) > 0 {
		f("\nNotes:\n")
		for _, n := range r.Notes {
			f("  %s\n", n)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func optMs(v float64) string {
	if v == 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f", v)
}

func optRPM(v float64) string {
	if v == 0 {
		return "-"
	}
	return fmt.Sprintf("%.0f", v)
}
