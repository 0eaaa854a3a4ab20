package kernel

import (
	"errors"
	"testing"

	"github.com/jsimonetti/rtnetlink/v2"
)

// vanishCase deletes wan0 (and so its peer) right after the egress tree is
// built; Apply must fail with ErrNoLink and leave no IFB behind.
func vanishCase(t *testing.T, script, qdisc string) {
	ns, c := setupNS(t)
	p := build(t, queue(script, qdisc))
	var rt *rtnetlink.Conn
	ns.Do(func() { rt, _ = rtnetlink.Dial(nil) })
	if rt == nil {
		t.Fatal("rtnetlink dial failed")
	}
	defer rt.Close()
	l, err := c.linkByName("wan0")
	if err != nil {
		t.Fatal(err)
	}
	c.afterStep = func(step string) {
		if step == "egress" {
			if err := rt.Link.Delete(uint32(l.Index)); err != nil {
				t.Errorf("delete wan0: %v", err)
			}
		}
	}
	_, err = c.Apply(p, nil, ApplyOptions{})
	if !errors.Is(err, ErrNoLink) {
		t.Fatalf("Apply with wan0 vanishing: %v, want ErrNoLink", err)
	}
	t.Logf("error: %v", err)
	if ok, err := c.LinkExists(p.Ingress.IFB); ok || err != nil {
		t.Errorf("IFB %s left behind after the interface vanished (err %v)", p.Ingress.IFB, err)
	}
	links, err := rt.Link.List()
	if err != nil {
		t.Fatal(err)
	}
	for _, lk := range links {
		if lk.Attributes.Name != "lo" {
			t.Errorf("device %s left in the namespace", lk.Attributes.Name)
		}
	}
}

func TestInterfaceVanishesMidApply(t *testing.T) { vanishCase(t, "simple", "pfifo") }
