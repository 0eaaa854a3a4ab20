// Package service is sqm's lifecycle: it turns config sections into plans,
// checks them all before touching the kernel, applies them through a Kernel,
// records what it installed (State) and removes exactly that again. The
// daemon (Daemon) drives the same operations from link events, signals and
// config changes.
//
// Every operation that changes the kernel or the state directory runs under
// the state directory's Lock, taken by the caller (the CLI or the daemon),
// so concurrent sqm invocations serialise and the later ones see the earlier
// ones' state.
package service

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"time"

	"sqm/internal/config"
	"sqm/internal/json"
	"sqm/internal/kernel"
	"sqm/internal/logger"
	"sqm/internal/plan"
)

// PlanFunc validates one section and builds its plan for an interface MTU.
// The CLI wires it to config's Validate and plan.Build; tests may use
// simpler planners.
type PlanFunc func(q *config.Queue, mtu int) (*plan.Plan, error)

// Service runs sqm's lifecycle operations. Its fields are its dependencies;
// none may be nil except Log and Now.
type Service struct {
	Kernel Kernel
	Store  *Store
	Plan   PlanFunc
	Log    *logger.Logger
	Now    func() time.Time
	// Independent makes Apply treat sections separately: one that the
	// kernel refuses is reported and the others are still applied, with
	// no rollback. The daemon wants this (one broken section must not
	// keep the WAN unshaped); the CLI wants all or nothing.
	Independent bool
}

func (s *Service) log() *logger.Logger {
	if s.Log == nil {
		return logger.New(logger.Discard)
	}
	return s.Log
}

func (s *Service) now() time.Time {
	if s.Now == nil {
		return time.Now()
	}
	return s.Now()
}

// Target is one section ready to apply: validated and planned.
type Target struct {
	Queue    config.Queue
	Source   string // config file, or SourceCLI
	Plan     *plan.Plan
	planJSON json.RawMessage
}

// Action says what an operation did to one interface.
type Action string

const (
	ActApplied   Action = "applied"   // the tree was built or changed
	ActUnchanged Action = "unchanged" // the kernel already had this plan
	ActRemoved   Action = "removed"   // sqm's objects were deleted
	ActWaiting   Action = "waiting"   // the interface does not exist yet
	ActStale     Action = "stale"     // state of a vanished interface was cleaned
	ActNotShaped Action = "not-shaped"
	ActSkipped   Action = "skipped" // a later enabled section for an interface
	ActRefused   Action = "refused" // a broken enabled section, not started
)

// Outcome is one line of an operation's report.
type Outcome struct {
	Interface string
	Section   string
	Action    Action
	Detail    string
}

func (o Outcome) String() string {
	who := o.Interface
	if who == "" {
		who = "(no valid interface)"
	}
	s := fmt.Sprintf("%s: %s", who, o.Action)
	if o.Section != "" {
		s += fmt.Sprintf(" (section %q)", o.Section)
	}
	if o.Detail != "" {
		s += ": " + o.Detail
	}
	return s
}

// PrepareOptions select sections.
type PrepareOptions struct {
	// Ifaces limits the operation to sections for these interfaces.
	Ifaces []string
	// AllowMissing makes a section whose interface does not exist a
	// "waiting" outcome instead of an error (the daemon shapes it when it
	// appears).
	AllowMissing bool
	// Refused are the source's enabled sections that did not parse
	// (config.File.Refused). Each is reported, the other sections are
	// applied all the same, and the interface a refused section names
	// keeps the tree it has: a typo in the config does not unshape it.
	Refused []*config.SectionError
}

// Prepared is the checked result of Prepare.
type Prepared struct {
	Targets []Target
	Waiting []config.Queue
	// Skipped are enabled sections for an interface that an earlier
	// enabled section already shapes (config.Effective).
	Skipped []Outcome
	// Refused are the selected sections that cannot start: those of
	// PrepareOptions.Refused and those the planner refused. The others
	// are in Targets and Waiting.
	Refused []*config.SectionError
}

// Prepare validates and plans every section that starts (config.Effective:
// enabled, and the first of several on one interface) selected by o,
// without changing anything. Later sections on an already shaped interface
// are skipped with a warning, not an error, so the other interfaces still
// start. A section that is broken (o.Refused, or one the planner refuses)
// is set aside in Prepared.Refused and the others go on, as sqm-scripts
// starts each section on its own. Problems outside one section (an
// interface that does not exist, IFB collisions) are errors, and then
// nothing is prepared. It reports all problems at once, so one run shows
// the user everything to fix.
func (s *Service) Prepare(qs []config.Queue, source string, o PrepareOptions) (*Prepared, error) {
	want := map[string]bool{}
	for _, i := range o.Ifaces {
		if err := checkIfaceName(i); err != nil {
			return nil, err
		}
		want[i] = true
	}
	var errs []error
	var waiting []Target // planned only to check them
	out := &Prepared{}
	seen := map[string]bool{}
	for _, r := range o.Refused {
		if len(want) > 0 && !want[r.Interface] {
			continue
		}
		seen[r.Interface] = true
		out.Refused = append(out.Refused, r)
	}
	// refuse sets aside a section the planner refused.
	refuse := func(q *config.Queue, err error) { out.Refused = append(out.Refused, config.Refuse(q, err)) }
	start, skipped := config.Effective(qs)
	for _, w := range skipped {
		if len(want) > 0 && !want[skippedIface(qs, w.Section)] {
			continue
		}
		s.log().Info(w.String())
		out.Skipped = append(out.Skipped, Outcome{skippedIface(qs, w.Section), w.Section, ActSkipped, w.Msg})
	}
	for _, q := range start {
		if len(want) > 0 && !want[q.Interface] {
			continue
		}
		seen[q.Interface] = true
		if err := checkIfaceName(q.Interface); err != nil {
			errs = append(errs, q.Errorf("interface", "%v", err))
			continue
		}
		// One lookup answers both questions (a netlink round trip each
		// on every start): the MTU, or ErrNoLink when it is missing.
		mtu := 1500
		m, err := s.Kernel.LinkMTU(q.Interface)
		if err != nil && !errors.Is(err, kernel.ErrNoLink) {
			errs = append(errs, fmt.Errorf("queue %q: %w", q.Name, err))
			continue
		}
		if exists := err == nil; !exists {
			if !o.AllowMissing {
				errs = append(errs, q.Errorf("interface", "interface %s does not exist; create it first, or run 'sqm daemon', which shapes it when it appears", q.Interface))
				continue
			}
			// Check it now (at MTU 1500), not when the interface
			// finally appears and nobody is watching the log.
			p, err := s.Plan(&q, mtu)
			if err != nil {
				refuse(&q, err)
				continue
			}
			out.Waiting = append(out.Waiting, q)
			waiting = append(waiting, Target{Queue: q, Source: source, Plan: p})
			continue
		}
		if m > 0 {
			mtu = m
		}
		p, err := s.Plan(&q, mtu)
		if err != nil {
			refuse(&q, err)
			continue
		}
		b, err := json.Marshal(p)
		if err != nil {
			errs = append(errs, fmt.Errorf("queue %q: encode plan: %w", q.Name, err))
			continue
		}
		out.Targets = append(out.Targets, Target{Queue: q, Source: source, Plan: p, planJSON: b})
	}
	for _, i := range o.Ifaces {
		if !seen[i] {
			errs = append(errs, fmt.Errorf("no enabled queue section for interface %s in %s; add one or set its enabled option to 1", i, source))
		}
	}
	if err := s.checkCollisions(append(append([]Target(nil), out.Targets...), waiting...), nil); err != nil {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		for _, r := range out.Refused {
			errs = append(errs, r)
		}
		return nil, errors.Join(errs...)
	}
	return out, nil
}

// skippedIface is the interface of the section named name.
func skippedIface(qs []config.Queue, name string) string {
	for _, q := range qs {
		if q.Name == name {
			return q.Interface
		}
	}
	return ""
}

// checkCollisions refuses targets whose IFB devices clash with each other,
// with another target's interface, or with an IFB sqm already owns for a
// different interface (plan.CheckIFBsInUse is the rule). sqm-scripts
// truncates "ifb4"+iface to 15 characters, so two long interface names can
// map to one IFB and silently share it. States whose interface is in
// leaving are about to be removed, and those of the targets' own
// interfaces are about to be replaced.
func (s *Service) checkCollisions(ts []Target, leaving map[string]bool) error {
	ifaces := map[string]bool{}
	plans := make([]*plan.Plan, 0, len(ts))
	for _, t := range ts {
		ifaces[t.Queue.Interface] = true
		plans = append(plans, t.Plan)
	}
	inUse := map[string]string{} // ifb name -> interface whose state owns it
	states, _ := s.Store.All()
	for _, st := range states {
		if st.Owned.IFB != "" && !leaving[st.Interface] && !ifaces[st.Interface] {
			inUse[st.Owned.IFB] = st.Interface
		}
	}
	return plan.CheckIFBsInUse(plans, inUse)
}

// Apply builds every target in order, skipping those the kernel already
// holds unchanged (even with force: force only lets the kernel replace
// qdiscs sqm did not install). If one fails, the targets this call already changed are
// put back as they were (best effort, logged), so a failed start leaves
// the system as it found it.
func (s *Service) Apply(ts []Target, force bool) ([]Outcome, error) {
	return s.apply(ts, force, false)
}

// apply is Apply; rebuild (Restart) builds even targets the kernel already
// holds unchanged.
func (s *Service) apply(ts []Target, force, rebuild bool) ([]Outcome, error) {
	type done struct {
		t    Target
		prev *State
		st   *State
	}
	var did []done
	var outs []Outcome
	var failed []error
	for _, t := range ts {
		iface := t.Queue.Interface
		prev, err := s.Store.Load(iface)
		if err != nil {
			for i := len(did) - 1; i >= 0; i-- {
				s.undo(did[i].t, did[i].prev, did[i].st)
			}
			return outs, err
		}
		intr := s.Store.interrupted(iface)
		if !rebuild && prev != nil && intr == nil && samePlan(prev.Plan, t.planJSON) {
			ok, diff, err := s.Kernel.Matches(t.Plan)
			if err == nil && ok {
				if prev.Source != t.Source || prev.Section != t.Queue.Name {
					// Same tree, new owner (e.g. `sqm apply` then a
					// config section): record who owns it now.
					prev.Source, prev.Section, prev.SectionPos, prev.Queue = t.Source, t.Queue.Name, t.Queue.Pos.String(), t.Queue
					if err := s.Store.Save(prev); err != nil {
						return outs, err
					}
				}
				outs = append(outs, Outcome{iface, t.Queue.Name, ActUnchanged, ""})
				continue
			}
			if err != nil {
				s.log().Warn("cannot compare kernel with plan; re-applying", "interface", iface, "err", err)
			} else {
				s.log().Warn("kernel tree differs from sqm's state; re-applying", "interface", iface, "diff", oneLine(diff))
			}
		}
		if intr != nil {
			s.log().Warn("an earlier apply was interrupted; replacing what it left", "interface", iface, "pid", intr.PID, "started", intr.Started.Format(time.RFC3339))
		}
		// UTC, like AppliedAt: a local time would make the first
		// timestamp load the zone database (/etc/localtime) on every
		// start, for a record nobody reads in local time.
		claim, err := s.unrecordedIFB(t.Plan, prev, intr)
		if err != nil {
			return outs, fmt.Errorf("apply queue %q on %s: %w", t.Queue.Name, iface, err)
		}
		if err := s.Store.markPending(iface, t.Source, t.planJSON, s.now().UTC(), claim); err != nil {
			return outs, err
		}
		var prevOwned *Owned
		if prev != nil {
			// The kernel rebuilds o.Plan, the tree applied last, if the
			// new one fails half-way.
			o := prev.Owned
			prevOwned = &o
		}
		if intr != nil && intr.IFB != "" && (prevOwned == nil || prevOwned.IFB == "") {
			// The interrupted apply created this IFB (or died before
			// it could): it is sqm's, to reuse or, if this plan does
			// not want it, to delete.
			o := Owned{Interface: iface}
			if prevOwned != nil {
				o = *prevOwned
			}
			o.IFB, o.IFBIndex = intr.IFB, 0
			prevOwned = &o
		}
		res, err := s.Kernel.Apply(t.Plan, prevOwned, ApplyOptions{Force: force || intr != nil, Rebuild: rebuild})
		if err != nil {
			// The kernel undid what this apply built. What an earlier,
			// interrupted apply left is still there, so its record stays
			// (the next start or stop deals with it, the IFB it claimed
			// included); otherwise the record has served.
			if intr == nil {
				s.Store.clearPending(iface)
			}
			err = fmt.Errorf("apply queue %q on %s: %w", t.Queue.Name, iface, err)
			if s.Independent {
				failed = append(failed, err)
				continue
			}
			for i := len(did) - 1; i >= 0; i-- {
				s.undo(did[i].t, did[i].prev, did[i].st)
			}
			return outs, err
		}
		st := &State{
			Interface: iface, Source: t.Source, Section: t.Queue.Name, SectionPos: t.Queue.Pos.String(),
			AppliedAt: s.now().UTC(), PID: os.Getpid(), Queue: t.Queue, Plan: t.planJSON, Owned: res.Owned,
		}
		if err := s.Store.Save(st); err != nil {
			// The kernel has the tree but nothing records it: put back
			// what was there (the previous tree, which its state file
			// still describes, or nothing) rather than leave shaping
			// that stop cannot find.
			s.undo(t, prev, st)
			s.Store.clearPending(iface)
			for i := len(did) - 1; i >= 0; i-- {
				s.undo(did[i].t, did[i].prev, did[i].st)
			}
			return outs, err
		}
		s.Store.clearPending(iface)
		did = append(did, done{t, prev, st})
		outs = append(outs, Outcome{iface, t.Queue.Name, ActApplied, summary(t.Plan)})
		s.log().Debug("applied", "interface", iface, "section", t.Queue.Name, "source", t.Source)
	}
	return outs, errors.Join(failed...)
}

// unrecordedIFB is the IFB that applying p may leave in the kernel without
// a state recording it, should this apply be killed: p's IFB when it does
// not exist yet (this apply creates it), or when an interrupted apply had
// already claimed it. An IFB that exists and nobody claimed is someone
// else's, which the kernel refuses unless forced, and never sqm's to
// delete.
func (s *Service) unrecordedIFB(p *plan.Plan, prev *State, intr *pending) (string, error) {
	if p.Ingress == nil || p.Ingress.IFB == "" {
		return "", nil
	}
	ifb := p.Ingress.IFB
	if prev != nil && prev.Owned.IFB == ifb {
		return "", nil // the state records it
	}
	if intr != nil && intr.IFB == ifb {
		return ifb, nil
	}
	exists, err := s.Kernel.LinkExists(ifb)
	if err != nil || exists {
		return "", err
	}
	return ifb, nil
}

// undo puts one interface back to its state before this Apply call: it
// removes now's tree, or rebuilds the tree prev records (prev.Owned.Plan,
// exactly as it was applied, not the section re-planned at today's MTU)
// over it.
func (s *Service) undo(t Target, prev, now *State) {
	iface := t.Queue.Interface
	if prev == nil {
		if err := s.Kernel.Remove(&now.Owned); err != nil {
			s.log().Error("rollback: remove failed; run 'sqm stop "+iface+"'", "interface", iface, "err", err)
			return
		}
		s.Store.Delete(iface)
		s.log().Info("rolled back", "interface", iface)
		return
	}
	if prev.Owned.Plan == nil {
		s.log().Error("rollback: could not restore the previous tree (its state file has no applied plan); run 'sqm restart'", "interface", iface)
		return
	}
	res, err := s.Kernel.Apply(prev.Owned.Plan, &now.Owned, ApplyOptions{})
	if err != nil {
		s.log().Error("rollback: could not restore the previous tree; run 'sqm restart'", "interface", iface, "err", err)
		return
	}
	prev.Owned = res.Owned
	if err := s.Store.Save(prev); err != nil {
		s.log().Error("rolled back the tree, but could not update its state file", "interface", iface, "err", err)
		return
	}
	s.log().Info("rolled back", "interface", iface)
}

// StopOptions select what Stop removes.
type StopOptions struct {
	Ifaces []string // only these; empty: every interface sqm shapes
	Source string   // only state from this config file (or SourceCLI); empty: any
}

// Stop removes exactly what the state says sqm installed and forgets it,
// and what a first apply killed before it saved a state left (its pending
// record names the plan and the IFB it claimed). Stopping an interface sqm
// does not shape is not an error: stop is idempotent.
func (s *Service) Stop(o StopOptions) ([]Outcome, error) {
	states, lerr := s.Store.All()
	orphans, oerr := s.Store.orphans()
	byIface := map[string]*State{}
	for _, st := range states {
		byIface[st.Interface] = st
	}
	var sel []*State
	var selOrphans []*pending
	var outs []Outcome
	if len(o.Ifaces) > 0 {
		for _, i := range o.Ifaces {
			if err := checkIfaceName(i); err != nil {
				return nil, err
			}
			st := byIface[i]
			switch {
			case st != nil:
				sel = append(sel, st)
			case orphans[i] != nil:
				selOrphans = append(selOrphans, orphans[i])
			default:
				outs = append(outs, Outcome{Interface: i, Action: ActNotShaped, Detail: "no state in " + s.Store.Dir})
			}
		}
	} else {
		for _, st := range states {
			if o.Source == "" || st.Source == o.Source {
				sel = append(sel, st)
			}
		}
		for _, i := range slices.Sorted(maps.Keys(orphans)) {
			if p := orphans[i]; o.Source == "" || p.Source == o.Source {
				selOrphans = append(selOrphans, p)
			}
		}
	}
	errs := []error{lerr, oerr}
	for _, p := range selOrphans {
		if err := s.removeInterrupted(p); err != nil {
			errs = append(errs, err)
			continue
		}
		outs = append(outs, Outcome{p.Interface, "", ActRemoved, "what an interrupted apply left"})
	}
	for _, st := range sel {
		if err := s.remove(st); err != nil {
			errs = append(errs, err)
			continue
		}
		outs = append(outs, Outcome{st.Interface, st.Section, ActRemoved, ""})
	}
	if len(o.Ifaces) == 0 {
		// Nothing of the source is shaped any more: what it refused
		// is old news, for the next start to tell again.
		s.forgetRefused(o.Source)
	}
	return outs, errors.Join(errs...)
}

// removeInterrupted removes what an apply killed before it saved a state
// may have built: the planned root and ingress qdiscs, and the IFB it
// claimed (see kernel.Interrupted).
func (s *Service) removeInterrupted(p *pending) error {
	var pl plan.Plan
	if err := json.Unmarshal(p.Plan, &pl); err != nil || pl.Interface != p.Interface {
		return fmt.Errorf("stop %s: %s records an interrupted apply but not its plan (%v): check 'tc qdisc show dev %s', remove what sqm left there by hand, then delete the file",
			p.Interface, s.Store.pendingPath(p.Interface), err, p.Interface)
	}
	o := kernel.Interrupted(&pl, p.IFB)
	if err := s.Kernel.Remove(&o); err != nil {
		return fmt.Errorf("stop %s (interrupted apply): %w", p.Interface, err)
	}
	s.Store.clearPending(p.Interface)
	s.log().Info("removed what an interrupted apply left", "interface", p.Interface, "pid", p.PID, "started", p.Started.Format(time.RFC3339))
	return nil
}

func (s *Service) remove(st *State) error {
	if err := s.Kernel.Remove(&st.Owned); err != nil {
		return fmt.Errorf("stop %s: %w", st.Interface, err)
	}
	s.Store.clearPending(st.Interface)
	if err := s.Store.Delete(st.Interface); err != nil {
		return err
	}
	s.log().Debug("removed", "interface", st.Interface, "section", st.Section)
	return nil
}

// CleanStale forgets the state of interfaces that no longer exist, after
// removing what is left of sqm's objects (the IFB outlives its interface).
// A deleted-and-recreated interface is left to Apply, which sees that the
// kernel no longer matches and rebuilds.
func (s *Service) CleanStale() ([]Outcome, error) {
	states, lerr := s.Store.All()
	var outs []Outcome
	errs := []error{lerr}
	for _, st := range states {
		ok, err := s.Kernel.LinkExists(st.Interface)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if ok {
			continue
		}
		if err := s.remove(st); err != nil {
			errs = append(errs, err)
			continue
		}
		outs = append(outs, Outcome{st.Interface, st.Section, ActStale, "interface is gone; its state and IFB were removed"})
	}
	return outs, errors.Join(errs...)
}

// Start applies the selected sections; see Prepare and Apply. Refused
// sections are reported (an outcome each, and the error) after the others
// were applied.
func (s *Service) Start(qs []config.Queue, source string, o PrepareOptions, force bool) ([]Outcome, error) {
	stale, _ := s.CleanStale()
	p, err := s.Prepare(qs, source, o)
	if err != nil {
		return stale, err
	}
	outs, err := s.Apply(p.Targets, force)
	outs = append(append(stale, p.Skipped...), outs...)
	for _, q := range p.Waiting {
		outs = append(outs, Outcome{q.Interface, q.Name, ActWaiting, "interface does not exist yet"})
	}
	for _, r := range p.Refused {
		outs = append(outs, refusedOutcome(r))
	}
	s.recordRefused(source, o, p.Refused)
	return outs, errors.Join(err, refusedErr(p.Refused))
}

// Reload brings the kernel to the config: it applies sections that are new
// or changed, leaves unchanged ones alone (their counters keep counting),
// and removes the shaping of sections from this source that were deleted
// or disabled.
func (s *Service) Reload(qs []config.Queue, source string, o PrepareOptions) ([]Outcome, error) {
	return s.reload(qs, source, o, false, false)
}

// reload is Reload; Restart passes force and rebuild.
func (s *Service) reload(qs []config.Queue, source string, o PrepareOptions, force, rebuild bool) ([]Outcome, error) {
	stale, _ := s.CleanStale()
	p, err := s.Prepare(qs, source, o)
	if err != nil {
		return stale, err
	}
	keep := map[string]bool{}
	for _, t := range p.Targets {
		keep[t.Queue.Interface] = true
	}
	for _, q := range p.Waiting {
		keep[q.Interface] = true
	}
	// A refused section's interface keeps its tree, found by the
	// interface it names or, when that option is the broken one, by the
	// section that shaped it.
	keepSection := map[string]bool{}
	for _, r := range p.Refused {
		if r.Interface != "" {
			keep[r.Interface] = true
		}
		keepSection[r.Section] = true
	}
	only := map[string]bool{}
	for _, i := range o.Ifaces {
		only[i] = true
	}
	states, err := s.Store.All()
	if err != nil {
		return stale, err
	}
	var gone []*State
	leaving := map[string]bool{}
	for _, st := range states {
		if st.Source == source && !keep[st.Interface] && !keepSection[st.Section] && (len(only) == 0 || only[st.Interface]) {
			gone = append(gone, st)
			leaving[st.Interface] = true
		}
	}
	if err := s.checkCollisions(p.Targets, leaving); err != nil {
		return stale, err
	}
	var outs []Outcome
	var errs []error
	for _, st := range gone {
		if err := s.remove(st); err != nil {
			errs = append(errs, err)
			continue
		}
		outs = append(outs, Outcome{st.Interface, st.Section, ActRemoved, "section removed or disabled"})
	}
	applied, err := s.apply(p.Targets, force, rebuild)
	outs = append(append(append(stale, p.Skipped...), outs...), applied...)
	errs = append(errs, err)
	for _, q := range p.Waiting {
		outs = append(outs, Outcome{q.Interface, q.Name, ActWaiting, "interface does not exist yet"})
	}
	for _, r := range p.Refused {
		outs = append(outs, refusedOutcome(r))
	}
	s.recordRefused(source, o, p.Refused)
	errs = append(errs, refusedErr(p.Refused))
	return outs, errors.Join(errs...)
}

// Restore re-applies the recorded state of ifaces (all states if none),
// from the section each was applied from, replacing whatever replaced it.
func (s *Service) Restore(ifaces []string) ([]Outcome, error) {
	states, err := s.Store.All()
	if err != nil {
		return nil, err
	}
	only := map[string]bool{}
	for _, i := range ifaces {
		only[i] = true
	}
	var ts []Target
	var errs []error
	for _, st := range states {
		if len(only) > 0 && !only[st.Interface] {
			continue
		}
		mtu, err := s.Kernel.LinkMTU(st.Interface)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		p, err := s.Plan(&st.Queue, mtu)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		b, err := json.Marshal(p)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		ts = append(ts, Target{Queue: st.Queue, Source: st.Source, Plan: p, planJSON: b})
	}
	outs, err := s.Apply(ts, true)
	return outs, errors.Join(append(errs, err)...)
}

// Check compares the kernel with every state. It returns the interfaces
// whose tree differs, with the kernel's diff (see Drift).
func (s *Service) Check() (map[string]string, error) {
	states, err := s.Store.All()
	drift := map[string]string{}
	for _, st := range states {
		if d := Drift(s.Kernel, s.Plan, st); d != "" {
			drift[st.Interface] = d
		}
	}
	return drift, err
}

// DriftKernel is what Drift needs from the kernel.
type DriftKernel interface {
	LinkMTU(iface string) (int, error)
	Matches(p *plan.Plan) (ok bool, diff string, err error)
}

// Drift is the one drift check (the daemon's Check and `sqm status` both
// use it): it rebuilds st's section at the interface's MTU now and asks
// the kernel whether it holds that tree. It returns "" when it does, else
// how it differs (or why it could not tell), on one line per difference.
func Drift(k DriftKernel, planner PlanFunc, st *State) string {
	return drift(k, planner, st, nil)
}

// drift is Drift with adjust, if set, applied to the rebuilt plan before
// the kernel compares it (AutorateDrift's running rates); an adjust that
// returns a difference ends the check with it.
func drift(k DriftKernel, planner PlanFunc, st *State, adjust func(p *plan.Plan, mtu int) string) string {
	mtu, err := k.LinkMTU(st.Interface)
	if err != nil {
		return err.Error()
	}
	p, err := planner(&st.Queue, mtu)
	if err != nil {
		return "cannot rebuild the applied plan: " + err.Error()
	}
	if adjust != nil {
		if d := adjust(p, mtu); d != "" {
			return d
		}
	}
	ok, diff, err := k.Matches(p)
	switch {
	case err != nil:
		return err.Error()
	case !ok:
		return diff
	}
	return ""
}

// summary is a one-line description of a plan for reports.
func summary(p *plan.Plan) string {
	var parts []string
	if p.Egress != nil {
		parts = append(parts, fmt.Sprintf("egress %d kbit", p.Egress.RateKbit))
	}
	if p.Ingress != nil {
		s := fmt.Sprintf("ingress %d kbit", p.Ingress.RateKbit)
		if p.Ingress.IFB != "" {
			s += " via " + p.Ingress.IFB
		}
		parts = append(parts, s)
	}
	parts = append(parts, p.Script+"/"+p.Qdisc)
	return strings.Join(parts, ", ")
}

// samePlan compares plan JSON ignoring layout (the state file is indented).
func samePlan(a, b json.RawMessage) bool {
	var ca, cb bytes.Buffer
	if json.Compact(&ca, a) != nil || json.Compact(&cb, b) != nil {
		return false
	}
	return bytes.Equal(ca.Bytes(), cb.Bytes())
}

func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// Interfaces returns the sorted interfaces of states.
func Interfaces(states []*State) []string {
	var out []string
	for _, st := range states {
		out = append(out, st.Interface)
	}
	slices.Sort(out)
	return out
}
