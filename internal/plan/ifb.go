package plan

import (
	"errors"
	"fmt"
)

// maxIfName is IFNAMSIZ-1: the longest name a Linux device can have.
const maxIfName = 15

// IFBName is the IFB device sqm shapes iface's received traffic on:
// "ifb4"+iface cut to 15 characters, as sqm-scripts names it, so an
// interface keeps the IFB it had under sqm-scripts. Long names can
// collide (enx001122334455 and enx001122334466 both give ifb4enx00112233);
// CheckIFBs catches that.
func IFBName(iface string) string {
	n := "ifb4" + iface
	if len(n) > maxIfName {
		n = n[:maxIfName]
	}
	return n
}

// CheckIFBs returns an error if two plans would use the same IFB device
// (or shape the same interface), naming both sections; starting both
// would make the second tear down or hijack the first one's shaper. It is
// CheckIFBsInUse with nothing installed yet, for `sqm plan`.
func CheckIFBs(plans []*Plan) error {
	return CheckIFBsInUse(plans, nil)
}

// CheckIFBsInUse is the one IFB collision check (sqm plan, start, reload
// and the daemon all use it). It refuses plans that shape one interface
// twice, that need the same IFB, whose IFB is another plan's interface,
// or whose IFB is in inUse (IFB name -> interface whose installed shaping
// owns it) for a different interface. Every conflict is reported, joined.
func CheckIFBsInUse(plans []*Plan, inUse map[string]string) error {
	type owner struct {
		section, iface string
	}
	var errs []error
	seen := map[string]owner{}
	ifaces := map[string]string{}
	for _, p := range plans {
		if p == nil {
			continue
		}
		if prev, ok := ifaces[p.Interface]; ok {
			errs = append(errs, fmt.Errorf("plan: queue %q and queue %q both shape interface %s; disable one of them", prev, p.Section, p.Interface))
			continue
		}
		ifaces[p.Interface] = p.Section
	}
	for _, p := range plans {
		if p == nil || p.Ingress == nil || p.Ingress.IFB == "" {
			continue
		}
		ifb := p.Ingress.IFB
		if prev, ok := seen[ifb]; ok && prev.iface != p.Interface {
			errs = append(errs, fmt.Errorf("plan: queue %q (interface %s) and queue %q (interface %s) both need IFB %s, because IFB names are \"ifb4\" plus the interface name cut to %d characters; rename one interface or disable download shaping on one",
				prev.section, prev.iface, p.Section, p.Interface, ifb, maxIfName))
			continue
		}
		if other, ok := inUse[ifb]; ok && other != p.Interface {
			errs = append(errs, fmt.Errorf("plan: queue %q (interface %s) needs IFB %s, which sqm already uses for interface %s, because IFB names are \"ifb4\" plus the interface name cut to %d characters; rename one interface or stop that one first",
				p.Section, p.Interface, ifb, other, maxIfName))
			continue
		}
		if sec, ok := ifaces[ifb]; ok {
			errs = append(errs, fmt.Errorf("plan: queue %q (interface %s) needs IFB %s, which is the interface queue %q shapes; rename that interface",
				p.Section, p.Interface, ifb, sec))
			continue
		}
		seen[ifb] = owner{p.Section, p.Interface}
	}
	return errors.Join(errs...)
}
