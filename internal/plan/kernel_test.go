package plan

import (
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"

	"sqm/internal/config"
	"sqm/internal/testutil"
)

// applyInNetns runs RenderShell(p) with sh -e inside a fresh network
// namespace holding a veth "eth0", checks what the kernel then reports
// with tc, runs RenderRemove(p) and checks the interface is clean again.
// It proves the rendered commands are accepted by tc and the kernel, in
// the documented order.
func applyInNetns(t *testing.T, name string, p *Plan) {
	t.Helper()
	ns := fmt.Sprintf("sqmplan%d", os.Getpid())
	run := func(args ...string) (string, error) {
		out, err := exec.Command(args[0], args[1:]...).CombinedOutput()
		return string(out), err
	}
	must := func(args ...string) string {
		t.Helper()
		out, err := run(args...)
		if err != nil {
			t.Fatalf("%s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return out
	}
	must("ip", "netns", "add", ns)
	defer run("ip", "netns", "del", ns)
	must("ip", "-n", ns, "link", "add", "eth0", "type", "veth", "peer", "name", "peer0")
	must("ip", "-n", ns, "link", "set", "eth0", "up")
	must("ip", "-n", ns, "link", "set", "peer0", "up")

	script := RenderShell(p)
	if out, err := run("ip", "netns", "exec", ns, "sh", "-e", "-c", script); err != nil {
		t.Fatalf("%s: script failed: %v\n%s\n--- script:\n%s", name, err, out, script)
	}
	qd := must("tc", "-n", ns, "qdisc", "show", "dev", "eth0")
	if p.Egress != nil {
		root := p.Egress.Qdiscs[0]
		if !regexp.MustCompile(`qdisc ` + root.Kind + ` 1: root`).MatchString(qd) {
			t.Errorf("%s: egress root %s 1: missing:\n%s", name, root.Kind, qd)
		}
		for _, l := range p.Egress.Qdiscs[1:] {
			if !strings.Contains(qd, "qdisc "+l.Kind+" "+l.Handle.String()+" parent "+l.Parent.String()) {
				t.Errorf("%s: leaf %s %s missing:\n%s", name, l.Kind, l.Handle, qd)
			}
		}
		cl := must("tc", "-n", ns, "class", "show", "dev", "eth0")
		if n := strings.Count(cl, "class htb "); n != len(p.Egress.Classes) {
			t.Errorf("%s: %d htb classes, want %d:\n%s", name, n, len(p.Egress.Classes), cl)
		}
		fl := must("tc", "-n", ns, "filter", "show", "dev", "eth0", "parent", "1:")
		if n := strings.Count(fl, "flowid"); n != len(p.Egress.Filters) {
			t.Errorf("%s: %d egress filters, want %d:\n%s", name, n, len(p.Egress.Filters), fl)
		}
	}
	if in := p.Ingress; in != nil {
		if !strings.Contains(qd, "qdisc ingress ffff:") {
			t.Errorf("%s: no ingress qdisc:\n%s", name, qd)
		}
		hook := must("tc", "-n", ns, "filter", "show", "dev", "eth0", "parent", "ffff:")
		want := "Redirect to device " + in.IFB
		if in.IFB == "" {
			want = "police"
		}
		if !strings.Contains(hook, want) {
			t.Errorf("%s: hook lacks %q:\n%s", name, want, hook)
		}
		if in.Shaper != nil {
			iq := must("tc", "-n", ns, "qdisc", "show", "dev", in.IFB)
			if !strings.Contains(iq, "qdisc "+in.Shaper.Qdiscs[0].Kind+" 1: root") {
				t.Errorf("%s: IFB root missing:\n%s", name, iq)
			}
			if link := must("ip", "-n", ns, "link", "show", in.IFB); !strings.Contains(link, ",UP") {
				t.Errorf("%s: IFB not up: %s", name, link)
			}
			fl := must("tc", "-n", ns, "filter", "show", "dev", in.IFB, "parent", "1:")
			if n := strings.Count(fl, "flowid"); n != len(in.Shaper.Filters) {
				t.Errorf("%s: %d IFB filters, want %d", name, n, len(in.Shaper.Filters))
			}
		}
	}

	if out, err := run("ip", "netns", "exec", ns, "sh", "-c", RenderRemove(p)); err != nil {
		t.Errorf("%s: remove failed: %v\n%s", name, err, out)
	}
	qd = must("tc", "-n", ns, "qdisc", "show", "dev", "eth0")
	if strings.Contains(qd, " 1: root") || strings.Contains(qd, "ingress") {
		t.Errorf("%s: shaping left after remove:\n%s", name, qd)
	}
	if p.Ingress != nil && p.Ingress.IFB != "" {
		if _, err := run("ip", "-n", ns, "link", "show", p.Ingress.IFB); err == nil {
			t.Errorf("%s: IFB %s left after remove", name, p.Ingress.IFB)
		}
	}
}

type kernelCase struct {
	name string
	mod  func(q *config.Queue)
}

func runKernelCases(t *testing.T, cases []kernelCase) {
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			q := baseQueue()
			c.mod(q)
			p, err := Build(q, Env{MTU: 1500})
			if err != nil {
				t.Fatal(err)
			}
			applyInNetns(t, c.name, p)
		})
	}
}

// TestRenderShellHostKernel applies plans that need only what this
// machine's kernel has (htb, tbf, pfifo, bfifo, ingress, u32, mirred, ifb,
// stab).
func TestRenderShellHostKernel(t *testing.T) {
	testutil.RequireRoot(t)
	runKernelCases(t, []kernelCase{
		{"simplest pfifo tc_stab atm", func(q *config.Queue) {
			q.Script, q.Qdisc, q.LinkLayer, q.LLAM, q.Overhead = "simplest", "pfifo", "atm", "tc_stab", 44
		}},
		{"simple bfifo htb_private 3-tier both ways", func(q *config.Queue) {
			q.Script, q.Qdisc, q.LinkLayer, q.LLAM, q.Overhead, q.SquashIngress = "simple", "bfifo", "atm", "htb_private", 44, false
		}},
		{"simple pfifo egress only", func(q *config.Queue) { q.Qdisc, q.Download = "pfifo", 0 }},
		{"simplest_tbf pfifo htb_private", func(q *config.Queue) {
			q.Script, q.Qdisc, q.LinkLayer, q.LLAM, q.Overhead = "simplest_tbf", "pfifo", "ethernet", "htb_private", 38
		}},
		{"simplest_tbf bfifo tc_stab ingress only", func(q *config.Queue) {
			q.Script, q.Qdisc, q.LinkLayer, q.Overhead, q.Upload = "simplest_tbf", "bfifo", "ethernet", 38, 0
		}},
	})
}

// TestVMRenderShell applies plans with the AQMs, cake and the policer,
// which only the VM's kernel has.
func TestVMRenderShell(t *testing.T) {
	testutil.RequireVM(t)
	var cases []kernelCase
	for _, qd := range []string{"fq_codel", "codel", "pie", "fq_pie", "sfq"} {
		cases = append(cases,
			kernelCase{"simplest " + qd + ", opts", func(q *config.Queue) {
				q.Script, q.Qdisc, q.EQdiscOpts, q.IQdiscOpts = "simplest", qd, sampleOpts[qd], sampleOpts[qd]
			}},
		)
	}
	// simple.qos's ~100 u32 filters take about two minutes under TCG;
	// TestRenderShellHostKernel applies them on the host kernel instead.
	cases = append(cases,
		kernelCase{"simplest_tbf fq_codel htb_private", func(q *config.Queue) {
			q.Script, q.LinkLayer, q.LLAM, q.Overhead = "simplest_tbf", "atm", "htb_private", 44
		}},
		kernelCase{"piece_of_cake atm", func(q *config.Queue) {
			q.Script, q.Qdisc, q.LinkLayer, q.Overhead, q.StabMPU, q.IQdiscOpts = "piece_of_cake", "cake", "atm", 44, 84, "dual-dsthost ingress"
		}},
		kernelCase{"layer_cake tc_stab, opts", func(q *config.Queue) {
			q.Script, q.Qdisc, q.LinkLayer, q.LLAM, q.Overhead, q.EQdiscOpts = "layer_cake", "cake", "ethernet", "tc_stab", 38, "diffserv4 dual-srchost ack-filter rtt 50ms memlimit 8mb split-gso fwmark 0xff"
		}},
		kernelCase{"simple cake", func(q *config.Queue) { q.Qdisc = "cake" }},
		kernelCase{"police fq_codel", func(q *config.Queue) { q.Script = "police" }},
		kernelCase{"police cake", func(q *config.Queue) { q.Script, q.Qdisc = "police", "cake" }},
	)
	runKernelCases(t, cases)
}
