package features

import "slices"

// Type is what kind of kernel object a feature is.
type Type string

const (
	TypeQdisc      Type = "qdisc"
	TypeClassifier Type = "classifier"
	TypeAction     Type = "action"
	TypeLink       Type = "link"
)

// Feature names one kernel object kind and where it comes from.
type Feature struct {
	Type Type
	Name string // the kind as tc spells it: "cake", "u32", "mirred", "ifb"
	// Module is the Linux module that provides it ("" if it is part of the
	// traffic-control core and cannot be a module).
	Module string
	// OpenWrt is the package that installs the module on OpenWrt, or ""
	// where OpenWrt's kernel has it built in.
	OpenWrt string
}

func (f Feature) String() string { return string(f.Type) + " " + f.Name }

// table lists every feature sqm uses. The OpenWrt package names are those
// of OpenWrt 25.12: checked in 2026-12 against
// package/kernel/linux/modules/netsupport.mk of a tree rebased on 25.12
// (the KernelPackage/sched-* definitions and the SCHED_MODULES_CORE and
// SCHED_MODULES_EXTRA lists), netdevices.mk for kmod-ifb, and the generic
// kernel config for what is built in (CONFIG_NET_SCH_FQ_CODEL=y):
//
//   - kmod-sched-core: sch_htb, sch_tbf, sch_ingress (ingress and clsact),
//     cls_u32, cls_fw, cls_matchall, act_gact, act_mirred, act_skbedit
//     (its SCHED_MODULES_CORE list);
//   - their own packages: kmod-sched-cake, kmod-sched-pie, kmod-sched-fq-pie,
//     kmod-sched-flower, kmod-sched-bpf (cls_bpf and act_bpf),
//     kmod-sched-act-police, kmod-sched-ctinfo, kmod-netem, kmod-ifb;
//   - kmod-sched ("extra traffic schedulers"): sch_codel, sch_sfq, among
//     others (its SCHED_MODULES_EXTRA list);
//   - built into every OpenWrt kernel: sch_fq_codel (CONFIG_NET_SCH_FQ_CODEL=y,
//     the default qdisc) and the fifo qdiscs (part of CONFIG_NET_SCHED).
//
// OpenWrt is "" for those built in: no package can add them, and Advice
// says so.
var table = []Feature{
	{TypeQdisc, "htb", "sch_htb", "kmod-sched-core"},
	{TypeQdisc, "tbf", "sch_tbf", "kmod-sched-core"},
	{TypeQdisc, "cake", "sch_cake", "kmod-sched-cake"},
	{TypeQdisc, "fq_codel", "sch_fq_codel", ""},
	{TypeQdisc, "codel", "sch_codel", "kmod-sched"},
	{TypeQdisc, "pie", "sch_pie", "kmod-sched-pie"},
	{TypeQdisc, "fq_pie", "sch_fq_pie", "kmod-sched-fq-pie"},
	{TypeQdisc, "sfq", "sch_sfq", "kmod-sched"},
	{TypeQdisc, "pfifo", "", ""},
	{TypeQdisc, "bfifo", "", ""},
	{TypeQdisc, "netem", "sch_netem", "kmod-netem"},
	{TypeQdisc, "ingress", "sch_ingress", "kmod-sched-core"},
	{TypeQdisc, "clsact", "sch_ingress", "kmod-sched-core"},

	{TypeClassifier, "u32", "cls_u32", "kmod-sched-core"},
	{TypeClassifier, "matchall", "cls_matchall", "kmod-sched-core"},
	{TypeClassifier, "flower", "cls_flower", "kmod-sched-flower"},
	{TypeClassifier, "fw", "cls_fw", "kmod-sched-core"},
	{TypeClassifier, "bpf", "cls_bpf", "kmod-sched-bpf"}, // codel_police's program (direct action)

	{TypeAction, "mirred", "act_mirred", "kmod-sched-core"},
	{TypeAction, "police", "act_police", "kmod-sched-act-police"},
	{TypeAction, "gact", "act_gact", "kmod-sched-core"},
	{TypeAction, "skbedit", "act_skbedit", "kmod-sched-core"},
	{TypeAction, "ctinfo", "act_ctinfo", "kmod-sched-ctinfo"},

	{TypeLink, "ifb", "ifb", "kmod-ifb"},
}

// Lookup returns the table entry for a kind.
func Lookup(t Type, name string) (Feature, bool) {
	for _, f := range table {
		if f.Type == t && f.Name == name {
			return f, true
		}
	}
	return Feature{}, false
}

// All returns every feature the prober knows, in table order.
func All() []Feature { return append([]Feature(nil), table...) }

func namesOf(t Type) []string {
	var n []string
	for _, f := range table {
		if f.Type == t {
			n = append(n, f.Name)
		}
	}
	slices.Sort(n)
	return n
}
