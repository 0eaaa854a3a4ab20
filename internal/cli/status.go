//go:build linux

package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"sqm/internal/config"
	"sqm/internal/json"
	"sqm/internal/kernel"
	"sqm/internal/plan"
	"sqm/internal/service"
)

func cmdStatus() *command {
	return &command{
		name:    "status",
		summary: "show the shaping trees with their counters",
		usage:   "sqm status [--json | --prom | --prom-file FILE [--prom-interval D]] [--state-dir DIR] [IFACE...]",
		help: `Shows, for every interface sqm shapes (or the named ones, shaped or not),
where the shaping came from and the kernel's tree right now: every qdisc
and class with bytes, packets, drops, overlimits, backlog and ECN marks,
and cake's per-tin statistics as a table. The IFB carrying an interface's
ingress shaping is shown after it. --json prints the same as JSON, in
the stable snake_case layout docs/status-json.md describes.

--prom prints the shaped interfaces' counters in Prometheus text format,
as the daemon's /metrics serves them (per interface and direction: bytes,
packets, drops, overlimits, backlog, configured rate; per cake tin:
delays, drops, ECN marks, ACK drops, flows). --prom-file writes the same
to a file, replaced atomically, for a textfile collector, e.g. from cron:

  sqm status --prom-file /var/prometheus/sqm.prom

With --prom-interval 30s it keeps rewriting the file, and 32-bit kernel
counters that wrap keep counting up instead of looking like a reset.

Drops on the shaper are normal under load: that is the AQM keeping the
queue short. A growing backlog with no drops means the shaper is not the
bottleneck (rate set above the line rate).

Example (piece_of_cake: cake at the root, handle 1:, and on the IFB):

  $ sqm status eth1
  eth1: section "wan" (/etc/config/sqm:3), applied 2026-11-29 23:40:01 UTC (5m3s ago)
    download 85000 kbit/s, upload 10000 kbit/s, piece_of_cake/cake, ethernet overhead 34
    tree as applied
           kind     handle  parent   bytes  packets  drops  overlimits  backlog   ecn marks
    qdisc  cake     1:      root     1.2GB  901234   1021   0           1.5kB/1p  311
    qdisc  ingress  ffff:   ingress  9.8GB  7012345  0      0           0B/0p     0
    filters: 1
    cake 1: tins:
                           Tin 0
                thresh  10.0Mbit
    ...`,
		flags: func(fs *flag.FlagSet) {
			stateDirFlag(fs)
			fs.Bool("json", false, "print as JSON (schema: docs/status-json.md)")
			statusPromFlags(fs)
		},
		run: func(ctx context.Context, env *Env, fs *flag.FlagSet, args []string) error {
			if prom, err := promRequested(fs); err != nil || prom {
				if err != nil {
					return err
				}
				return statusProm(ctx, env, fs, args)
			}
			store := &service.Store{Dir: stateDir(env, fs)}
			states, serr := store.All()
			intr, ierr := store.Interrupted()
			conn, err := kernel.Open()
			if err != nil {
				return err
			}
			defer conn.Close()
			rep := statusReport(conn, states, intr, args, time.Now(), store)
			refused, rerr := store.Refused()
			rep.withRefused(refused, args)
			serr = errors.Join(serr, rerr)
			if flagBool(fs, "json") {
				enc := json.NewEncoder(env.Stdout)
				enc.SetIndent("", "  ")
				if err := enc.Encode(statusJSON(rep, store.Dir)); err != nil {
					return err
				}
			} else {
				printStatus(env.Stdout, rep, store.Dir, time.Now())
			}
			return errors.Join(serr, ierr, rep.err())
		},
	}
}

// StatusEntry is one device in `sqm status`.
type statusEntry struct {
	Device string `json:"device"`
	// Of is the interface whose ingress this IFB shapes.
	Of    string         `json:"ifb_of,omitempty"`
	State *service.State `json:"state,omitempty"`
	// Interrupted is an apply killed before it saved a state: the kernel
	// may hold half of sqm's tree, which nothing else describes.
	Interrupted *service.Interrupted `json:"interrupted,omitempty"`
	Kernel      *kernel.DeviceStatus `json:"kernel,omitempty"`
	// Drift is how the kernel's tree differs from the applied plan; empty
	// when it matches (or there is no state to compare with).
	Drift string `json:"drift,omitempty"`
	Error string `json:"error,omitempty"`
	// Autorate is the daemon's autorate of this queue (its status file);
	// nil when autorate is off or no daemon runs it.
	Autorate *service.AutorateStatus `json:"autorate,omitempty"`
}

type statusOutput struct {
	Devices []statusEntry `json:"devices"`
	// Refused are the sections the last start, reload or daemon pass
	// refused (service.Store.Refused).
	Refused []service.Refused `json:"refused,omitempty"`
}

// withRefused adds the refused sections, those of ifaces if any are named
// (a section whose interface option is the broken one names none, and is
// shown only in the full report).
func (r *statusOutput) withRefused(rs []service.Refused, ifaces []string) {
	for _, x := range rs {
		if len(ifaces) == 0 || slices.Contains(ifaces, x.Interface) {
			r.Refused = append(r.Refused, x)
		}
	}
}

func (r *statusOutput) err() error {
	var errs []error
	for _, e := range r.Devices {
		if e.Error != "" && e.State == nil && e.Of == "" {
			errs = append(errs, fmt.Errorf("%s: %s", e.Device, e.Error))
		}
	}
	return errors.Join(errs...)
}

// statusKernel is the part of *kernel.Conn status needs.
type statusKernel interface {
	Status(devices ...string) ([]kernel.DeviceStatus, error)
	LinkMTU(iface string) (int, error)
	Matches(p *plan.Plan) (ok bool, diff string, err error)
	ShaperRate(dev string) (uint64, error)
}

func statusReport(k statusKernel, states []*service.State, intr map[string]service.Interrupted, ifaces []string, now time.Time, store *service.Store) *statusOutput {
	byIface := map[string]*service.State{}
	for _, st := range states {
		byIface[st.Interface] = st
	}
	if len(ifaces) == 0 {
		ifaces = service.Interfaces(states)
		for i := range intr {
			ifaces = append(ifaces, i)
		}
		slices.Sort(ifaces)
	}
	out := &statusOutput{Devices: []statusEntry{}}
	for _, i := range ifaces {
		st := byIface[i]
		e := deviceEntry(k, i, "", st, store, now)
		if p, ok := intr[i]; ok {
			e.Interrupted = &p
		}
		out.Devices = append(out.Devices, e)
		if st != nil && st.Owned.IFB != "" {
			out.Devices = append(out.Devices, deviceEntry(k, st.Owned.IFB, i, nil, nil, now))
		}
	}
	return out
}

func deviceEntry(k statusKernel, dev, of string, st *service.State, store *service.Store, now time.Time) statusEntry {
	e := statusEntry{Device: dev, Of: of, State: st}
	if st != nil && st.Queue.Autorate.Enabled && store != nil {
		e.Autorate, _ = store.Autorate(dev)
	}
	ds, err := k.Status(dev)
	switch {
	case err != nil && errors.Is(err, kernel.ErrNoLink) && st != nil:
		e.Error = "interface does not exist (stale state: the next 'sqm start' or the daemon cleans it)"
	case err != nil:
		e.Error = err.Error()
	case len(ds) == 1:
		e.Kernel = &ds[0]
	}
	if st != nil && e.Kernel != nil {
		e.Drift = drift(k, st, e.Autorate, now)
	}
	return e
}

// drift is service.Drift (the daemon's check) on one line; for a queue the
// daemon autorates, at the rates it runs (service.AutorateDrift).
func drift(k statusKernel, st *service.State, ar *service.AutorateStatus, now time.Time) string {
	d := ""
	if ar != nil && ar.Running && !autorateStale(ar, now) {
		d = service.AutorateDrift(k, buildPlan, st, ar)
	} else {
		d = service.Drift(k, buildPlan, st)
	}
	return strings.Join(strings.Fields(d), " ")
}

func printStatus(w io.Writer, rep *statusOutput, dir string, now time.Time) {
	defer printRefused(w, rep.Refused, len(rep.Devices) > 0, now)
	if len(rep.Devices) == 0 {
		fmt.Fprintf(w, "sqm is not shaping any interface (no state in %s)\n", dir)
		return
	}
	for i, e := range rep.Devices {
		if i > 0 {
			fmt.Fprintln(w)
		}
		fmt.Fprintf(w, "%s: %s\n", e.Device, deviceHeadline(e, now))
		if st := e.State; st != nil {
			fmt.Fprintf(w, "  %s\n", sectionSummary(&st.Queue))
			if st.Queue.Autorate.Enabled {
				printAutorate(w, e.Autorate, now)
			}
			if e.Kernel != nil {
				if e.Drift != "" {
					fmt.Fprintf(w, "  tree DIFFERS from what sqm applied: %s\n  ('sqm start' or the daemon restores it)\n", e.Drift)
				} else {
					fmt.Fprintln(w, "  tree as applied")
				}
			}
		}
		if e.Error != "" {
			fmt.Fprintf(w, "  error: %s\n", e.Error)
		}
		if e.Kernel != nil {
			printDevice(w, e.Kernel)
		}
	}
}

// printRefused lists the sections sqm refused to start, with every reason
// (file:line first): they are why an interface is not shaped, or still
// shaped as before an edit.
func printRefused(w io.Writer, rs []service.Refused, after bool, now time.Time) {
	for i, r := range rs {
		if i == 0 && after {
			fmt.Fprintln(w)
		}
		iface := r.Interface
		if iface == "" {
			iface = "no valid interface"
		}
		fmt.Fprintf(w, "REFUSED: section %q (%s, %s), refused %s (%s ago): not started; its interface keeps what it had\n",
			r.Section, r.SectionPos, iface, r.At.UTC().Format("2006-01-02 15:04:05 UTC"), now.Sub(r.At).Round(time.Second))
		for _, e := range r.Errors {
			fmt.Fprintf(w, "  %s\n", e)
		}
	}
}

func deviceHeadline(e statusEntry, now time.Time) string {
	if e.Of != "" {
		return "IFB shaping the ingress of " + e.Of
	}
	st := e.State
	if p := e.Interrupted; p != nil && st == nil {
		return fmt.Sprintf("an sqm apply (pid %d, started %s) was interrupted here; the kernel may hold half its tree: 'sqm start' finishes it, 'sqm stop' removes it",
			p.PID, p.Started.UTC().Format("2006-01-02 15:04:05 UTC"))
	}
	if st == nil {
		return "not shaped by sqm"
	}
	src := st.SectionPos
	if st.Source == service.SourceCLI {
		src = "sqm apply"
	}
	return fmt.Sprintf("section %q (%s), applied %s (%s ago)", st.Section, src,
		st.AppliedAt.UTC().Format("2006-01-02 15:04:05 UTC"), now.Sub(st.AppliedAt).Round(time.Second))
}

func printDevice(w io.Writer, d *kernel.DeviceStatus) {
	var tw columns
	tw.add("  \tkind\thandle\tparent\tbytes\tpackets\tdrops\toverlimits\tbacklog\tecn marks")
	for _, q := range d.Qdiscs {
		tw.add(fmt.Sprintf("  qdisc\t%s\t%s\t%s\t%s", q.Kind, q.Handle, q.Parent, counters(q.Counters)))
	}
	for _, c := range d.Classes {
		tw.add(fmt.Sprintf("  class\t%s\t%s\t%s\t%s", c.Kind, c.ClassID, c.Parent, counters(c.Counters)))
	}
	tw.write(w)
	if d.Filters > 0 {
		fmt.Fprintf(w, "  filters: %d\n", d.Filters)
	}
	if d.CodelPolice != nil {
		printCodelPolice(w, d.CodelPolice)
	}
	for _, q := range d.Qdiscs {
		if q.Cake != nil && len(q.Cake.Tins) > 0 {
			fmt.Fprintf(w, "  cake %s tins:\n", q.Handle)
			printTins(w, q.Cake)
		}
	}
}

// sectionSummary says in one line what the section asked for.
func sectionSummary(q *config.Queue) string {
	dir := func(kbit uint64) string {
		if kbit == 0 {
			return "unshaped"
		}
		return fmt.Sprintf("%d kbit/s", kbit)
	}
	s := fmt.Sprintf("download %s, upload %s, %s/%s", dir(q.Download), dir(q.Upload), strings.TrimSuffix(q.Script, ".qos"), q.Qdisc)
	if q.LinkLayer != "" && q.LinkLayer != "none" {
		s += fmt.Sprintf(", %s overhead %d", q.LinkLayer, q.Overhead)
	}
	return s
}

func counters(c kernel.Counters) string {
	return fmt.Sprintf("%sB\t%d\t%d\t%d\t%sB/%dp\t%d", humanBytes(c.Bytes), c.Packets, c.Drops, c.Overlimits,
		humanBytes(uint64(c.BacklogBytes)), c.BacklogPackets, c.ECNMarks)
}

// tinNames are tc's names for cake's tins by tin count (diffserv3,
// diffserv4, diffserv8/precedence, besteffort).
func tinNames(n int) []string {
	switch n {
	case 1:
		return []string{"Tin 0"}
	case 3:
		return []string{"Bulk", "Best Effort", "Voice"}
	case 4:
		return []string{"Bulk", "Best Effort", "Video", "Voice"}
	}
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("Tin %d", i)
	}
	return names
}

func printTins(w io.Writer, c *kernel.CakeStats) {
	tw := columns{right: true}
	row := func(label string, f func(t kernel.CakeTin) string) {
		cells := []string{"    " + label}
		for _, t := range c.Tins {
			cells = append(cells, f(t))
		}
		tw.add(strings.Join(cells, "\t") + "\t")
	}
	tw.add("    \t" + strings.Join(tinNames(len(c.Tins)), "\t") + "\t")
	us := func(v uint32) string { return (time.Duration(v) * time.Microsecond).String() }
	row("thresh", func(t kernel.CakeTin) string { return humanRate(t.ThresholdRate * 8) })
	row("target", func(t kernel.CakeTin) string { return us(t.TargetUS) })
	row("pk delay", func(t kernel.CakeTin) string { return us(t.PeakDelayUS) })
	row("av delay", func(t kernel.CakeTin) string { return us(t.AvgDelayUS) })
	row("sp delay", func(t kernel.CakeTin) string { return us(t.BaseDelayUS) })
	row("backlog", func(t kernel.CakeTin) string { return humanBytes(uint64(t.BacklogBytes)) + "B" })
	row("pkts", func(t kernel.CakeTin) string { return fmt.Sprint(t.SentPackets) })
	row("bytes", func(t kernel.CakeTin) string { return humanBytes(t.SentBytes) + "B" })
	row("drops", func(t kernel.CakeTin) string { return fmt.Sprint(t.DroppedPackets) })
	row("marks", func(t kernel.CakeTin) string { return fmt.Sprint(t.ECNMarkedPackets) })
	row("ack drop", func(t kernel.CakeTin) string { return fmt.Sprint(t.ACKDropPackets) })
	row("sp/bk/un flows", func(t kernel.CakeTin) string {
		return fmt.Sprintf("%d/%d/%d", t.SparseFlows, t.BulkFlows, t.UnresponsiveFlows)
	})
	tw.write(w)
}

// humanBytes prints a byte count with an SI prefix, as tc -s does for
// rates: 1.2 M for 1234567.
func humanBytes(n uint64) string {
	const unit = 1000
	if n < unit {
		return fmt.Sprintf("%d", n)
	}
	f, p := float64(n), 0
	for f >= unit && p < 5 {
		f /= unit
		p++
	}
	return fmt.Sprintf("%.1f%c", f, "kMGTP"[p-1])
}

func humanRate(bits uint64) string {
	return humanBytes(bits) + "bit"
}

// autorateStale: the daemon rewrites its autorate status every
// WriteEveryS (a second under load, rarely while idle); one not rewritten
// within twice that and 3 s more, and never within 5 s, was left by a
// daemon that died. A file without WriteEveryS is from a daemon that
// wrote at least once a second.
func autorateStale(a *service.AutorateStatus, now time.Time) bool {
	every := time.Duration(a.WriteEveryS * float64(time.Second))
	return now.Sub(a.UpdatedAt) > max(5*time.Second, 2*every+3*time.Second)
}

// printAutorate shows the daemon's autorate of one queue: per direction
// the rate it set, the delay and load it saw, and why the rate is what
// it is.
func printAutorate(w io.Writer, a *service.AutorateStatus, now time.Time) {
	switch {
	case a == nil:
		fmt.Fprintln(w, "  autorate: not running (no daemon runs it): shaped at the base rates")
		return
	case autorateStale(a, now):
		fmt.Fprintf(w, "  autorate: STALE: daemon pid %d last updated it %s ago (killed?); the rates below may no longer run\n", a.PID, now.Sub(a.UpdatedAt).Round(time.Second))
	case !a.Running && a.Error != "":
		fmt.Fprintf(w, "  autorate: NOT RUNNING: %s\n", a.Error)
		return
	case a.Fallback:
		fmt.Fprintf(w, "  autorate: FALLBACK: %s\n", a.Error)
	default:
		state := "running"
		if a.Idle {
			state = "idle, probing slowly"
		}
		fmt.Fprintf(w, "  autorate: %s (daemon pid %d, %d rate changes, updated %s ago)\n", state, a.PID, a.RateChanges, now.Sub(a.UpdatedAt).Round(100*time.Millisecond))
	}
	for _, d := range []struct {
		name string
		d    *service.AutorateDir
	}{{"download", a.Download}, {"upload", a.Upload}} {
		if d.d == nil {
			continue
		}
		delay := "no reflector answers"
		if d.d.DelayMs >= 0 {
			delay = fmt.Sprintf("delay +%.1f ms (target %.0f)", d.d.DelayMs, d.d.TargetMs)
		}
		fmt.Fprintf(w, "    %-8s %6d kbit/s (%d..%d, base %d), %s, load %.0f%%, %s; last change: %s, %.1fs ago\n",
			d.name, d.d.RateKbit, d.d.MinKbit, d.d.MaxKbit, d.d.BaseKbit, delay, 100*d.d.Load, d.d.Reason, d.d.LastChange, d.d.LastChangeAgoS)
	}
	for _, r := range a.Reflectors {
		state := "no reply yet"
		if r.Replied {
			if r.OneWay {
				state = fmt.Sprintf("one-way +%.1f ms down, +%.1f ms up", r.RiseMs[0], r.RiseMs[1])
			} else {
				state = fmt.Sprintf("round trip +%.1f ms", r.RiseMs[0])
			}
		}
		if r.Lost > 0 {
			state += fmt.Sprintf(", %d lost in a row", r.Lost)
		}
		if r.Replace != "" {
			state += ", to replace: " + r.Replace
		}
		fmt.Fprintf(w, "    reflector %s: %s\n", r.Target, state)
	}
}
