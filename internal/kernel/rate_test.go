package kernel

import (
	"bytes"
	"encoding/binary"
	"errors"
	"net"
	"strings"
	"testing"

	"sqm/internal/config"
	"sqm/internal/nlattr"
	"sqm/internal/plan"
	"sqm/internal/testutil"
)

// rateCase is one recipe a rate change is proven on.
type rateCase struct {
	script, qdisc string
	v             llaVariant
}

// withTrees returns p with its egress and IFB trees replaced by those
// SetRate was given, as the daemon keeps them.
func withTrees(p *plan.Plan, egress, ingress *plan.Tree) *plan.Plan {
	cp := *p
	if egress != nil {
		cp.Egress = egress
	}
	if ingress != nil {
		in := *p.Ingress
		in.Shaper = ingress
		cp.Ingress = &in
	}
	return &cp
}

// leafCounts sums packets and drops over the qdiscs that hold packets (not
// htb or tbf, which count what their children pass up), and the backlog.
func leafCounts(t *testing.T, c *Conn, dev string) (handles []string, passed, backlog uint64) {
	t.Helper()
	st, err := c.Status(dev)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range st[0].Qdiscs {
		handles = append(handles, q.Kind+" "+q.Handle.String())
		if q.Kind == "htb" || q.Kind == "tbf" {
			continue
		}
		passed += q.Packets + uint64(q.Drops)
		backlog += uint64(q.BacklogPackets)
	}
	return handles, passed, backlog
}

// framesFrom builds n IPv4/UDP frames of size payload bytes sent out of
// from to to, over 8 flows.
func framesFrom(ns *testNS, from, to string, n, size int) [][]byte {
	var src, dst net.HardwareAddr
	ns.Do(func() {
		a, _ := net.InterfaceByName(from)
		b, _ := net.InterfaceByName(to)
		src, dst = a.HardwareAddr, b.HardwareAddr
	})
	frames := make([][]byte, 0, n)
	for i := 0; i < n; i++ {
		ip := ipv4Packet(0)
		ip[21] = byte(i % 8)
		ip = append(ip, make([]byte, size)...)
		frames = append(frames, frame(dst, src, 0x0800, ip))
	}
	return frames
}

// rateChangeCycle applies q's plan, then per shaped direction queues a
// burst behind 64 kbit/s, changes the rate up and down while it is
// queued, and checks
// after each change that the kernel holds exactly plan.Rerate's tree
// (Matches: every option and the stab, rates included) and ShaperRate
// reads the new rate back, that the qdiscs
// are the same ones (handles, and counters that kept counting: no
// packet of the burst was lost to a reset), and that the burst was still
// queued after the change (the queue was not flushed).
func rateChangeCycle(t *testing.T, ns *testNS, c *Conn, q *config.Queue) {
	t.Helper()
	env := plan.Env{MTU: 1500}
	p := build(t, q)
	res := applyCycle(t, ns, c, p)
	cur := p
	for _, ingress := range []bool{false, true} {
		tree, ifindex, base := p.Egress, res.Owned.Ifindex, q.Upload
		sendOn, sendTo := "wan0", "wan1"
		if ingress {
			if p.Ingress == nil || p.Ingress.Shaper == nil {
				continue
			}
			tree, ifindex, base = p.Ingress.Shaper, res.Owned.IFBIndex, q.Download
			sendOn, sendTo = "wan1", "wan0" // arrives on wan0's ingress, redirected to the IFB
		}
		if tree == nil {
			continue
		}
		dev := tree.Device
		before, passed0, _ := leafCounts(t, c, dev)
		running := tree
		setRate := func(kbit uint64) uint64 {
			t.Helper()
			next, err := plan.Rerate(q, env, ingress, kbit)
			if err != nil {
				t.Fatalf("Rerate %d: %v", kbit, err)
			}
			if err := c.SetRate(ifindex, running, next); err != nil {
				t.Fatalf("SetRate %s %d kbit/s: %v", dev, kbit, err)
			}
			running = next
			_, _, backlog := leafCounts(t, c, dev)
			if ingress {
				cur = withTrees(cur, nil, next)
			} else {
				cur = withTrees(cur, next, nil)
			}
			ok, diff, err := c.Matches(cur)
			if err != nil || !ok {
				t.Fatalf("%s at %d kbit/s: Matches ok=%v err=%v diff:\n%s\ntc says:\n%s", dev, kbit, ok, err, diff,
					ns.sh(t, "tc", "-d", "qdisc", "show", "dev", dev)+ns.sh(t, "tc", "-d", "class", "show", "dev", dev))
			}
			if got, err := c.ShaperRate(dev); err != nil || got != kbit*1000 {
				t.Errorf("%s: ShaperRate = %d, %v after a change to %d kbit/s", dev, got, err, kbit)
			}
			if handles, _, _ := leafCounts(t, c, dev); strings.Join(handles, ",") != strings.Join(before, ",") {
				t.Errorf("%s: qdiscs %v after the change, %v before", dev, handles, before)
			}
			return backlog
		}
		// The burst is queued behind the lowest rate sqm shapes at, and
		// the first change after it is to 100 kbit/s: 100 frames of 242
		// bytes take 2 s to leave at that rate, so the backlog read right
		// after the change is 0 only if the change flushed the queue, not
		// because a slow machine let it drain (a first change to 5 Mbit/s
		// drained it in 40 ms, and VM runs failed on that). Small frames:
		// the packet socket's send buffer holds every frame until it
		// leaves the qdisc, and a sender that blocks on a full buffer
		// drips the burst in at the shaped rate.
		setRate(64)
		const n = 100
		sendFrames(t, ns, sendOn, framesFrom(ns, sendOn, sendTo, n, 200))
		for i, kbit := range []uint64{100, base / 2, base * 2, base} {
			if backlog := setRate(kbit); i == 0 && backlog == 0 {
				t.Errorf("%s: nothing of the %d frames queued right after the change from 64 to 100 kbit/s: the queue was flushed", dev, n)
			}
		}
		// Every frame of the burst left or was dropped by the qdiscs that
		// held it: a reset (a new qdisc) would have lost the ones queued
		// before it from these counters.
		drained(t, c, dev)
		_, passed, _ := leafCounts(t, c, dev)
		if passed-passed0 < n {
			t.Errorf("%s: %d frames counted after the changes, %d sent: counters were reset", dev, passed-passed0, n)
		}
	}
	if err := c.Remove(&res.Owned); err != nil {
		t.Fatalf("Remove: %v", err)
	}
	assertClean(t, c, p)
}

func rateQueue(rc rateCase) *config.Queue {
	q := queue(rc.script, rc.qdisc)
	q.Download = 10000 // both directions 10 Mbit/s: the burst stays queued
	rc.v.mod(q)
	return q
}

var rateVariants = []llaVariant{
	{"none", func(q *config.Queue) {}},
	{"tc_stab-atm-44", func(q *config.Queue) { q.LinkLayer, q.LLAM, q.Overhead = "atm", "tc_stab", 44 }},
	{"htb_private-ethernet-38", func(q *config.Queue) { q.LinkLayer, q.LLAM, q.Overhead = "ethernet", "htb_private", 38 }},
	{"ingress-tiers", func(q *config.Queue) { q.SquashIngress = false }},
}

// TestRateChangeHost: the htb and tbf recipes with pfifo leaves, on the
// host kernel (it has htb, tbf and fifo).
func TestRateChangeHost(t *testing.T) {
	testutil.RequireRoot(t)
	for _, script := range []string{"simplest", "simple", "simplest_tbf"} {
		for _, v := range rateVariants {
			rc := rateCase{script, "pfifo", v}
			t.Run(script+"/"+v.name, func(t *testing.T) {
				ns, c := setupNS(t)
				rateChangeCycle(t, ns, c, rateQueue(rc))
			})
		}
	}
}

// TestVMRateChange: every shaping recipe with cake and fq_codel on the VM
// kernel, each direction changed down and up in place while a burst is
// queued (see rateChangeCycle).
func TestVMRateChange(t *testing.T) {
	testutil.RequireVM(t)
	for _, script := range []string{"simplest", "simple", "simplest_tbf", "piece_of_cake", "layer_cake"} {
		for _, qd := range []string{"fq_codel", "cake"} {
			for _, v := range append(rateVariants, llaVariant{"cake-atm-44", func(q *config.Queue) { q.LinkLayer, q.LLAM, q.Overhead = "atm", "cake", 44 }}) {
				if (script == "piece_of_cake" || script == "layer_cake") && qd == "fq_codel" {
					continue // they are cake whatever the qdisc
				}
				rc := rateCase{script, qd, v}
				t.Run(script+"/"+qd+"/"+v.name, func(t *testing.T) {
					ns, c := setupNS(t)
					rateChangeCycle(t, ns, c, rateQueue(rc))
				})
			}
		}
	}
}

// TestVMCakeChangeKeepsOptions: a rate change of cake with every option
// sqm sets off its default keeps them, as tc reads them back.
func TestVMCakeChangeKeepsOptions(t *testing.T) {
	testutil.RequireVM(t)
	ns, c := setupNS(t)
	q := queue("layer_cake", "cake")
	q.LinkLayer, q.LLAM, q.Overhead, q.StabMPU = "ethernet", "cake", 38, 84
	q.EQdiscOpts = "dual-srchost ack-filter rtt 50ms memlimit 8mb"
	q.Download = 0
	p := build(t, q)
	res, err := c.Apply(p, nil, ApplyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	before := ns.sh(t, "tc", "-d", "qdisc", "show", "dev", "wan0")
	next, err := plan.Rerate(q, plan.Env{MTU: 1500}, false, 4321)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.SetRate(res.Owned.Ifindex, p.Egress, next); err != nil {
		t.Fatal(err)
	}
	after := ns.sh(t, "tc", "-d", "qdisc", "show", "dev", "wan0")
	if want := strings.Replace(before, "bandwidth 10Mbit", "bandwidth 4321Kbit", 1); after != want {
		t.Errorf("tc qdisc show after the change:\n%s\nwant (only the bandwidth changed):\n%s", after, want)
	}
}

// TestVMQdiscChangeDropsStab is why SetRate resends the size table: a
// qdisc change without TCA_STAB (tc qdisc change without stab) drops the
// qdisc's stab. If a kernel stops doing that, the resend is merely
// redundant; this test says so.
func TestVMQdiscChangeDropsStab(t *testing.T) {
	testutil.RequireVM(t)
	ns, c := setupNS(t)
	q := queue("piece_of_cake", "cake")
	q.LinkLayer, q.LLAM, q.Overhead = "atm", "tc_stab", 44
	q.Download = 0
	p := build(t, q)
	if _, err := c.Apply(p, nil, ApplyOptions{}); err != nil {
		t.Fatal(err)
	}
	if out := ns.sh(t, "tc", "-d", "qdisc", "show", "dev", "wan0"); !strings.Contains(out, "linklayer atm") {
		t.Fatalf("no stab after Apply:\n%s", out)
	}
	ns.sh(t, "tc", "qdisc", "change", "dev", "wan0", "root", "handle", "1:", "cake", "bandwidth", "5mbit")
	if out := ns.sh(t, "tc", "-d", "qdisc", "show", "dev", "wan0"); strings.Contains(out, "linklayer atm") {
		t.Errorf("this kernel keeps the stab on a change without TCA_STAB:\n%s", out)
	}
}

// TestSetRateRefusesOtherTrees: SetRate is a rate change only.
func TestSetRateRefusesOtherTrees(t *testing.T) {
	a := build(t, queue("simple", "pfifo")).Egress
	b := build(t, queue("simplest", "pfifo")).Egress
	cake := build(t, queue("piece_of_cake", "cake")).Egress
	var c Conn // never reached: the shapes differ
	for _, tt := range []struct{ cur, next *plan.Tree }{{a, b}, {a, cake}, {nil, a}, {a, nil}} {
		if err := c.SetRate(1, tt.cur, tt.next); !errors.Is(err, ErrNotRateChange) {
			t.Errorf("SetRate = %v, want ErrNotRateChange", err)
		}
	}
}

// TestRateRequests: the payloads a rate change sends. A class's is the
// one classOp sends to create it (the same parameters, so the kernel
// cannot end up with anything else than Apply would build), for rates
// below and above 32 bits; cake's holds the base rate alone, encoded
// here independently with nlattr.
func TestRateRequests(t *testing.T) {
	tick := float64(ticksPerMicrosecond)
	for _, kbit := range []uint64{5000, 40_000_000} { // 40 Gbit/s needs TCA_HTB_RATE64
		q := queue("simple", "pfifo")
		q.Upload = 30_000_000
		next, err := plan.Rerate(q, plan.Env{MTU: 1500}, false, kbit)
		if err != nil {
			t.Fatal(err)
		}
		for i := range next.Classes {
			cl := &next.Classes[i]
			o, err := classOp("wan0", cl, tick)
			if err != nil {
				t.Fatal(err)
			}
			got, err := appendClassRate(nil, 7, cl, tick)
			if err != nil {
				t.Fatal(err)
			}
			if want := o.request(7).Data; !bytes.Equal(got, want) {
				t.Errorf("%d kbit/s class %s: change payload\n%x\nwant (create's)\n%x", kbit, cl.ClassID, got, want)
			}
		}
	}
	cq := queue("piece_of_cake", "cake")
	cn, err := plan.Rerate(cq, plan.Env{MTU: 1500}, false, 5000)
	if err != nil {
		t.Fatal(err)
	}
	root := &cn.Qdiscs[0]
	want := tcmsg(7, root.Handle, root.Parent, 0)
	want = append(want, nlattr.Attr(tcaOptions, nlattr.Attr(2, binary.NativeEndian.AppendUint64(nil, 5000*1000/8)))...)
	want = append(want, nlattr.Attr(tcaKind, []byte("cake\x00"))...)
	if got := appendCakeRate(nil, 7, root); !bytes.Equal(got, want) {
		t.Errorf("cake change payload\n%x\nwant\n%x", got, want)
	}
}

// BenchmarkSetRate times one in-place rate change (down, then back up:
// two per iteration) on the host kernel: simple.qos's four htb classes,
// and the same through plan.Rerate (what the controller calls per
// change).
func BenchmarkSetRate(b *testing.B) {
	for _, tt := range []struct {
		name   string
		script string
		rerate bool
	}{{"simplest", "simplest", false}, {"simple", "simple", false}, {"simple+Rerate", "simple", true}} {
		b.Run(tt.name, func(b *testing.B) {
			ns, c := setupNS(b)
			_ = ns
			q := queue(tt.script, "pfifo")
			q.Download = 0
			p := build(b, q)
			res, err := c.Apply(p, nil, ApplyOptions{})
			if err != nil {
				b.Fatal(err)
			}
			env := plan.Env{MTU: 1500}
			lo, err := plan.Rerate(q, env, false, 5000)
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				down, up := lo, p.Egress
				if tt.rerate {
					if down, err = plan.Rerate(q, env, false, 5000); err != nil {
						b.Fatal(err)
					}
					if up, err = plan.Rerate(q, env, false, 10000); err != nil {
						b.Fatal(err)
					}
				}
				if err := c.SetRate(res.Owned.Ifindex, p.Egress, down); err != nil {
					b.Fatal(err)
				}
				if err := c.SetRate(res.Owned.Ifindex, down, up); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkRerate is the planner's share of one change.
func BenchmarkRerate(b *testing.B) {
	for _, script := range []string{"simple", "piece_of_cake"} {
		b.Run(script, func(b *testing.B) {
			q := queue(script, "pfifo")
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				if _, err := plan.Rerate(q, plan.Env{MTU: 1500}, false, uint64(5000+i%1000)); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkVMSetRateCake: one cake bandwidth change (down and back up per
// iteration, so two requests), on the VM kernel (the host has no cake).
// Under TCG the time says little; the allocations are the real ones.
func BenchmarkVMSetRateCake(b *testing.B) {
	testutil.RequireVM(b)
	_, c := setupNS(b)
	q := queue("piece_of_cake", "cake")
	q.Download = 0
	p := build(b, q)
	res, err := c.Apply(p, nil, ApplyOptions{})
	if err != nil {
		b.Fatal(err)
	}
	lo, err := plan.Rerate(q, plan.Env{MTU: 1500}, false, 5000)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := c.SetRate(res.Owned.Ifindex, p.Egress, lo); err != nil {
			b.Fatal(err)
		}
		if err := c.SetRate(res.Owned.Ifindex, lo, p.Egress); err != nil {
			b.Fatal(err)
		}
	}
}
