package plan

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"sqm/internal/config"
	"sqm/internal/units"
)

// Env is what the planner needs to know about the system. The caller reads
// it (the planner does no I/O), so plans are reproducible in tests.
type Env struct {
	// MTU is the shaped interface's MTU (/sys/class/net/IF/mtu). As in
	// sqm-scripts it is used for the IFB too. It sets the minimum HTB
	// burst/quantum, bfifo's byte limit and the policer's bucket.
	MTU int
}

// Recipes yields the scripts Build knows, sqm-scripts' five plus police:
// `for _, script := range plan.Recipes`. The list is config.Scripts, so
// the config reader and the planner accept exactly the same names; Build
// has a case for each (TestRecipesIterators checks that).
func Recipes(yield func(int, string) bool) {
	for i, s := range config.Scripts() {
		if !yield(i, s) {
			return
		}
	}
}

// LeafQdiscs yields the qdiscs Build can put at the leaves (cake: alone at
// the root), in the order error messages list them.
func LeafQdiscs(yield func(int, string) bool) {
	for i, s := range leafQdiscList() {
		if !yield(i, s) {
			return
		}
	}
}

func leafQdiscList() []string {
	return []string{"fq_codel", "codel", "pie", "fq_pie", "cake", "sfq", "pfifo", "bfifo"}
}

// Constants from sqm-scripts (defaults.sh, functions.sh).
const (
	defaultLimit    = 1001     // LIMIT
	defaultFlows    = 1024     // get_flows without AUTOFLOW
	burstDurUS      = 1000     // SHAPER_BURST_DUR_US and SHAPER_QUANTUM_DUR_US
	autoTargetConst = 13992000 // 33 ATM cells * 53 B * 8 bit * 1000, in us*kbit/s
	minTargetUS     = 5000     // auto target floor
	intervalBaseUS  = 95000    // auto interval = this + target
	tbfLatency      = 300 * time.Millisecond
	defaultStabMTU  = 2047
	defaultStabTSz  = 512
	minRateKbit     = config.MinRateKbit // below this simple.qos's class rates (C/6, C-16) degenerate
	defaultCakeOpts = "diffserv3 nat"
)

// Handles shared by every HTB recipe (sqm-scripts §7.2).
const (
	hRoot  Handle = 1 << 16      // 1:
	hTop   Handle = 1<<16 | 1    // 1:1
	hFFFF  Handle = 0xffff << 16 // ffff:
	hLeaf1 Handle = 0x110 << 16  // 110:
)

// dir is one direction of a queue section, with sqm-scripts' per-direction
// variables (ILIMIT/ELIMIT, ITARGET/ETARGET, IECN/EECN, I/EQDISC_OPTS).
type dir struct {
	ingress  bool
	device   string
	rateKbit uint64
	// baseKbit is the section's configured rate (download/upload). It
	// differs from rateKbit only in Rerate's trees: the leaves' auto
	// target stays the one of the base rate.
	baseKbit uint64
	limit    uint32
	target   config.Target
	ecn      bool
	optsName string // UCI option the opts came from, for errors
	opts     []string
}

// builder holds one Build call's inputs and the plan being filled in.
type builder struct {
	q    *config.Queue
	env  Env
	p    *Plan
	ll   string // "", "ethernet" or "atm"
	llam string // effective mechanism: "", "tc_stab", "htb_private" or "cake"
	// shared: Rerate's trees share one read-only copy of the DSCP
	// filters (they do not depend on the rate, and building them is most
	// of simple.qos's cost: 170 allocations a change).
	shared bool
}

// Build turns one resolved queue section into its plan. It is pure and
// deterministic; errors name the option at fault via q.Errorf.
func Build(q *config.Queue, env Env) (*Plan, error) {
	b, err := newBuilder(q, env)
	if err != nil {
		return nil, err
	}
	if q.Upload != 0 {
		t, err := b.egress(b.direction(false))
		if err != nil {
			return nil, err
		}
		b.p.Egress = t
	}
	if (b.p.Script == "police" || b.p.Script == "codel_police") && q.Download != 0 && b.ll != "" {
		b.note("the ingress policer counts bytes as received and has no link-layer adaptation; set download a little lower to leave room for the overhead")
	}
	if q.Download != 0 {
		in, err := b.ingress(b.direction(true))
		if err != nil {
			return nil, err
		}
		b.p.Ingress = in
	}
	if err := b.autorate(); err != nil {
		return nil, err
	}
	return b.p, nil
}

// newBuilder checks q and resolves its recipe, qdisc and link layer: all
// of Build that does not depend on a direction's rate, shared by Build
// and Rerate.
func newBuilder(q *config.Queue, env Env) (*builder, error) {
	if q == nil {
		return nil, fmt.Errorf("plan: nil queue")
	}
	if q.Interface == "" {
		return nil, q.Errorf("interface", "no interface given; set option interface to the device to shape")
	}
	// 65536 is the loopback MTU on Linux.
	if env.MTU < 68 || env.MTU > 65536 {
		return nil, fmt.Errorf("plan: interface %s: MTU %d is not a usable MTU (68..65536); check the device", q.Interface, env.MTU)
	}
	script := strings.TrimSuffix(q.Script, ".qos")
	if !slices.Contains(config.Scripts(), script) {
		return nil, q.Errorf("script", "unknown script %q; use one of %s", q.Script, strings.Join(config.Scripts(), ", "))
	}
	qdisc := q.Qdisc
	if qdisc == "" {
		qdisc = "fq_codel"
	}
	if !slices.Contains(leafQdiscList(), qdisc) {
		return nil, q.Errorf("qdisc", "unsupported qdisc %q; use one of %s", q.Qdisc, strings.Join(leafQdiscList(), ", "))
	}
	for _, r := range []struct {
		opt  string
		kbit uint64
	}{{"upload", q.Upload}, {"download", q.Download}} {
		if r.kbit != 0 && r.kbit < minRateKbit {
			return nil, q.Errorf(r.opt, "rate %d kbit/s is too low to shape; use at least %d, or 0 to leave this direction alone", r.kbit, minRateKbit)
		}
		if r.kbit > config.MaxKbit { // keeps the arithmetic safe; Validate says the same
			return nil, q.Errorf(r.opt, "%d kbit/s is too large (at most %d kbit/s)", r.kbit, uint64(config.MaxKbit))
		}
	}
	b := &builder{q: q, env: env, p: &Plan{Interface: q.Interface, Section: q.Name, Script: script, Qdisc: qdisc}}
	switch script {
	case "simplest_tbf":
		if qdisc == "cake" {
			b.p.Qdisc = "fq_codel"
			b.note("simplest_tbf cannot use cake as a leaf; using fq_codel, as sqm-scripts does")
		}
	case "piece_of_cake", "layer_cake":
		if qdisc != "cake" {
			b.note(fmt.Sprintf("%s always uses cake; qdisc %s is ignored", script, qdisc))
		}
		b.p.Qdisc = "cake"
	}
	if script == "simple" && b.p.Qdisc != "cake" && q.SquashDSCP && q.Download != 0 {
		b.note("squash_dscp has no effect with simple and an HTB leaf: sqm does not rewrite DSCP in the firewall as sqm-scripts did")
	}
	if err := b.linkLayer(); err != nil {
		return nil, err
	}
	return b, nil
}

func (b *builder) note(s string) { b.p.Notes = append(b.p.Notes, s) }

func (b *builder) direction(ingress bool) dir {
	q := b.q
	if ingress {
		return dir{ingress: true, device: IFBName(q.Interface), rateKbit: q.Download, baseKbit: q.Download, limit: q.ILimit,
			target: q.ITarget, ecn: q.IngressECN, optsName: "iqdisc_opts", opts: strings.Fields(q.IQdiscOpts)}
	}
	return dir{device: q.Interface, rateKbit: q.Upload, baseKbit: q.Upload, limit: q.ELimit,
		target: q.ETarget, ecn: q.EgressECN, optsName: "eqdisc_opts", opts: strings.Fields(q.EQdiscOpts)}
}

// linkLayer picks the link-layer adaptation mechanism as sqm-scripts §4.6
// does, with htb_private+cake fixed to use cake's own keywords.
func (b *builder) linkLayer() error {
	q := b.q
	switch q.LinkLayer {
	case "", "none":
		return nil
	case "ethernet", "atm":
		b.ll = q.LinkLayer
	case "adsl":
		b.ll = "atm"
	default:
		return q.Errorf("linklayer", "unknown link layer %q; use none, ethernet or atm", q.LinkLayer)
	}
	cake := b.p.Qdisc == "cake"
	switch q.LLAM {
	case "", "default":
		b.llam = "tc_stab"
		if cake {
			b.llam = "cake"
		}
	case "tc_stab":
		b.llam = "tc_stab"
	case "htb_private":
		b.llam = "htb_private"
		if cake {
			// sqm-scripts applies no link-layer adaptation at all here
			// (there is no HTB to carry it); cake's keywords are what
			// the user evidently wants.
			b.llam = "cake"
			b.note("linklayer_adaptation_mechanism htb_private with cake: using cake's overhead keywords (sqm-scripts applied none)")
		}
	case "cake":
		b.llam = "cake"
		if !cake {
			b.llam = ""
			b.note(fmt.Sprintf("linklayer_adaptation_mechanism cake has no effect with qdisc %s: no link-layer adaptation is applied (as in sqm-scripts); use default or tc_stab", b.p.Qdisc))
		}
	default:
		return q.Errorf("linklayer_adaptation_mechanism", "unknown mechanism %q; use default, cake, htb_private or tc_stab", q.LLAM)
	}
	if b.llam == "cake" && (q.Overhead < -64 || q.Overhead > 256) {
		return q.Errorf("overhead", "overhead %d is outside cake's range -64..256", q.Overhead)
	}
	if b.llam == "cake" && q.StabMPU > 256 {
		return q.Errorf("tcMPU", "mpu %d is outside cake's range 0..256", q.StabMPU)
	}
	// htb_private puts overhead and mpu into the rate tables' struct
	// tc_ratespec, whose fields are unsigned 16-bit: the kernel cannot
	// hold a negative overhead there (tc_stab can).
	if b.llam == "htb_private" && (q.Overhead < 0 || q.Overhead > maxRateSpecField) {
		return q.Errorf("overhead", "overhead %d is outside htb_private's range 0..%d (the kernel's rate table has no negative overhead); use linklayer_adaptation_mechanism tc_stab for a negative overhead", q.Overhead, maxRateSpecField)
	}
	if b.llam == "htb_private" && q.StabMPU > maxRateSpecField {
		return q.Errorf("tcMPU", "mpu %d is outside htb_private's range 0..%d", q.StabMPU, maxRateSpecField)
	}
	return nil
}

// maxRateSpecField is the largest overhead or mpu struct tc_ratespec holds.
const maxRateSpecField = 0xffff

// stab is the root's size table for tc_stab, else nil.
func (b *builder) stab() *Stab {
	if b.llam != "tc_stab" {
		return nil
	}
	s := &Stab{MTU: b.q.StabMTU, TSize: b.q.StabTSize, MPU: b.q.StabMPU, Overhead: int32(b.q.Overhead), LinkLayer: b.ll}
	if s.MTU == 0 {
		s.MTU = defaultStabMTU
	}
	if s.TSize == 0 {
		s.TSize = defaultStabTSz
	}
	return s
}

// rateLinkLayer is htb_private accounting, else nil. withMTU is false for
// tbf, where sqm-scripts' "mtu 2047" would set the peak-rate bucket size
// rather than the rate table's cell size.
func (b *builder) rateLinkLayer(withMTU bool) *RateLinkLayer {
	if b.llam != "htb_private" {
		return nil
	}
	r := &RateLinkLayer{LinkLayer: b.ll, Overhead: int32(b.q.Overhead), MPU: b.q.StabMPU}
	if withMTU {
		r.MTU = b.q.StabMTU
		if r.MTU == 0 {
			r.MTU = defaultStabMTU
		}
	}
	return r
}

// cakeLLA is cake's link-layer keywords: [atm] overhead N mpu M.
func (b *builder) cakeLLA() []string {
	if b.llam != "cake" {
		return nil
	}
	var t []string
	if b.ll == "atm" {
		t = append(t, "atm")
	}
	return append(t, "overhead", strconv.Itoa(b.q.Overhead), "mpu", strconv.FormatUint(uint64(b.q.StabMPU), 10))
}

// minBurst is the smallest bucket: sqm-scripts' ceil((MTU+48)/48)*53 (one
// worst-case ATM-expanded packet without overhead), but never less than
// one full frame as the shaper measures it. sqm-scripts ignores the
// overhead here, and tbf drops every packet longer than its bucket
// (TCA_TBF_BURST): with tc_stab the length is taken from the size table,
// after adding the overhead and rounding to ATM cells, so with ATM and
// overhead 100 a full 1514-byte frame counts 34 cells (1802 bytes) against
// a 1749-byte bucket, and every full-size packet was dropped. (htb_private
// compares the plain length with the bucket; its overhead only changes
// how long a packet takes, so sqm-scripts' value holds a frame there.)
// The frame is MTU plus the 14-byte Ethernet header the qdisc sees.
func (b *builder) minBurst() uint32 {
	legacy := uint32((b.env.MTU+48+47)/48) * 53
	if s := b.stab(); s != nil {
		return max(legacy, s.PacketLen(b.env.MTU+ethHeader))
	}
	return legacy
}

// burst is sqm-scripts' get_burst: the bytes sent in 1 ms at the rate,
// but at least minBurst. It is also the HTB quantum.
func (b *builder) burst(rateKbit uint64) uint32 {
	return max(uint32(rateKbit*burstDurUS/8000), b.minBurst())
}

func (b *builder) egress(d dir) (*Tree, error) {
	switch b.p.Script {
	case "simplest":
		return b.simplest(d)
	case "simple":
		return b.simple(d)
	case "simplest_tbf":
		return b.tbf(d)
	case "piece_of_cake":
		return b.pieceOfCake(d)
	case "layer_cake":
		return b.layerCake(d)
	case "police", "codel_police":
		if b.p.Qdisc == "cake" {
			return b.pieceOfCake(d)
		}
		return b.simplest(d)
	}
	return nil, fmt.Errorf("plan: no egress for script %q", b.p.Script)
}

func (b *builder) ingress(d dir) (*Ingress, error) {
	switch b.p.Script {
	case "police":
		return b.policer(d)
	case "codel_police":
		return b.codelPolicer(d)
	}
	t, err := b.egress(d)
	if err != nil {
		return nil, err
	}
	return &Ingress{
		IFB:      d.device,
		Hook:     []Filter{redirectFilter(d.device)},
		Shaper:   t,
		RateKbit: d.rateKbit,
	}, nil
}

// redirectFilter sends every received packet to the IFB (sqm-scripts
// §3.0). It must be added last, once the IFB is shaped and up.
func redirectFilter(ifb string) Filter {
	return Filter{
		Parent: hFFFF, Prio: 10, Protocol: "all", Kind: "u32",
		U32:     &U32{Keys: []U32Key{{}}},
		FlowID:  hTop,
		Actions: []Action{{Mirred: &Mirred{Device: ifb}}},
		Comment: "redirect all received packets to " + ifb + " for shaping",
	}
}

// Policer bucket parameters.
const (
	policeWindow     = 20 * time.Millisecond
	policeMinPackets = 16
	ethHeader        = 14
)

// policer is the police recipe's ingress: one match-all filter on the
// ingress hook, protocol all (IPv4, IPv6, ARP, PPPoE, everything), that
// drops what exceeds the download rate.
//
// The bucket is max(rate in bytes/s * 20 ms, 16 * (MTU+14)) bytes and the
// largest packet MTU+14 (the policer sees Ethernet frames). Why: the bucket
// must pass a window's worth of back-to-back packets at a typical RTT, or
// TCP's bursts (a whole cwnd arriving at line rate) get dropped and
// throughput collapses, while it must stay far below a bloated modem's
// buffer, or it only moves the bloat. 20 ms is about one typical
// broadband RTT's worth of queue, 16 full frames keep low rates from
// dropping every burst. Dave Taht's 1000k example at 50 Mbit/s holds
// 160 ms, which is exactly the bloat sqm exists to remove; we give 20 ms
// (125000 bytes at 50 Mbit/s). iqdisc_opts 'burst SIZE' (tc's size
// units, as in that example) sets the bucket instead, for comparing
// buckets (scripts/policer-sweep.sh) or copying an existing tc script.
func (b *builder) policer(d dir) (*Ingress, error) {
	frame := uint64(b.env.MTU + ethHeader)
	bytesPerSec := d.rateKbit * 1000 / 8
	burst := max(bytesPerSec*uint64(policeWindow/time.Microsecond)/1e6, policeMinPackets*frame)
	set, err := parsePoliceOpts(d.opts)
	if err != nil {
		return nil, b.q.Errorf(d.optsName, "%v", err)
	}
	if set != 0 {
		if uint64(set) < frame {
			return nil, b.q.Errorf(d.optsName, "police: burst %d bytes is less than one full frame (%d bytes): every full-size packet would be dropped", set, frame)
		}
		burst = uint64(set)
	}
	return &Ingress{
		Hook: []Filter{{
			Parent: hFFFF, Prio: 10, Protocol: "all", Kind: "u32",
			U32:    &U32{Keys: []U32Key{{}}},
			FlowID: hTop,
			Actions: []Action{{Police: &Police{
				RateBits: d.rateKbit * 1000,
				Burst:    uint32(min(burst, 1<<31)),
				MTU:      uint32(b.env.MTU + ethHeader),
			}}},
			Comment: fmt.Sprintf("police all received packets to %dkbit", d.rateKbit),
		}},
		RateKbit: d.rateKbit,
	}, nil
}

// parsePoliceOpts reads the police recipe's iqdisc_opts: 'burst SIZE'
// (b, k/kb, m/mb, kbit, mbit as tc reads them). It returns 0 when no
// burst is given.
func parsePoliceOpts(opts []string) (uint32, error) {
	var burst uint32
	for i := 0; i < len(opts); i++ {
		if opts[i] != "burst" {
			return 0, fmt.Errorf("police: unknown option %q; the one option is burst SIZE", opts[i])
		}
		if i+1 == len(opts) {
			return 0, errors.New("police: burst needs a size (e.g. burst 125k)")
		}
		i++
		n, err := units.ParseSize(opts[i])
		if err != nil {
			return 0, fmt.Errorf("police: burst %q: %v", opts[i], err)
		}
		if n == 0 || n > 1<<31 {
			return 0, fmt.Errorf("police: burst %q is outside 1 byte..2 GiB", opts[i])
		}
		burst = n
	}
	return burst, nil
}

// htbClass is one class with sqm-scripts' quantum and, if withBurst, its
// burst/cburst. Burst and quantum come from the direction's full rate.
//
// The inner class (hTop, the parent of the tiers) keeps the quantum of the
// base rate: htb sets quantum only on a leaf class (htb_change_class), and
// hTop is a leaf only while it is created, so a rate change (Rerate)
// cannot move it, and the quantum of an inner class is never used.
func (b *builder) htbClass(id, parent Handle, d dir, rate, ceil uint64, prio uint32, withBurst bool) Class {
	quantum := b.burst(d.rateKbit)
	if id == hTop {
		quantum = b.burst(d.baseKbit)
	}
	c := &HTBClass{
		RateBits: rate * 1000, CeilBits: ceil * 1000,
		Quantum: quantum, Prio: prio,
		LinkLayer: b.rateLinkLayer(true),
	}
	if withBurst {
		c.Burst = b.burst(d.rateKbit)
		c.CBurst = c.Burst
	}
	return Class{ClassID: id, Parent: parent, HTB: c}
}

func (b *builder) htbRoot(d dir, def uint16) Qdisc {
	return Qdisc{Handle: hRoot, Parent: HandleRoot, Kind: "htb", Stab: b.stab(), HTB: &HTB{Default: def}}
}

// simplest is one HTB tier (or a lone cake).
func (b *builder) simplest(d dir) (*Tree, error) {
	if b.p.Qdisc == "cake" {
		return b.cakeTree(d, []string{"besteffort"}, b.cakeLLA())
	}
	t := &Tree{Device: d.device, RateKbit: d.rateKbit}
	t.Qdiscs = append(t.Qdiscs, b.htbRoot(d, 0x10))
	t.Classes = []Class{
		b.htbClass(hTop, hRoot, d, d.rateKbit, d.rateKbit, 0, true),
		b.htbClass(MakeHandle(1, 0x10), hTop, d, d.rateKbit, d.rateKbit, 0, true),
	}
	leaf, err := b.leaf(d, hLeaf1, MakeHandle(1, 0x10), 0)
	if err != nil {
		return nil, err
	}
	t.Qdiscs = append(t.Qdiscs, leaf)
	return t, nil
}

// simple is three HTB tiers classified by DSCP; its ingress is one tier
// unless squash_ingress is off.
func (b *builder) simple(d dir) (*Tree, error) {
	if b.p.Qdisc == "cake" {
		return b.simpleCake(d)
	}
	if d.ingress && b.q.SquashIngress {
		return b.simplest(d)
	}
	c := d.rateKbit
	prioRate, quanta := uint64(128), [3]uint32{300, 300, 300}
	if d.ingress {
		prioRate, quanta = 32, [3]uint32{500, 1500, 300}
	}
	prioCeil, beRate, beCeil := c/3, c/6, c-16
	if prioRate > prioCeil {
		// sqm-scripts gives HTB rate > ceil here; HTB then lends more
		// than the ceiling allows. Clamp instead.
		b.note(fmt.Sprintf("%s rate %d kbit/s is below 384: priority class rate clamped to its ceiling %d kbit/s", dirName(d), c, prioCeil))
		prioRate = prioCeil
	}
	t := &Tree{Device: d.device, RateKbit: c}
	t.Qdiscs = append(t.Qdiscs, b.htbRoot(d, 0x12))
	t.Classes = []Class{
		b.htbClass(hTop, hRoot, d, c, c, 0, true),
		b.htbClass(MakeHandle(1, 0x11), hTop, d, prioRate, prioCeil, 1, false),
		b.htbClass(MakeHandle(1, 0x12), hTop, d, beRate, beCeil, 2, true),
		b.htbClass(MakeHandle(1, 0x13), hTop, d, beRate, beCeil, 3, true),
	}
	for i, minor := range []uint16{0x11, 0x12, 0x13} {
		leaf, err := b.leaf(d, MakeHandle(0x100+uint16(i+1)*0x10, 0), MakeHandle(1, minor), quanta[i])
		if err != nil {
			return nil, err
		}
		t.Qdiscs = append(t.Qdiscs, leaf)
	}
	if b.shared {
		t.Filters = sharedDSCPFilters()
	} else {
		t.Filters = dscpFilters(hRoot)
	}
	return t, nil
}

func dirName(d dir) string {
	if d.ingress {
		return "download"
	}
	return "upload"
}

// simpleCake is simple.qos with cake. sqm-scripts drops its default cake
// options here (egress gets a bare "cake bandwidth X"); we give simple the
// same options layer_cake has, which is what the defaults are for.
func (b *builder) simpleCake(d dir) (*Tree, error) {
	return b.cakeTree(d, b.ingressCakeWords(d, strings.Fields(defaultCakeOpts), true), b.cakeLLA())
}

// ingressCakeWords appends the squash keywords to base on ingress:
// besteffort if squash_ingress (and ignore is honoured), wash if squash_dscp.
func (b *builder) ingressCakeWords(d dir, base []string, ignore bool) []string {
	w := slices.Clone(base)
	if !d.ingress {
		return w
	}
	if ignore && b.q.SquashIngress {
		w = append(w, "besteffort")
	}
	if b.q.SquashDSCP {
		w = append(w, "wash")
	}
	return w
}

func (b *builder) pieceOfCake(d dir) (*Tree, error) {
	words := append(strings.Fields(defaultCakeOpts), "besteffort")
	return b.cakeTree(d, b.cakeLLA(), b.ingressCakeWords(d, words, false))
}

func (b *builder) layerCake(d dir) (*Tree, error) {
	return b.cakeTree(d, b.cakeLLA(), b.ingressCakeWords(d, strings.Fields(defaultCakeOpts), true))
}

// cakeTree is a lone cake on the device's root. Its options are parsed
// from the words sqm-scripts would put on the command line, in the same
// order (bandwidth, then the recipe's groups, then the user's opts), so
// the last competing keyword wins exactly as in tc.
func (b *builder) cakeTree(d dir, groups ...[]string) (*Tree, error) {
	c := &Cake{}
	if err := parseCake(c, []string{"bandwidth", fmt.Sprintf("%dkbit", d.rateKbit)}); err != nil {
		return nil, fmt.Errorf("plan: cake bandwidth: %w", err)
	}
	for _, g := range groups {
		if err := parseCake(c, g); err != nil {
			return nil, b.q.Errorf("overhead", "%v", err)
		}
	}
	if err := parseCake(c, d.opts); err != nil {
		if b.q.Qdisc != "" && b.q.Qdisc != "cake" {
			return nil, b.q.Errorf(d.optsName, "%v (%s uses cake instead of %s, so the options must be cake options)", err, b.p.Script, b.q.Qdisc)
		}
		return nil, b.q.Errorf(d.optsName, "%v", err)
	}
	return &Tree{
		Device: d.device, RateKbit: d.rateKbit,
		Qdiscs: []Qdisc{{Handle: hRoot, Parent: HandleRoot, Kind: "cake", Stab: b.stab(), Cake: c}},
	}, nil
}

// tbf is simplest_tbf: a token bucket with the leaf below it.
func (b *builder) tbf(d dir) (*Tree, error) {
	t := &Tree{Device: d.device, RateKbit: d.rateKbit}
	t.Qdiscs = append(t.Qdiscs, Qdisc{Handle: hRoot, Parent: HandleRoot, Kind: "tbf", Stab: b.stab(), TBF: &TBF{
		RateBits: d.rateKbit * 1000, Burst: b.burst(d.rateKbit), Latency: tbfLatency, LinkLayer: b.rateLinkLayer(false),
	}})
	leaf, err := b.leaf(d, hLeaf1, hRoot, 0)
	if err != nil {
		return nil, err
	}
	t.Qdiscs = append(t.Qdiscs, leaf)
	return t, nil
}

// leaf builds the leaf qdisc with sqm-scripts' parameters (limit, target,
// interval, ecn, quantum, flows; §3.0, §4.2-4.5), then the user's opts.
func (b *builder) leaf(d dir, handle, parent Handle, quantum uint32) (Qdisc, error) {
	kind := b.p.Qdisc
	q := Qdisc{Handle: handle, Parent: parent, Kind: kind}
	limit := d.limit
	if limit == 0 {
		limit = defaultLimit
	}
	target, interval := b.target(d)
	ecn := boolp(d.ecn)
	switch kind {
	case "fq_codel":
		q.FqCodel = &FqCodel{Limit: limit, Flows: defaultFlows, Quantum: quantum, Target: target, Interval: interval, ECN: ecn}
	case "codel":
		q.Codel = &Codel{Limit: limit, Target: target, Interval: interval, ECN: ecn}
	case "pie": // pie has no interval: sqm-scripts passes only the target
		q.Pie = &Pie{Limit: limit, Target: target, ECN: ecn}
	case "fq_pie":
		q.FqPie = &FqPie{Limit: limit, Quantum: quantum, Target: target, ECN: ecn}
	case "sfq":
		q.SFQ = &SFQ{Limit: limit, Flows: defaultFlows}
	case "pfifo":
		q.Fifo = &Fifo{Limit: limit}
	case "bfifo":
		q.Fifo = &Fifo{Limit: uint32(min(uint64(limit)*uint64(b.env.MTU), 1<<32-1))}
	default:
		return q, fmt.Errorf("plan: %s is not a leaf qdisc", kind)
	}
	if err := parseLeafOpts(&q, d.opts); err != nil {
		if kind != b.q.Qdisc && b.q.Qdisc != "" {
			return q, b.q.Errorf(d.optsName, "%v (%s uses %s instead of %s, so the options must be %s options)", err, b.p.Script, kind, b.q.Qdisc, kind)
		}
		return q, b.q.Errorf(d.optsName, "%v", err)
	}
	return q, nil
}

// target is sqm-scripts' get_target: auto-tuned from the rate so a target
// is at least one worst-case packet's serialisation time, explicit as
// given (interval untouched), or nothing for "default".
func (b *builder) target(d dir) (target, interval time.Duration) {
	switch d.target.Mode {
	case config.TargetExplicit:
		return d.target.Value, 0
	case config.TargetDefault:
		return 0, 0
	}
	us := max(uint64(minTargetUS), autoTargetConst/d.baseKbit)
	target = time.Duration(us) * time.Microsecond
	interval = time.Duration(intervalBaseUS+us) * time.Microsecond
	return target, interval
}
