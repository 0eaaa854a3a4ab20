package autorun

import (
	"testing"

	"sqm/internal/autorate"
	"sqm/internal/config"
	"sqm/internal/kernel"
	"sqm/internal/netns"
	"sqm/internal/plan"
	"sqm/internal/testutil"
)

// TestKernelHost: the loop's actuator on the host kernel (simple recipe,
// htb with pfifo leaves, both directions): a rate set is the tree
// plan.Rerate builds (Hold's plan matches the kernel, the base plan no
// longer does), the same rate again sends nothing, and the counters read.
func TestKernelHost(t *testing.T) {
	testutil.RequireRoot(t)
	ns := netns.NewT(t, "autorun")
	if err := ns.Veth("wan0", ns, "wan1"); err != nil {
		t.Fatal(err)
	}
	if err := ns.Up("wan0", "wan1"); err != nil {
		t.Fatal(err)
	}
	q := &config.Queue{Name: "wan", Interface: "wan0", Enabled: true, Download: 10000, Upload: 5000, Qdisc: "pfifo", Script: "simple",
		SquashDSCP: true, SquashIngress: true, IngressECN: true, EgressECN: true, LinkLayer: "none", StabMTU: 2047, StabTSize: 512, LLAM: "default",
		Autorate: config.Autorate{Enabled: true}}
	p, err := plan.Build(q, plan.Env{MTU: 1500})
	if err != nil {
		t.Fatal(err)
	}
	var daemon, loop *kernel.Conn
	err = ns.Do(func() error {
		var err error
		if daemon, err = kernel.Open(); err != nil {
			return err
		}
		if _, err = daemon.Apply(p, nil, kernel.ApplyOptions{}); err != nil {
			return err
		}
		loop, err = kernel.Open()
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	defer daemon.Close()
	k, err := NewKernel(loop, q, p, 1500)
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close()
	sh := k.Shapers()
	if sh[autorate.Down] == nil || sh[autorate.Up] == nil {
		t.Fatalf("shapers %v: want both directions", sh)
	}
	if got, err := sh[autorate.Up].SetRate(2_500_400); err != nil || got != 2_500_000 {
		t.Fatalf("SetRate up: %d, %v; want 2500000 (kbit/s resolution)", got, err)
	}
	if got, err := sh[autorate.Down].SetRate(17_000_000); err != nil || got != 17_000_000 {
		t.Fatalf("SetRate down: %d, %v", got, err)
	}
	if r := k.Rates(); r != [2]uint64{17000, 2500} {
		t.Errorf("rates %v, want [17000 2500]", r)
	}
	if ok, _, err := daemon.Matches(p); err != nil || ok {
		t.Errorf("the base plan still matches after the rate changes (ok %v, err %v)", ok, err)
	}
	err = k.Hold(func(running *plan.Plan) error {
		if ok, diff, err := daemon.Matches(running); err != nil || !ok {
			t.Errorf("the running plan does not match the kernel: %v\n%s", err, diff)
		}
		if running.Egress.RateKbit != 2500 || running.Ingress.Shaper.RateKbit != 17000 || p.Egress.RateKbit != 5000 {
			t.Errorf("running plan at %d/%d kbit/s, base plan at %d", running.Egress.RateKbit, running.Ingress.Shaper.RateKbit, p.Egress.RateKbit)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if got, err := sh[autorate.Up].SetRate(2_500_000); err != nil || got != 2_500_000 {
		t.Errorf("the same rate again: %d, %v", got, err)
	}
	var s [2]autorate.Shaper
	for d := range sh {
		if err := sh[d].Read(&s[d]); err != nil {
			t.Fatalf("Read %v: %v", autorate.Dir(d), err)
		}
		if !s[d].HaveQueue {
			t.Errorf("%v: counters without HaveQueue", autorate.Dir(d))
		}
	}
	if _, err := sh[autorate.Up].SetRate(1000); err == nil {
		t.Error("a rate below sqm's 64 kbit/s was set")
	}
}
