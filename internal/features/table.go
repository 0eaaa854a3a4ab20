package features

import "sort"

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
	// OpenWrt is the package that installs the module on OpenWrt.
	OpenWrt string
}

func (f Feature) String() string { return string(f.Type) + " " + f.Name }

// table lists every feature sqm uses. OpenWrt package names follow
// package/kernel/linux/modules/netsupport.mk: kmod-sched-core carries
// htb, tbf, ingress/clsact, fq_codel, u32, fw, matchall, gact, mirred and
// skbedit; kmod-sched carries the "extra" schedulers and police.
var table = []Feature{
	{TypeQdisc, "htb", "sch_htb", "kmod-sched-core"},
	{TypeQdisc, "tbf", "sch_tbf", "kmod-sched-core"},
	{TypeQdisc, "cake", "sch_cake", "kmod-sched-cake"},
	{TypeQdisc, "fq_codel", "sch_fq_codel", "kmod-sched-core"},
	{TypeQdisc, "codel", "sch_codel", "kmod-sched"},
	{TypeQdisc, "pie", "sch_pie", "kmod-sched"},
	{TypeQdisc, "fq_pie", "sch_fq_pie", "kmod-sched"},
	{TypeQdisc, "sfq", "sch_sfq", "kmod-sched"},
	{TypeQdisc, "pfifo", "", "kmod-sched-core"},
	{TypeQdisc, "bfifo", "", "kmod-sched-core"},
	{TypeQdisc, "netem", "sch_netem", "kmod-netem"},
	{TypeQdisc, "ingress", "sch_ingress", "kmod-sched-core"},
	{TypeQdisc, "clsact", "sch_ingress", "kmod-sched-core"},

	{TypeClassifier, "u32", "cls_u32", "kmod-sched-core"},
	{TypeClassifier, "matchall", "cls_matchall", "kmod-sched-core"},
	{TypeClassifier, "flower", "cls_flower", "kmod-sched-flower"},
	{TypeClassifier, "fw", "cls_fw", "kmod-sched-core"},
	{TypeClassifier, "bpf", "cls_bpf", "kmod-sched-bpf"}, // codel_police's program (direct action)

	{TypeAction, "mirred", "act_mirred", "kmod-sched-core"},
	{TypeAction, "police", "act_police", "kmod-sched"},
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
	sort.Strings(n)
	return n
}
