package netns

import (
	"fmt"
	"os/exec"
	"strconv"
	"time"
)

// The measurement tests (bloat, iperf3, irtt, rpm) each built the same
// link by hand: a veth pair between two namespaces, shaped with htb where
// this host's kernel has nothing better. These helpers are that recipe
// once, so a fix to it (offloads, readiness) reaches every test.

// End is one side of a link made by Link: the namespace, the veth's name in
// it and the addresses (CIDR) it gets.
type End struct {
	NS    *NS
	Dev   string
	Addrs []string
}

// Link joins a and b with a veth pair ready for measuring: offloads off on
// both ends (so a shaper sees MTU-sized packets, not 64 KB super-packets
// that make htb overshoot), the addresses added, lo and the link up, and
// no address still tentative when it returns, so the first packets are
// not held back by duplicate address detection.
func Link(a, b End) error {
	if err := a.NS.Veth(a.Dev, b.NS, b.Dev); err != nil {
		return err
	}
	for _, e := range []End{a, b} {
		// Offloads before Up: changing them on an up veth resets it.
		if err := e.NS.DisableOffloads(e.Dev); err != nil {
			return err
		}
		for _, cidr := range e.Addrs {
			if err := e.NS.AddAddr(e.Dev, cidr); err != nil {
				return err
			}
		}
		if err := e.NS.Up("lo", e.Dev); err != nil {
			return err
		}
	}
	for _, e := range []End{a, b} {
		if err := e.NS.WaitReady(e.Dev, 5*time.Second); err != nil {
			return err
		}
	}
	return nil
}

// TC runs tc inside n once per argument list, stopping at the first that
// fails; the error carries the command and tc's message.
func (n *NS) TC(cmds ...[]string) error {
	for _, args := range cmds {
		if _, err := n.Output(exec.Command("tc", args...)); err != nil {
			return err
		}
	}
	return nil
}

// HTB limits what leaves link dev to rateKbit: an htb root (1:) sending
// everything to one class (1:1) whose rate and ceil are both rateKbit.
// With leaf (tc's words, e.g. "pfifo", "limit", "100") that qdisc goes
// under the class as 10:, which sets the standing queue a saturated link
// builds; without, the class keeps htb's default leaf, and the caller may
// add classes and filters under 1:1 with TC.
func (n *NS) HTB(dev string, rateKbit int, leaf ...string) error {
	rate := strconv.Itoa(rateKbit) + "kbit"
	cmds := [][]string{
		{"qdisc", "add", "dev", dev, "root", "handle", "1:", "htb", "default", "1"},
		{"class", "add", "dev", dev, "parent", "1:", "classid", "1:1", "htb", "rate", rate, "ceil", rate},
	}
	if len(leaf) > 0 {
		cmds = append(cmds, append([]string{"qdisc", "add", "dev", dev, "parent", "1:1", "handle", "10:"}, leaf...))
	}
	if err := n.TC(cmds...); err != nil {
		return fmt.Errorf("netns: htb at %d kbit/s on %s: %w", rateKbit, dev, err)
	}
	return nil
}
