package kernel

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"sqm/internal/plan"
)

// Matches compares the kernel's current tree on the plan's devices with p:
// kinds, handles, parents, the options sqm sets and the filters. When they
// differ, diff says how, one line per difference. Options sqm leaves at the
// kernel's default are not compared; times the kernel stores in coarser
// units (codel's 1024 ns, pie's jiffies) are compared with that tolerance.
func (c *Conn) Matches(p *plan.Plan) (bool, string, error) {
	if p == nil || p.Interface == "" {
		return false, "", errors.New("matches: plan has no interface")
	}
	l, err := c.linkByName(p.Interface)
	if err != nil {
		return false, "", fmt.Errorf("matches: %w", err)
	}
	ok, diff, _, err := c.matches(p, l)
	return ok, diff, err
}

// matches is Matches on a looked-up interface; it also returns the
// interface's tree so Apply need not dump it again.
func (c *Conn) matches(p *plan.Plan, l *link) (bool, string, *tree, error) {
	var diffs []string
	// The IFB is named by the hook's mirred action and by the plan's
	// ingress; one lookup per device and comparison is enough.
	type found struct {
		l   *link
		err error
	}
	seen := map[string]found{}
	lookup := func(dev string) (*link, error) {
		if f, ok := seen[dev]; ok {
			return f.l, f.err
		}
		dl, err := c.linkByName(dev)
		seen[dev] = found{dl, err}
		return dl, err
	}
	res := func(dev string) (int, error) {
		dl, err := lookup(dev)
		if err != nil {
			return 0, err
		}
		return dl.Index, nil
	}
	cur, err := c.readTree(l.Index)
	if err != nil {
		return false, "", nil, fmt.Errorf("matches %s: %w", p.Interface, err)
	}
	if p.Egress != nil {
		ops, err := treeOps(p.Egress, c.tick, res)
		if err != nil {
			return false, "", nil, fmt.Errorf("matches %s: %w", p.Interface, err)
		}
		diffs = append(diffs, compareTree(p.Interface, ops, cur, false)...)
	}
	if in := p.Ingress; in != nil {
		ing := cur.ingress()
		if ing == nil || ing.Kind != "ingress" {
			diffs = append(diffs, fmt.Sprintf("%s: ingress qdisc missing", p.Interface))
		}
		var hook []op
		for i := range in.Hook {
			o, err := filterOp(p.Interface, &in.Hook[i], c.tick, res)
			if errors.Is(err, ErrNoLink) {
				diffs = append(diffs, fmt.Sprintf("%s: %v", p.Interface, err))
				continue
			}
			if err != nil {
				return false, "", nil, fmt.Errorf("matches %s: %w", p.Interface, err)
			}
			hook = append(hook, o)
		}
		diffs = append(diffs, compareFilters(p.Interface, hook, cur.filters, func(f *object) bool { return f.Parent == ingressHandle })...)
		if in.IFB != "" {
			il, err := lookup(in.IFB)
			switch {
			case errors.Is(err, ErrNoLink):
				diffs = append(diffs, fmt.Sprintf("%s: ifb device missing", in.IFB))
			case err != nil:
				return false, "", nil, fmt.Errorf("matches %s: %w", p.Interface, err)
			default:
				if !il.Up {
					diffs = append(diffs, fmt.Sprintf("%s: ifb device is down", in.IFB))
				}
				if in.Shaper != nil {
					ops, err := treeOps(in.Shaper, c.tick, res)
					if err != nil {
						return false, "", nil, fmt.Errorf("matches %s: %w", in.IFB, err)
					}
					it, err := c.readTree(il.Index)
					if err != nil {
						return false, "", nil, fmt.Errorf("matches %s: %w", in.IFB, err)
					}
					diffs = append(diffs, compareTree(in.IFB, ops, it, true)...)
				}
			}
		}
	}
	return len(diffs) == 0, strings.Join(diffs, "\n"), cur, nil
}

// compareTree compares the root tree part (qdiscs, classes, non-ingress
// filters) of one device.
func compareTree(dev string, ops []op, cur *tree, ifb bool) []string {
	var diffs []string
	var fops []op
	wantQ := map[string]*op{}
	wantC := map[string]*op{}
	for i := range ops {
		o := &ops[i]
		switch o.kind {
		case opQdisc:
			wantQ[fmt.Sprintf("qdisc %s %s parent %s", o.tcKind, o.handle, o.parent)] = o
		case opClass:
			wantC[fmt.Sprintf("class %s %s parent %s", o.tcKind, o.handle, o.parent)] = o
		case opFilter:
			fops = append(fops, *o)
		}
	}
	seen := map[string]bool{}
	for i := range cur.qdiscs {
		q := &cur.qdiscs[i]
		// Skip the kernel's defaults (handle 0:) and the ingress hook.
		if q.Handle.Major() == 0 || q.Parent == plan.HandleIngress {
			continue
		}
		k := fmt.Sprintf("qdisc %s %s parent %s", q.Kind, q.Handle, q.Parent)
		want, ok := wantQ[k]
		if !ok {
			diffs = append(diffs, fmt.Sprintf("%s: unexpected %s", dev, k))
			continue
		}
		seen[k] = true
		diffs = append(diffs, compareFacts(dev+": "+k, want.facts, qdiscFacts(q))...)
	}
	for i := range cur.classes {
		cl := &cur.classes[i]
		parent := cl.Parent
		if parent == plan.HandleRoot {
			// The kernel reports a top class's parent as root; tc and
			// the plan name the qdisc.
			parent = plan.MakeHandle(cl.Handle.Major(), 0)
		}
		k := fmt.Sprintf("class %s %s parent %s", cl.Kind, cl.Handle, parent)
		want, ok := wantC[k]
		if !ok {
			// Only htb classes are sqm's; mq and the like own theirs.
			if cl.Kind == "htb" {
				diffs = append(diffs, fmt.Sprintf("%s: unexpected %s", dev, k))
			}
			continue
		}
		seen[k] = true
		diffs = append(diffs, compareFacts(dev+": "+k, want.facts, classFacts(cl))...)
	}
	for k := range wantQ {
		if !seen[k] {
			diffs = append(diffs, fmt.Sprintf("%s: missing %s", dev, k))
		}
	}
	for k := range wantC {
		if !seen[k] {
			diffs = append(diffs, fmt.Sprintf("%s: missing %s", dev, k))
		}
	}
	diffs = append(diffs, compareFilters(dev, fops, cur.filters, func(f *object) bool { return f.Parent != ingressHandle })...)
	slices.Sort(diffs)
	return diffs
}

// compareFilters compares filters as multisets of their descriptions.
func compareFilters(dev string, want []op, have []object, sel func(*object) bool) []string {
	count := map[string]int{}
	for _, o := range want {
		count[fmt.Sprintf("filter parent %s %s", o.parent, o.fd.String())]++
	}
	for i := range have {
		f := &have[i]
		if !sel(f) {
			continue
		}
		count[fmt.Sprintf("filter parent %s %s", f.Parent, filterDesc(f))]--
	}
	var diffs []string
	for k, n := range count {
		switch {
		case n > 0:
			diffs = append(diffs, fmt.Sprintf("%s: missing %s", dev, k))
		case n < 0:
			diffs = append(diffs, fmt.Sprintf("%s: unexpected %s", dev, k))
		}
	}
	slices.Sort(diffs)
	return diffs
}

// compareFacts reports every fact sqm set that the kernel does not hold.
func compareFacts(what string, want, have map[string]string) []string {
	keys := make([]string, 0, len(want))
	for k := range want {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var diffs []string
	for _, k := range keys {
		w, h := want[k], have[k]
		if w == h || closeEnough(k, w, h) {
			continue
		}
		if h == "" {
			h = "(absent)"
		}
		diffs = append(diffs, fmt.Sprintf("%s: %s: want %s, kernel has %s", what, k, w, h))
	}
	return diffs
}

// closeEnough accepts rounding in times the kernel keeps in other units.
func closeEnough(key, w, h string) bool {
	if !strings.HasSuffix(key, "_us") {
		return false
	}
	a, err1 := strconv.ParseInt(w, 10, 64)
	b, err2 := strconv.ParseInt(h, 10, 64)
	if err1 != nil || err2 != nil {
		return false
	}
	d := a - b
	if d < 0 {
		d = -d
	}
	tol := max(a/100, 2)
	if strings.HasPrefix(key, "tupdate") {
		tol = max(tol, 10000) // jiffies at HZ=100
	}
	return d <= tol
}

// Option attribute names per kind, for nested-attribute qdiscs, indexed
// by attribute type ("" for a type not compared). Package-level slices
// behind a switch, not a map of maps: the slices are static data, where a
// map literal is code run at init (5.6 KB of it on mipsle for this one).
var (
	cakeOptNames = []string{2: "base_rate", 3: "diffserv", 4: "atm", 5: "flow_mode", 6: "overhead", 7: "rtt", 9: "autorate",
		10: "memory", 11: "nat", 12: "raw", 13: "wash", 14: "mpu", 15: "ingress", 16: "ack_filter", 17: "split_gso", 18: "fwmark"}
	fqCodelOptNames = []string{1: "target_us", 2: "limit", 3: "interval_us", 4: "ecn", 5: "flows", 6: "quantum", 7: "ce_threshold_us",
		8: "drop_batch", 9: "memory_limit"}
	codelOptNames = []string{1: "target_us", 2: "limit", 3: "interval_us", 4: "ecn", 5: "ce_threshold_us"}
	pieOptNames   = []string{1: "target_us", 2: "limit", 3: "tupdate_us", 4: "alpha", 5: "beta", 6: "ecn", 7: "bytemode"}
	fqPieOptNames = []string{1: "limit", 2: "flows", 3: "target_us", 4: "tupdate_us", 5: "alpha", 6: "beta", 7: "quantum",
		8: "memory_limit", 9: "ecn_prob", 10: "ecn", 11: "bytemode"}
)

func optNames(kind string) []string {
	switch kind {
	case "cake":
		return cakeOptNames
	case "fq_codel":
		return fqCodelOptNames
	case "codel":
		return codelOptNames
	case "pie":
		return pieOptNames
	case "fq_pie":
		return fqPieOptNames
	}
	return nil
}

// qdiscFacts decodes a dumped qdisc's options into the facts qdiscOp sets.
func qdiscFacts(q *object) map[string]string {
	f := map[string]string{}
	if q.Stab != nil {
		for k, v := range stabFacts(*q.Stab) {
			f[k] = v
		}
	}
	if names := optNames(q.Kind); names != nil {
		for t, v := range attrMap(q.Options) {
			if int(t) >= len(names) || names[t] == "" {
				continue
			}
			n := names[t]
			switch n {
			case "raw":
				f[n] = "1" // a flag: present means raw
			case "overhead":
				f[n] = strconv.Itoa(int(int32(scalar(v))))
			default:
				f[n] = strconv.FormatUint(scalar(v), 10)
			}
		}
		return f
	}
	switch q.Kind {
	case "htb":
		a := attrMap(q.Options)
		if g := a[2]; len(g) >= 20 { // TCA_HTB_INIT
			setFact(f, "default", u32At(g, 8))
		}
	case "tbf":
		a := attrMap(q.Options)
		if p := a[1]; len(p) >= 36 { // TCA_TBF_PARMS
			rs := decodeRateSpec(p[0:12])
			rate := uint64(rs.Rate)
			if r64, ok := a[4]; ok {
				rate = scalar(r64)
			}
			setFact(f, "rate", rate)
			setFact(f, "limit", u32At(p, 24))
			setFact(f, "buffer", u32At(p, 28))
			rateFacts(f, "rate", rs)
		}
	case "pfifo", "bfifo":
		if len(q.Options) >= 4 {
			setFact(f, "limit", u32At(q.Options, 0))
		}
	case "sfq":
		o := q.Options
		if len(o) >= 20 {
			setFact(f, "quantum", u32At(o, 0))
			setFact(f, "perturb", u32At(o, 4))
			setFact(f, "limit", u32At(o, 8))
			setFact(f, "divisor", u32At(o, 12))
			setFact(f, "flows", u32At(o, 16))
		}
		if len(o) >= 24 {
			setFact(f, "depth", u32At(o, 20))
		}
	}
	return f
}

func rateFacts(f map[string]string, prefix string, rs rateSpec) {
	setFact(f, prefix+".linklayer", rs.LinkLayer)
	setFact(f, prefix+".overhead", rs.Overhead)
	setFact(f, prefix+".mpu", rs.MPU)
}

// classFacts decodes a dumped htb class.
func classFacts(cl *object) map[string]string {
	f := map[string]string{}
	if cl.Kind != "htb" {
		return f
	}
	rate, ceil, p, ok := htbRates(cl)
	if !ok {
		return f
	}
	rs, cs := decodeRateSpec(p[0:12]), decodeRateSpec(p[12:24])
	setFact(f, "rate", rate)
	setFact(f, "ceil", ceil)
	setFact(f, "buffer", u32At(p, 24))
	setFact(f, "cbuffer", u32At(p, 28))
	setFact(f, "quantum", u32At(p, 32))
	setFact(f, "prio", u32At(p, 40))
	rateFacts(f, "rate", rs)
	rateFacts(f, "ceil", cs)
	return f
}

// htbRates decodes a dumped htb class's rate and ceil (bytes/s: the
// 64-bit attributes where present) and returns its TCA_HTB_PARMS (rate,
// ceil, buffer, cbuffer, quantum, level, prio); ok is false when those
// are missing or short.
func htbRates(cl *object) (rate, ceil uint64, parms []byte, ok bool) {
	a := attrMap(cl.Options)
	p := a[1]
	if len(p) < 44 {
		return 0, 0, nil, false
	}
	rate, ceil = uint64(decodeRateSpec(p[0:12]).Rate), uint64(decodeRateSpec(p[12:24]).Rate)
	if v, ok := a[6]; ok {
		rate = scalar(v)
	}
	if v, ok := a[7]; ok {
		ceil = scalar(v)
	}
	return rate, ceil, p, true
}

// filterDesc renders a dumped filter the way filterOp describes a planned
// one.
func filterDesc(f *object) string {
	d := fdesc{kind: f.Kind, prio: uint16(f.Info >> 16), proto: htons(uint16(f.Info))}
	a := attrMap(f.Options)
	var acts []byte
	switch f.Kind {
	case "u32":
		if sel := a[tcaU32Sel]; len(sel) >= 16 {
			n := int(sel[2])
			for i := 0; i < n && 16+16*(i+1) <= len(sel); i++ {
				kb := sel[16+16*i:]
				d.keys = append(d.keys, plan.U32Key{
					Mask: binary.BigEndian.Uint32(kb[0:]),
					Val:  binary.BigEndian.Uint32(kb[4:]),
					Off:  int32(binary.NativeEndian.Uint32(kb[8:])),
				})
			}
		}
		if v, ok := a[tcaU32ClassID]; ok {
			d.flowid = plan.Handle(scalar(v))
		}
		acts = a[tcaU32Act]
	case "matchall":
		if v, ok := a[1]; ok {
			d.flowid = plan.Handle(scalar(v))
		}
		acts = a[2]
	case "bpf":
		bpfDesc(&d, f.Options)
	}
	list := attrMap(acts)
	for i := uint16(1); ; i++ {
		ab, ok := list[i]
		if !ok {
			break
		}
		act := attrMap(ab)
		kind := strings.TrimRight(string(act[1]), "\x00")
		opts := attrMap(act[2])
		switch kind {
		case "mirred":
			p := opts[2] // TCA_MIRRED_PARMS
			if len(p) >= 28 && u32At(p, 20) == tcaEgressRedir {
				d.acts = append(d.acts, fmt.Sprintf("mirred(egress redirect ifindex %d)", u32At(p, 24)))
			} else {
				d.acts = append(d.acts, "mirred(other)")
			}
		case "police":
			tbf := opts[tcaPoliceTbf]
			if len(tbf) < 32 {
				d.acts = append(d.acts, "police(?)")
				break
			}
			var r64 uint64
			if v, ok := opts[tcaPoliceRate64]; ok {
				r64 = scalar(v)
			}
			d.acts = append(d.acts, policeDesc(tbf, r64))
		default:
			d.acts = append(d.acts, kind)
		}
	}
	return d.String()
}

// ownsRoot reports whether cur's root qdisc is the egress tree sqm
// recorded in o. The handle alone proves nothing: "root handle 1: htb" is
// what sqm installs and also what an administrator typing the textbook
// command gets, so with a stale state file `sqm stop` would delete the
// administrator's tree. When o carries the applied plan (every state
// written since plans were recorded) the device's qdiscs and htb classes
// must be exactly the recorded ones, kind, handle and parent; option
// values may differ (someone may have tuned them). Without a plan only
// the handle can be compared, as before.
func ownsRoot(cur *tree, o *Owned) bool {
	r := cur.root()
	if o == nil || !o.EgressRoot || r == nil || r.Handle != o.EgressHandle {
		return false
	}
	if o.Plan == nil || o.Plan.Egress == nil {
		return true
	}
	return sameShape(planShape(o.Plan.Egress), treeShape(cur))
}

// ownsIngress reports whether cur's ingress qdisc is the one sqm recorded
// in o: an ingress (not clsact) qdisc whose filters are exactly the
// recorded hook filters (redirect targets aside: the IFB's index changes
// when it is re-created). An ingress qdisc with filters sqm did not add is
// someone else's.
func (c *Conn) ownsIngress(cur *tree, o *Owned) bool {
	r := cur.ingress()
	if o == nil || !o.Ingress || r == nil || r.Kind != "ingress" {
		return false
	}
	if o.Plan == nil || o.Plan.Ingress == nil {
		return true
	}
	anyDev := func(string) (int, error) { return 1, nil }
	want := map[string]int{}
	for i := range o.Plan.Ingress.Hook {
		op, err := filterOp(o.Interface, &o.Plan.Ingress.Hook[i], c.tick, anyDev)
		if err != nil {
			return false
		}
		want[noIfindex(op.fd.String())]++
	}
	for i := range cur.filters {
		if f := &cur.filters[i]; f.Parent == ingressHandle {
			want[noIfindex(filterDesc(f))]--
		}
	}
	for _, n := range want {
		if n != 0 {
			return false
		}
	}
	return true
}

// noIfindex drops redirect targets' interface indexes from a filter
// description.
func noIfindex(desc string) string {
	f := strings.Fields(desc)
	for i := range f {
		if i > 0 && f[i-1] == "ifindex" {
			f[i] = "N)"
		}
	}
	return strings.Join(f, " ")
}

// planShape and treeShape list a tree's qdiscs and htb classes as
// "kind handle parent", the structure ownsRoot compares.
func planShape(t *plan.Tree) []string {
	var s []string
	for _, q := range t.Qdiscs {
		s = append(s, fmt.Sprintf("qdisc %s %s parent %s", q.Kind, q.Handle, q.Parent))
	}
	for _, cl := range t.Classes {
		s = append(s, fmt.Sprintf("class htb %s parent %s", cl.ClassID, cl.Parent))
	}
	return s
}

func treeShape(cur *tree) []string {
	var s []string
	for i := range cur.qdiscs {
		q := &cur.qdiscs[i]
		// As in compareTree: the kernel's own defaults (handle 0:) and
		// the ingress side are not part of the root tree.
		if q.Handle.Major() == 0 || q.Parent == plan.HandleIngress {
			continue
		}
		s = append(s, fmt.Sprintf("qdisc %s %s parent %s", q.Kind, q.Handle, q.Parent))
	}
	for i := range cur.classes {
		cl := &cur.classes[i]
		if cl.Kind != "htb" {
			continue
		}
		parent := cl.Parent
		if parent == plan.HandleRoot {
			parent = plan.MakeHandle(cl.Handle.Major(), 0)
		}
		s = append(s, fmt.Sprintf("class htb %s parent %s", cl.Handle, parent))
	}
	return s
}

func sameShape(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}
