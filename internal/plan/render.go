package plan

import (
	"fmt"
	"strings"
	"time"
)

// RenderShell returns a `sh -e` script of ip/tc commands that builds p on
// an interface with no shaping. The order is the creation order documented
// on Plan: nothing is redirected to the IFB until it is shaped and up.
func RenderShell(p *Plan) string {
	var w strings.Builder
	w.WriteString("#!/bin/sh -e\n")
	header(&w, p, "builds")
	if p.Egress != nil {
		fmt.Fprintf(&w, "\n# egress: %s on %s\n", rateString(p.Egress.RateKbit*1000), p.Egress.Device)
		renderTree(&w, p.Egress)
	}
	if in := p.Ingress; in != nil {
		if in.IFB != "" {
			fmt.Fprintf(&w, "\n# ingress: %s, shaped on %s\n", rateString(in.RateKbit*1000), in.IFB)
			fmt.Fprintf(&w, "ip link add name %s type ifb\n", shq(in.IFB))
		} else {
			fmt.Fprintf(&w, "\n# ingress: policed to %s\n", rateString(in.RateKbit*1000))
		}
		if in.Shaper != nil {
			renderTree(&w, in.Shaper)
		}
		fmt.Fprintf(&w, "tc qdisc add dev %s handle ffff: ingress\n", shq(p.Interface))
		if in.IFB != "" {
			fmt.Fprintf(&w, "ip link set dev %s up\n", shq(in.IFB))
		}
		for _, f := range in.Hook {
			renderFilter(&w, p.Interface, f)
		}
	}
	return w.String()
}

// RenderRemove returns the commands that undo RenderShell's script:
// first the ingress hook (so nothing is redirected to a vanishing IFB),
// then the IFB with its tree, then the root qdisc. It is plain `sh`, not
// `sh -e`, so it removes what it can when part of the plan is gone.
func RenderRemove(p *Plan) string {
	var w strings.Builder
	w.WriteString("#!/bin/sh\n")
	header(&w, p, "removes")
	if p.Ingress != nil {
		fmt.Fprintf(&w, "tc qdisc del dev %s handle ffff: ingress\n", shq(p.Interface))
		if p.Ingress.IFB != "" {
			fmt.Fprintf(&w, "ip link del dev %s type ifb\n", shq(p.Ingress.IFB))
		}
	}
	if p.Egress != nil {
		fmt.Fprintf(&w, "tc qdisc del dev %s root\n", shq(p.Interface))
	}
	return w.String()
}

func header(w *strings.Builder, p *Plan, verb string) {
	sec := p.Section
	if sec == "" {
		sec = "(unnamed)"
	}
	fmt.Fprintf(w, "# sqm: %s shaping of queue %q on %s (script %s, qdisc %s)\n",
		verb, oneLine(sec), oneLine(p.Interface), p.Script, p.Qdisc)
	if a := p.Autorate; a != nil {
		refl := "default (the sqm or irtt server, else the built-in list)"
		if len(a.Reflectors) > 0 {
			refl = oneLine(strings.Join(a.Reflectors, " "))
		}
		fmt.Fprintf(w, "# autorate: target %v, probe %s, reflectors %s\n", a.Target, a.Probe, refl)
		for _, d := range []struct {
			name string
			r    *RateRange
		}{{"download", a.Download}, {"upload", a.Upload}} {
			if d.r != nil {
				fmt.Fprintf(w, "# autorate: %s %s; the rates below are the base\n", d.name, d.r)
			}
		}
	}
	for _, n := range p.Notes {
		fmt.Fprintf(w, "# note: %s\n", oneLine(n))
	}
}

// oneLine puts s on one line: each CR and LF becomes a space. A byte
// loop, not strings.NewReplacer, whose machinery costs the router build
// about 10 KB.
func oneLine(s string) string {
	if !strings.ContainsAny(s, "\r\n") {
		return s
	}
	b := []byte(s)
	for i, c := range b {
		if c == '\n' || c == '\r' {
			b[i] = ' '
		}
	}
	return string(b)
}

// shq quotes s for sh if it holds anything but the characters of a
// normal device name.
func shq(s string) string {
	safe := s != ""
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("._-@:+", r)) {
			safe = false
			break
		}
	}
	if safe {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// renderTree writes the root qdisc, the classes (parents first), the leaf
// qdiscs, then the filters: the order the kernel code applies a Tree in.
func renderTree(w *strings.Builder, t *Tree) {
	dev := shq(t.Device)
	if len(t.Qdiscs) > 0 {
		fmt.Fprintf(w, "tc qdisc add dev %s %s\n", dev, QdiscArgs(&t.Qdiscs[0]))
	}
	for _, c := range t.Classes {
		fmt.Fprintf(w, "tc class add dev %s %s\n", dev, ClassArgs(&c))
	}
	for i := 1; i < len(t.Qdiscs); i++ {
		fmt.Fprintf(w, "tc qdisc add dev %s %s\n", dev, QdiscArgs(&t.Qdiscs[i]))
	}
	for _, f := range t.Filters {
		renderFilter(w, t.Device, f)
	}
}

func renderFilter(w *strings.Builder, dev string, f Filter) {
	if f.Comment != "" {
		fmt.Fprintf(w, "# %s\n", oneLine(f.Comment))
	}
	if f.CodelPolice != nil {
		// Said so the script is not mistaken for the real thing.
		w.WriteString("# sqm loads the program itself and writes these parameters into its config map;\n" +
			"# tc cannot, and the object loaded by tc alone passes every packet.\n")
	}
	fmt.Fprintf(w, "tc filter add dev %s %s\n", shq(dev), FilterArgs(&f))
}

// rateString renders bits/s as tc does for sqm: "<N>kbit" when whole.
func rateString(bits uint64) string {
	if bits%1000 == 0 {
		return fmt.Sprintf("%dkbit", bits/1000)
	}
	return fmt.Sprintf("%dbit", bits)
}

// timeString renders a duration in tc's microseconds.
func timeString(d time.Duration) string {
	return fmt.Sprintf("%dus", d/time.Microsecond)
}

func place(handle, parent Handle) string {
	s := "root"
	if parent != HandleRoot {
		s = "parent " + parent.String()
	}
	if handle != HandleNone {
		s += " handle " + handle.String()
	}
	return s
}

// QdiscArgs is the part of `tc qdisc add dev D ...` after the device.
func QdiscArgs(q *Qdisc) string {
	a := []string{place(q.Handle, q.Parent)}
	if s := q.Stab; s != nil {
		a = append(a, fmt.Sprintf("stab mtu %d tsize %d mpu %d overhead %d linklayer %s", s.MTU, s.TSize, s.MPU, s.Overhead, s.LinkLayer))
	}
	a = append(a, q.Kind)
	return strings.Join(append(a, OptionArgs(q)...), " ")
}

// OptionArgs renders a qdisc's kind-specific options as tc keywords.
// Parsing them back (as iqdisc_opts would be) gives the same options.
func OptionArgs(q *Qdisc) []string {
	var a []string
	add := func(f string, v ...any) { a = append(a, fmt.Sprintf(f, v...)) }
	nz := func(kw string, v uint32) {
		if v != 0 {
			add("%s %d", kw, v)
		}
	}
	dur := func(kw string, d time.Duration) {
		if d != 0 {
			add("%s %s", kw, timeString(d))
		}
	}
	flag := func(b *bool, yes, no string) {
		if b != nil {
			if *b {
				a = append(a, yes)
			} else {
				a = append(a, no)
			}
		}
	}
	switch {
	case q.HTB != nil:
		add("default %x", q.HTB.Default)
	case q.TBF != nil:
		add("rate %s burst %d latency %s", rateString(q.TBF.RateBits), q.TBF.Burst, timeString(q.TBF.Latency))
		a = append(a, rateLinkLayerArgs(q.TBF.LinkLayer)...)
	case q.FqCodel != nil:
		f := q.FqCodel
		nz("limit", f.Limit)
		nz("flows", f.Flows)
		nz("quantum", f.Quantum)
		dur("target", f.Target)
		dur("interval", f.Interval)
		flag(f.ECN, "ecn", "noecn")
		dur("ce_threshold", f.CEThreshold)
		nz("memory_limit", f.MemoryLimit)
		nz("drop_batch", f.DropBatch)
	case q.Codel != nil:
		c := q.Codel
		nz("limit", c.Limit)
		dur("target", c.Target)
		dur("interval", c.Interval)
		flag(c.ECN, "ecn", "noecn")
		dur("ce_threshold", c.CEThreshold)
	case q.Pie != nil:
		c := q.Pie
		nz("limit", c.Limit)
		dur("target", c.Target)
		dur("tupdate", c.TUpdate)
		nz("alpha", c.Alpha)
		nz("beta", c.Beta)
		flag(c.ECN, "ecn", "noecn")
		flag(c.Bytemode, "bytemode", "nobytemode")
	case q.FqPie != nil:
		c := q.FqPie
		nz("limit", c.Limit)
		nz("flows", c.Flows)
		dur("target", c.Target)
		dur("tupdate", c.TUpdate)
		nz("alpha", c.Alpha)
		nz("beta", c.Beta)
		nz("quantum", c.Quantum)
		nz("memory_limit", c.MemoryLimit)
		nz("ecn_prob", c.ECNProb)
		flag(c.ECN, "ecn", "noecn")
		flag(c.Bytemode, "bytemode", "nobytemode")
	case q.SFQ != nil:
		c := q.SFQ
		nz("limit", c.Limit)
		nz("perturb", c.Perturb)
		nz("quantum", c.Quantum)
		nz("divisor", c.Divisor)
		nz("flows", c.Flows)
		nz("depth", c.Depth)
	case q.Fifo != nil:
		add("limit %d", q.Fifo.Limit)
	case q.Cake != nil:
		a = append(a, CakeArgs(q.Cake)...)
	}
	return a
}

// CakeArgs renders cake options as tc-cake keywords; parsing them back
// gives the same Cake (the fuzz test holds it to that).
func CakeArgs(c *Cake) []string {
	var a []string
	add := func(f string, v ...any) { a = append(a, fmt.Sprintf(f, v...)) }
	flag := func(b *bool, yes, no string) {
		if b != nil {
			if *b {
				a = append(a, yes)
			} else {
				a = append(a, no)
			}
		}
	}
	switch {
	case c.BandwidthBits != 0:
		add("bandwidth %s", rateString(c.BandwidthBits))
	case c.Autorate != nil:
		a = append(a, "unlimited")
	}
	if c.Autorate != nil && *c.Autorate {
		a = append(a, "autorate-ingress")
	}
	if c.RTT != 0 {
		add("rtt %s", timeString(c.RTT))
	}
	if c.Diffserv != "" {
		a = append(a, c.Diffserv)
	}
	if c.FlowMode != "" {
		a = append(a, c.FlowMode)
	}
	flag(c.NAT, "nat", "nonat")
	flag(c.Wash, "wash", "nowash")
	flag(c.SplitGSO, "split-gso", "no-split-gso")
	if c.ACKFilter != "" {
		a = append(a, c.ACKFilter)
	}
	flag(c.Ingress, "ingress", "egress")
	if c.Raw != nil && *c.Raw {
		a = append(a, "raw")
	}
	if c.ATM != "" {
		a = append(a, c.ATM)
	}
	if c.Overhead != nil && !(c.Raw != nil && *c.Raw && *c.Overhead == 0) {
		add("overhead %d", *c.Overhead)
	}
	if c.MPU != nil {
		add("mpu %d", *c.MPU)
	}
	if c.Memlimit != 0 {
		add("memlimit %d", c.Memlimit)
	}
	if c.FwMark != 0 {
		add("fwmark 0x%x", c.FwMark)
	}
	return a
}

func rateLinkLayerArgs(r *RateLinkLayer) []string {
	if r == nil {
		return nil
	}
	a := []string{fmt.Sprintf("mpu %d linklayer %s overhead %d", r.MPU, r.LinkLayer, r.Overhead)}
	if r.MTU != 0 {
		a = append(a, fmt.Sprintf("mtu %d", r.MTU))
	}
	return a
}

// ClassArgs is the part of `tc class add dev D ...` after the device.
func ClassArgs(c *Class) string {
	a := []string{"parent " + c.Parent.String(), "classid " + c.ClassID.String(), "htb"}
	h := c.HTB
	if h.Quantum != 0 {
		a = append(a, fmt.Sprintf("quantum %d", h.Quantum))
	}
	a = append(a, fmt.Sprintf("rate %s ceil %s", rateString(h.RateBits), rateString(h.CeilBits)))
	if h.Burst != 0 {
		a = append(a, fmt.Sprintf("burst %d", h.Burst))
	}
	if h.CBurst != 0 {
		a = append(a, fmt.Sprintf("cburst %d", h.CBurst))
	}
	if h.Prio != 0 {
		a = append(a, fmt.Sprintf("prio %d", h.Prio))
	}
	a = append(a, rateLinkLayerArgs(h.LinkLayer)...)
	return strings.Join(a, " ")
}

// FilterArgs is the part of `tc filter add dev D ...` after the device.
func FilterArgs(f *Filter) string {
	a := []string{fmt.Sprintf("parent %s protocol %s prio %d %s", f.Parent, f.Protocol, f.Prio, f.Kind)}
	if f.U32 != nil {
		for _, k := range f.U32.Keys {
			a = append(a, fmt.Sprintf("match u32 0x%08x 0x%08x at %d", k.Val, k.Mask, k.Off))
		}
	}
	if f.CodelPolice != nil {
		a = append(a, "da obj codel_police.o sec classifier")
	}
	if f.FlowID != HandleNone {
		a = append(a, "flowid "+f.FlowID.String())
	}
	for _, act := range f.Actions {
		switch {
		case act.Mirred != nil:
			a = append(a, "action mirred egress redirect dev "+shq(act.Mirred.Device))
		case act.Police != nil:
			p := act.Police
			a = append(a, fmt.Sprintf("action police rate %s burst %d mtu %d conform-exceed drop/ok", rateString(p.RateBits), p.Burst, p.MTU))
		}
	}
	return strings.Join(a, " ")
}
