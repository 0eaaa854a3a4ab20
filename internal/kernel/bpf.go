package kernel

import (
	"fmt"
	"strings"

	"sqm/internal/codelpolice"
	"sqm/internal/nlattr"
	"sqm/internal/plan"
)

// cls_bpf attributes (linux/pkt_cls.h TCA_BPF_*).
const (
	tcaBPFFD             = 6
	tcaBPFName           = 7
	tcaBPFFlags          = 8
	tcaBPFID             = 11
	tcaBPFFlagActDirect  = 1
	arphrdEther          = 1
	bpfDirectActionLabel = "direct-action"
)

// codelPoliceName is the cls_bpf filter's name: the program and every
// parameter, so Matches (which sees only what the kernel dumps, not the
// program's maps) can tell a filter with other parameters or another
// build of the program from the planned one.
func codelPoliceName(p *plan.CodelPolice) string {
	return fmt.Sprintf("%s-%s rate=%d target=%d interval=%d limit=%d mtu=%d ecn=%t flows=%t",
		codelpolice.ProgName, codelpolice.ObjectTag(), p.RateBits, p.Target.Nanoseconds(), p.Interval.Nanoseconds(),
		p.Limit.Nanoseconds(), p.MTU, p.ECN, p.Flows)
}

// bpfFilterOp fills a "bpf" filter's op. The program is loaded only when
// the op runs (runOps): Matches and ownsIngress build ops too and must
// not load anything.
func bpfFilterOp(o *op, desc *fdesc, fl *plan.Filter) error {
	if fl.CodelPolice == nil {
		return fmt.Errorf("bpf filter without a program")
	}
	if err := fl.CodelPolice.Validate(); err != nil {
		return err
	}
	if fl.FlowID != 0 || len(fl.Actions) > 0 {
		return fmt.Errorf("bpf filter: flowid and actions are not supported (the program decides in direct-action mode)")
	}
	o.bpf = fl.CodelPolice
	desc.acts = append(desc.acts, fmt.Sprintf("program(%q)", codelPoliceName(fl.CodelPolice)), bpfDirectActionLabel)
	return nil
}

// l2Len is the link-layer header the program finds before the IP header
// at the ingress hook: 14 on Ethernet, none on PPP, tun and the like.
func l2Len(l *link) int {
	if l.Type == arphrdEther {
		return 14
	}
	return 0
}

// loadBPF loads o's program and sets its request options; the caller
// closes the program once the kernel has answered (the filter keeps its
// own reference).
func loadBPF(o *op, l2len int) (*codelpolice.Program, error) {
	prog, err := codelpolice.Load(o.bpf, l2len)
	if err != nil {
		return nil, err
	}
	b := nlattr.Attr(tcaBPFFD, le32(uint32(prog.FD())))
	b = append(b, nlattr.Attr(tcaBPFName, cstr(codelPoliceName(o.bpf)))...)
	b = append(b, nlattr.Attr(tcaBPFFlags, le32(tcaBPFFlagActDirect))...)
	o.rawOpts = b
	return prog, nil
}

// bpfDesc describes a dumped cls_bpf filter as bpfFilterOp does.
func bpfDesc(d *fdesc, opts []byte) {
	a := attrMap(opts)
	if name, ok := a[tcaBPFName]; ok {
		d.acts = append(d.acts, fmt.Sprintf("program(%q)", strings.TrimRight(string(name), "\x00")))
	}
	if v, ok := a[tcaBPFFlags]; ok && scalar(v)&tcaBPFFlagActDirect != 0 {
		d.acts = append(d.acts, bpfDirectActionLabel)
	}
}

// codelPoliceStatus reads the counters of the codel_police program on a
// device's ingress hook, if there is one.
func codelPoliceStatus(t *tree) (*codelpolice.Counters, error) {
	for i := range t.filters {
		f := &t.filters[i]
		if f.Kind != "bpf" || f.Parent != ingressHandle {
			continue
		}
		a := attrMap(f.Options)
		name := strings.TrimRight(string(a[tcaBPFName]), "\x00")
		id, ok := a[tcaBPFID]
		if !strings.HasPrefix(name, codelpolice.ProgName+"-") || !ok {
			continue
		}
		c, err := codelpolice.ReadCounters(uint32(scalar(id)))
		if err != nil {
			return nil, err
		}
		return &c, nil
	}
	return nil, nil
}
