//go:build linux

package cli

import (
	"time"

	"sqm/internal/config"
	"sqm/internal/json"
	"sqm/internal/kernel"
	"sqm/internal/service"
	"sqm/internal/units"
)

// statusSchema is the version of `sqm status --json`'s layout. It changes
// only when a field is renamed, removed or changes meaning (adding fields
// does not), so scripts can check it. docs/status-json.md describes it.
const statusSchema = 1

// statusDoc is `sqm status --json`. Its field names are part of sqm's
// interface and are written out here, snake_case, rather than derived from
// internal types (service.State, config.Queue), whose Go names and layout
// may change: scripts reading the JSON must not break when they do.
type statusDoc struct {
	Schema   int         `json:"schema"`
	StateDir string      `json:"state_dir"`
	Devices  []statusDev `json:"devices"`
	// Refused are enabled sections the last start, reload or daemon pass
	// refused; absent when there are none.
	Refused []statusRefused `json:"refused,omitempty"`
}

// statusRefused is one refused section.
type statusRefused struct {
	Section    string    `json:"section"`
	Source     string    `json:"source"`
	SectionPos string    `json:"section_pos,omitempty"`
	Interface  string    `json:"interface,omitempty"`
	Errors     []string  `json:"errors"`
	RefusedAt  time.Time `json:"refused_at"`
}

// statusDev is one device: a shaped (or named) interface, or the IFB that
// shapes an interface's ingress.
type statusDev struct {
	Device string `json:"device"`
	// IFBOf is set on IFB entries: the interface whose ingress it shapes.
	IFBOf string `json:"ifb_of,omitempty"`
	// Shaping is what sqm applied; absent when sqm does not shape the
	// device (and on IFB entries, which belong to their interface's).
	Shaping *statusShaping `json:"shaping,omitempty"`
	// Interrupted is an apply killed before it saved a state.
	Interrupted *service.Interrupted `json:"interrupted,omitempty"`
	// TreeMatches says whether the kernel still holds the applied tree;
	// Drift says how it differs. Both absent when there is nothing to
	// compare (no state, or the device is missing).
	TreeMatches *bool                `json:"tree_matches,omitempty"`
	Drift       string               `json:"drift,omitempty"`
	Kernel      *kernel.DeviceStatus `json:"kernel,omitempty"`
	Error       string               `json:"error,omitempty"`
	// Autorate is the daemon's autorate of the queue (service's status
	// file, snake_case as docs/status-json.md lists it); absent when
	// autorate is off or no daemon runs it.
	Autorate *service.AutorateStatus `json:"autorate,omitempty"`
}

// statusShaping is one applied section.
type statusShaping struct {
	Section string `json:"section"`
	// Source is the config file, or "cli" for `sqm apply`.
	Source     string    `json:"source"`
	SectionPos string    `json:"section_pos,omitempty"`
	AppliedAt  time.Time `json:"applied_at"`
	PID        int       `json:"pid"`
	IFB        string    `json:"ifb,omitempty"`
	// Options are the section's effective options under their UCI names.
	Options statusOptions `json:"options"`
	// Plan is the tree sqm applied, as `sqm plan --json` prints it.
	Plan json.RawMessage `json:"plan,omitempty"`
}

// statusOptions are a config.Queue under sqm-scripts' UCI option names
// (tcMTU, tcTSIZE and tcMPU become tc_mtu, tc_tsize and tc_mpu), with every
// default resolved.
type statusOptions struct {
	Enabled       bool   `json:"enabled"`
	Interface     string `json:"interface"`
	Download      uint64 `json:"download"` // kbit/s, 0: ingress not shaped
	Upload        uint64 `json:"upload"`   // kbit/s, 0: egress not shaped
	Qdisc         string `json:"qdisc"`
	Script        string `json:"script"` // without ".qos"
	SquashDSCP    bool   `json:"squash_dscp"`
	SquashIngress bool   `json:"squash_ingress"`
	IngressECN    bool   `json:"ingress_ecn"`
	EgressECN     bool   `json:"egress_ecn"`
	ILimit        uint32 `json:"ilimit"` // packets, 0: the recipe's default
	ELimit        uint32 `json:"elimit"`
	ITarget       string `json:"itarget"` // "auto", "default" or a time like "5ms"
	ETarget       string `json:"etarget"`
	IQdiscOpts    string `json:"iqdisc_opts"`
	EQdiscOpts    string `json:"eqdisc_opts"`
	LinkLayer     string `json:"linklayer"`
	Overhead      int    `json:"overhead"`
	TCMTU         uint32 `json:"tc_mtu"`
	TCTSize       uint32 `json:"tc_tsize"`
	TCMPU         uint32 `json:"tc_mpu"`
	LLAM          string `json:"linklayer_adaptation_mechanism"`
	DebugLogging  bool   `json:"debug_logging"`
	Verbosity     int    `json:"verbosity"`
}

func targetString(t config.Target) string {
	switch t.Mode {
	case config.TargetDefault:
		return "default"
	case config.TargetExplicit:
		return units.FormatTime(t.Value)
	}
	return "auto"
}

func optionsJSON(q *config.Queue) statusOptions {
	return statusOptions{
		Enabled: q.Enabled, Interface: q.Interface, Download: q.Download, Upload: q.Upload,
		Qdisc: q.Qdisc, Script: q.Script, SquashDSCP: q.SquashDSCP, SquashIngress: q.SquashIngress,
		IngressECN: q.IngressECN, EgressECN: q.EgressECN, ILimit: q.ILimit, ELimit: q.ELimit,
		ITarget: targetString(q.ITarget), ETarget: targetString(q.ETarget),
		IQdiscOpts: q.IQdiscOpts, EQdiscOpts: q.EQdiscOpts, LinkLayer: q.LinkLayer, Overhead: q.Overhead,
		TCMTU: q.StabMTU, TCTSize: q.StabTSize, TCMPU: q.StabMPU, LLAM: q.LLAM,
		DebugLogging: q.DebugLogging, Verbosity: q.Verbosity,
	}
}

// statusJSON converts the report to the documented schema.
func statusJSON(rep *statusOutput, dir string) statusDoc {
	doc := statusDoc{Schema: statusSchema, StateDir: dir, Devices: []statusDev{}}
	for _, e := range rep.Devices {
		d := statusDev{Device: e.Device, IFBOf: e.Of, Kernel: e.Kernel, Error: e.Error, Drift: e.Drift, Interrupted: e.Interrupted, Autorate: e.Autorate}
		if st := e.State; st != nil {
			d.Shaping = &statusShaping{
				Section: st.Section, Source: st.Source, SectionPos: st.SectionPos,
				AppliedAt: st.AppliedAt.UTC(), PID: st.PID, IFB: st.Owned.IFB,
				Options: optionsJSON(&st.Queue), Plan: st.Plan,
			}
			if e.Kernel != nil {
				ok := e.Drift == ""
				d.TreeMatches = &ok
			}
		}
		doc.Devices = append(doc.Devices, d)
	}
	for _, r := range rep.Refused {
		doc.Refused = append(doc.Refused, statusRefused{Section: r.Section, Source: r.Source, SectionPos: r.SectionPos,
			Interface: r.Interface, Errors: r.Errors, RefusedAt: r.At.UTC()})
	}
	return doc
}
