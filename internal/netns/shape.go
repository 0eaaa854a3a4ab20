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
	// GSO lets TCP hand this end's qdisc GSO packets, several segments
	// in one (see Link): for tests whose queue must take a sender's whole
	// flight at once, as a router's queue does when the flight arrives
	// back to back.
	GSO bool
}

// Link joins a and b with a veth pair ready for measuring: offloads off,
// TCP sent from either end reaching its qdisc one segment per packet
// unless End.GSO says otherwise, the addresses added, lo and the link up,
// and no address still tentative when it returns, so the first packets
// are not held back by duplicate address detection.
//
// Offloads off is not enough for MTU-sized packets at a sending host's
// own qdisc: the kernel builds GSO packets for every TCP socket whatever
// the device's features and splits them only after the qdisc. A
// "100-packet" fifo on the sender's veth then held 100 packets of 1 to 44
// segments: in RRUL through it, one direction's queue reached 500-630 kB
// (240 ms at 20 Mbit/s) with no loss while the other's flows, which had
// lost early in slow start, kept Reno windows of ~25 segments against that
// 240 ms and carried 8.5-9 Mbit/s for the whole test (3 runs in 35 on a
// busy host). gso_max_segs 1 makes TCP build one-segment packets, so a
// packet limit means what it says (40 of 40 runs at 18.6-18.7 Mbit/s each
// way after).
//
// What that costs: TCP small queues let a flow keep only about two packets
// in its own host's qdisc, so a new connection's 4-packet flight (a TLS
// server's first answer) crosses a busy sender-side queue twice, where at
// a router it arrives back to back and crosses once. Tests that time such
// flights against ping keep GSO (End.GSO).
func Link(a, b End) error {
	if err := a.NS.Veth(a.Dev, b.NS, b.Dev); err != nil {
		return err
	}
	for _, e := range []End{a, b} {
		// Offloads before Up: changing them on an up veth resets it.
		if err := e.NS.DisableOffloads(e.Dev); err != nil {
			return err
		}
		// By ip(8): rtnetlink's LinkAttributes has no IFLA_GSO_MAX_SEGS.
		if !e.GSO {
			if _, err := e.NS.Output(exec.Command("ip", "link", "set", "dev", e.Dev, "gso_max_segs", "1")); err != nil {
				return err
			}
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

// linkBurst is how late htb's timer may fire without the emulated link
// losing rate (see HTB).
const linkBurst = 10 * time.Millisecond

// htbBurst is linkBurst of rateKbit in bytes, never under tc's default
// of one 1600-byte MTU.
func htbBurst(rateKbit int) int {
	return max(1600, int(int64(rateKbit)*1000/8*int64(linkBurst)/int64(time.Second)))
}

// HTB limits what leaves link dev to rateKbit: an htb root (1:) sending
// everything to one class (1:1) whose rate and ceil are both rateKbit.
// With leaf (tc's words, e.g. "pfifo", "limit", "100") that qdisc goes
// under the class as 10:, which sets the standing queue a saturated link
// builds; without, the class keeps htb's default leaf, and the caller may
// add classes under 1:1 with HTBClass and filters with TC.
//
// The class's burst and cburst hold linkBurst of the rate. A throttled
// htb sends again when its watchdog timer fires, and a token bucket holds
// no more than its burst: tc's default (one MTU, 0.6 ms at 20 Mbit/s)
// loses the rate of any firing later than that. On a 2-core machine busy
// with the other packages' tests, 20 Mbit/s links carried 15.5-16.9
// Mbit/s of TCP in 3 of 10 RRUL runs, both directions at once (18.6 when
// idle); with 10 ms of burst, 18.6-18.8 in 10 of 10. A modem's rate does
// not depend on a host's scheduler, so the emulated one keeps the tokens
// a late timer is owed.
func (n *NS) HTB(dev string, rateKbit int, leaf ...string) error {
	rate := strconv.Itoa(rateKbit) + "kbit"
	burst := strconv.Itoa(htbBurst(rateKbit))
	cmds := [][]string{
		{"qdisc", "add", "dev", dev, "root", "handle", "1:", "htb", "default", "1"},
		{"class", "add", "dev", dev, "parent", "1:", "classid", "1:1", "htb", "rate", rate, "ceil", rate, "burst", burst, "cburst", burst},
	}
	if len(leaf) > 0 {
		cmds = append(cmds, append([]string{"qdisc", "add", "dev", dev, "parent", "1:1", "handle", "10:"}, leaf...))
	}
	if err := n.TC(cmds...); err != nil {
		return fmt.Errorf("netns: htb at %d kbit/s on %s: %w", rateKbit, dev, err)
	}
	return nil
}

// HTBClass adds class classid (e.g. "1:10") under HTB's 1:1, guaranteed
// rateKbit and borrowing up to ceilKbit, at htb priority prio (0 first).
// Its burst and cburst hold linkBurst of the ceil, for HTB's reason: a
// child class with tc's default buckets loses the rate of every late
// timer as its parent would. TestNetPerfLoad's 20 Mbit/s link has two;
// looped beside the other packages' tests, with tc's defaults 1 of 8 runs
// failed and 23 of its 96 goodputs (sqm's and netperf's) read under 18
// Mbit/s, down to 13.4; with these, 10 of 10 passed and 3 of 120 read
// under 18 (16.9 the lowest, each a netperf RRUL reference).
func (n *NS) HTBClass(dev, classid string, rateKbit, ceilKbit, prio int) error {
	burst := strconv.Itoa(htbBurst(ceilKbit))
	err := n.TC([]string{"class", "add", "dev", dev, "parent", "1:1", "classid", classid, "htb",
		"rate", strconv.Itoa(rateKbit) + "kbit", "ceil", strconv.Itoa(ceilKbit) + "kbit",
		"burst", burst, "cburst", burst, "prio", strconv.Itoa(prio)})
	if err != nil {
		return fmt.Errorf("netns: htb class %s on %s: %w", classid, dev, err)
	}
	return nil
}
