package plan

import "fmt"

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
// would make the second tear down or hijack the first one's shaper.
func CheckIFBs(plans []*Plan) error {
	type owner struct {
		section, iface string
	}
	seen := map[string]owner{}
	ifaces := map[string]string{}
	for _, p := range plans {
		if p == nil {
			continue
		}
		if prev, ok := ifaces[p.Interface]; ok {
			return fmt.Errorf("plan: queue %q and queue %q both shape interface %s; disable one of them", prev, p.Section, p.Interface)
		}
		ifaces[p.Interface] = p.Section
		if p.Ingress == nil || p.Ingress.IFB == "" {
			continue
		}
		ifb := p.Ingress.IFB
		if prev, ok := seen[ifb]; ok {
			return fmt.Errorf("plan: queue %q (interface %s) and queue %q (interface %s) both need IFB %s, because IFB names are \"ifb4\" plus the interface name cut to %d characters; rename one interface or disable download shaping on one",
				prev.section, prev.iface, p.Section, p.Interface, ifb, maxIfName)
		}
		seen[ifb] = owner{p.Section, p.Interface}
	}
	return nil
}
