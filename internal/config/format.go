package config

import (
	"strconv"
	"strings"

	"sqm/internal/units"
)

// Format writes q as a `config queue` section that Parse reads back as q
// (every option spelled out, defaults included, so the file means the same
// whatever sqm-scripts' defaults become). It is how a tool that built a
// queue in memory (the lab) hands it to `sqm daemon`, which reads only
// files. Name, Pos and OptionPos are where a section came from, not what
// it says: the section is named name.
func Format(q *Queue, name string) []byte {
	var b strings.Builder
	b.WriteString("config queue " + quote(name) + "\n")
	opt := func(k, v string) {
		if v != "" { // empty means unset: the default
			b.WriteString("\toption " + k + " " + quote(v) + "\n")
		}
	}
	bit := func(v bool) string {
		if v {
			return "1"
		}
		return "0"
	}
	ecn := func(v bool) string {
		if v {
			return "ECN"
		}
		return "NOECN"
	}
	num := func(v uint64) string { return strconv.FormatUint(v, 10) }
	unset0 := func(v uint64) string { // 0: the default, written as nothing
		if v == 0 {
			return ""
		}
		return num(v)
	}
	opt("enabled", bit(q.Enabled))
	opt("interface", q.Interface)
	opt("download", num(q.Download))
	opt("upload", num(q.Upload))
	opt("qdisc", q.Qdisc)
	opt("script", q.Script)
	opt("squash_dscp", bit(q.SquashDSCP))
	opt("squash_ingress", bit(q.SquashIngress))
	opt("ingress_ecn", ecn(q.IngressECN))
	opt("egress_ecn", ecn(q.EgressECN))
	opt("ilimit", unset0(uint64(q.ILimit)))
	opt("elimit", unset0(uint64(q.ELimit)))
	opt("itarget", formatTarget(q.ITarget))
	opt("etarget", formatTarget(q.ETarget))
	opt("iqdisc_opts", q.IQdiscOpts)
	opt("eqdisc_opts", q.EQdiscOpts)
	opt("linklayer", q.LinkLayer)
	opt("overhead", strconv.Itoa(q.Overhead))
	opt("tcMTU", num(uint64(q.StabMTU)))
	opt("tcTSIZE", num(uint64(q.StabTSize)))
	opt("tcMPU", num(uint64(q.StabMPU)))
	opt("linklayer_adaptation_mechanism", q.LLAM)
	opt("debug_logging", bit(q.DebugLogging))
	opt("verbosity", strconv.Itoa(q.Verbosity))
	a := &q.Autorate
	opt("autorate", bit(a.Enabled))
	opt("autorate_download_min", unset0(a.DownloadMin))
	opt("autorate_download_max", unset0(a.DownloadMax))
	opt("autorate_upload_min", unset0(a.UploadMin))
	opt("autorate_upload_max", unset0(a.UploadMax))
	if a.Target != 0 {
		opt("autorate_target", units.FormatTime(a.Target))
	}
	for _, r := range a.Reflectors {
		b.WriteString("\tlist autorate_reflector " + quote(r) + "\n")
	}
	opt("autorate_probe", a.Probe)
	return []byte(b.String())
}

// formatTarget is itarget/etarget as targetOpt reads it.
func formatTarget(t Target) string {
	switch t.Mode {
	case TargetAuto:
		return "auto"
	case TargetDefault:
		return "default"
	}
	return units.FormatTime(t.Value)
}

// quote is a UCI single-quoted value; a quote inside ends the quoted
// piece, adds a backslash-escaped quote and starts another piece.
func quote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
