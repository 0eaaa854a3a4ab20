package cli

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net"

	"sqm/internal/config"
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
not exist yet is planned with MTU 1500 and a note.

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
			qs, err := loadConfig(env, flagString(fs, "config"))
			if err != nil {
				return err
			}
			plans, err := planSections(qs, flagString(fs, "config"), args)
			if err != nil {
				return err
			}
			if len(plans) == 0 {
				fmt.Fprintf(env.Stderr, "no enabled queue sections in %s (set option enabled '1')\n", flagString(fs, "config"))
			}
			if flagBool(fs, "json") {
				enc := json.NewEncoder(env.Stdout)
				enc.SetIndent("", "  ")
				return enc.Encode(plans)
			}
			for i, p := range plans {
				if i > 0 {
					fmt.Fprintln(env.Stdout)
				}
				fmt.Fprint(env.Stdout, plan.RenderShell(p))
			}
			return nil
		},
	}
}

// planSections plans the enabled sections (for ifaces, if given) with the
// system's MTUs, reporting every problem at once.
func planSections(qs []config.Queue, source string, ifaces []string) ([]*plan.Plan, error) {
	want := map[string]bool{}
	for _, i := range ifaces {
		want[i] = true
	}
	found := map[string]bool{}
	plans := []*plan.Plan{}
	var errs []error
	start, _ := config.Effective(qs) // Load already warned about skipped sections
	for i := range start {
		q := &start[i]
		if len(want) > 0 && !want[q.Interface] {
			continue
		}
		found[q.Interface] = true
		mtu, note := 1500, ""
		if ifc, err := net.InterfaceByName(q.Interface); err == nil {
			mtu = ifc.MTU
		} else {
			note = fmt.Sprintf("interface %s does not exist now; planned with MTU 1500", q.Interface)
		}
		p, err := buildPlan(q, mtu)
		if err != nil {
			errs = append(errs, err)
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
		return nil, errors.Join(errs...)
	}
	return plans, nil
}
