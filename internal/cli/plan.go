package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"

	"sqm/internal/config"
	"sqm/internal/json"
	"sqm/internal/plan"
)

func cmdPlan() *command {
	return &command{
		name:    "plan",
		summary: "show what start would build, changing nothing",
		usage:   "sqm plan [--config FILE] [--json] [IFACE...]",
		help: `Prints, for every enabled config section (or those for the named
interfaces), the tree sqm would build as the equivalent tc/ip commands, or
with --json as the typed tree. Nothing is changed and no privileges are
needed. The interface's MTU is read from the system; an interface that does
not exist yet is planned with MTU 1500 and a note. A section that is broken
(a bad value, or one the planner refuses) is reported with file:line after
the plans of the others, and plan then exits 1, as 'sqm start' shapes the
others and exits 1; a disabled section is never refused (at most a warning).

Example:

  $ sqm plan --config ./sqm.conf eth1
  # queue "wan" (./sqm.conf:1): eth1, simplest/fq_codel
  tc qdisc replace dev eth1 root handle 1: htb default 10
  ...`,
		flags: func(fs *flag.FlagSet) {
			configFlag(fs)
			stateDirFlag(fs) // accepted like every shaping command; plan reads no state
			fs.Bool("json", false, "print the plans as JSON")
		},
		run: func(ctx context.Context, env *Env, fs *flag.FlagSet, args []string) error {
			f, err := loadConfig(env, flagString(fs, "config"))
			if f == nil {
				return err
			}
			plans, refused, err := planSections(f, flagString(fs, "config"), args)
			if err != nil {
				return err
			}
			if len(plans) == 0 && len(refused) == 0 {
				fmt.Fprintf(env.Stderr, "no enabled queue sections in %s (set option enabled '1')\n", flagString(fs, "config"))
			}
			if flagBool(fs, "json") {
				enc := json.NewEncoder(env.Stdout)
				enc.SetIndent("", "  ")
				if err := enc.Encode(plans); err != nil {
					return err
				}
			} else {
				for i, p := range plans {
					if i > 0 {
						fmt.Fprintln(env.Stdout)
					}
					fmt.Fprint(env.Stdout, plan.RenderShell(p))
				}
			}
			return config.JoinRefused(refused, "the other sections are planned above")
		},
	}
}

// planSections plans the enabled sections of f (for ifaces, if given) with
// the system's MTUs. As 'sqm start' does, it sets aside the sections that
// are refused (f.Refused, and those the planner refuses) and plans the
// others; an error is a problem outside one section, reported with every
// refusal, and then there are no plans.
func planSections(f *config.File, source string, ifaces []string) ([]*plan.Plan, []*config.SectionError, error) {
	want := map[string]bool{}
	for _, i := range ifaces {
		want[i] = true
	}
	found := map[string]bool{}
	plans := []*plan.Plan{}
	var refused []*config.SectionError
	for _, r := range f.Refused {
		if len(want) == 0 || want[r.Interface] {
			found[r.Interface] = true
			refused = append(refused, r)
		}
	}
	var errs []error
	start, _ := config.Effective(f.Queues) // Load already warned about skipped sections
	for i := range start {
		q := &start[i]
		if len(want) > 0 && !want[q.Interface] {
			continue
		}
		found[q.Interface] = true
		mtu, note := 1500, ""
		if m, ok := linkMTU(q.Interface); ok {
			mtu = m
		} else {
			note = fmt.Sprintf("interface %s does not exist now; planned with MTU 1500", q.Interface)
		}
		p, err := buildPlan(q, mtu)
		if err != nil {
			refused = append(refused, config.Refuse(q, err))
			continue
		}
		if note != "" {
			p.Notes = append(p.Notes, note)
		}
		plans = append(plans, p)
	}
	for _, i := range ifaces {
		if !found[i] {
			errs = append(errs, fmt.Errorf("no enabled queue section for interface %s in %s; add one or set its enabled option to 1", i, source))
		}
	}
	if err := plan.CheckIFBs(plans); err != nil {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		for _, r := range refused {
			errs = append(errs, r)
		}
		return nil, nil, errors.Join(errs...)
	}
	return plans, refused, nil
}
