package kernel

import (
	"errors"
	"testing"
	"time"

	"sqm/internal/plan"
	"sqm/internal/testutil"
)

// TestShaperCountersHost: the autorate loop's one-dump read of both
// directions (htb and tbf roots, pfifo leaves, on the host kernel) agrees
// with Status's root counters, sees a burst queued behind the shaper, and
// reads the root's configured rate where the root has one (tbf).
func TestShaperCountersHost(t *testing.T) {
	testutil.RequireRoot(t)
	for _, c := range []struct {
		script             string
		egressBits, inBits uint64 // RateBits expected
	}{
		{"simplest_tbf", 100000, 10000000},
		{"simple", 0, 0}, // htb: the rates are the classes'
	} {
		t.Run(c.script, func(t *testing.T) {
			ns, conn, p, idx := shaperTree(t, c.script, "pfifo")
			sc := readShaper(t, conn, idx)
			if sc[1].RateBits != c.egressBits || sc[0].RateBits != c.inBits {
				t.Errorf("configured rates egress %d, ingress %d; want %d, %d", sc[1].RateBits, sc[0].RateBits, c.egressBits, c.inBits)
			}
			sendFrames(t, ns, "wan0", framesFrom(ns, "wan0", "wan1", 20, 200))
			if sc = readShaper(t, conn, idx); sc[1].Backlog == 0 {
				t.Errorf("20 frames sent into 100 kbit/s, none queued: %+v", sc[1])
			}
			checkDrained(t, conn, p, idx, false)
		})
	}
}

// shaperTree applies script with leaf at 10 Mbit/s down, 100 kbit/s up on
// a fresh namespace and returns the shapers' ifindexes as ShaperCounters
// takes them (IFB, then the interface).
func shaperTree(t *testing.T, script, leaf string) (*testNS, *Conn, *plan.Plan, [2]int) {
	t.Helper()
	ns, conn := setupNS(t)
	q := queue(script, leaf)
	q.Download, q.Upload = 10000, 100
	p := build(t, q)
	res := applyCycle(t, ns, conn, p)
	return ns, conn, p, [2]int{res.Owned.IFBIndex, res.Owned.Ifindex}
}

func readShaper(t *testing.T, conn *Conn, idx [2]int) [2]ShaperCounters {
	t.Helper()
	var sc [2]ShaperCounters
	if err := conn.ShaperCounters(idx, &sc); err != nil {
		t.Fatal(err)
	}
	return sc
}

// checkDrained waits for the 20 frames sent to drain and checks that
// ShaperCounters then reads each root's counters as Status does (cake
// roots if cake), and that a device without a tree is ErrNoLink.
func checkDrained(t *testing.T, conn *Conn, p *plan.Plan, idx [2]int, cake bool) {
	t.Helper()
	st := drained(t, conn, "wan0", p.Ingress.IFB)
	sc := readShaper(t, conn, idx)
	for d, ds := range []DeviceStatus{st[1], st[0]} {
		var root *QdiscStatus
		for i := range ds.Qdiscs {
			if ds.Qdiscs[i].Parent == plan.HandleRoot {
				root = &ds.Qdiscs[i]
			}
		}
		if root == nil {
			t.Fatalf("%s: no root qdisc in %+v", ds.Device, ds)
		}
		if sc[d].Bytes != root.Bytes || sc[d].Drops != uint64(root.Drops) || sc[d].Backlog != 0 || sc[d].Cake != cake {
			t.Errorf("%s: shaper counters %+v, Status's root %+v", ds.Device, sc[d], root.Counters)
		}
	}
	if sc[1].Bytes < 20*200 {
		t.Errorf("egress sent %d bytes, want the 20 frames", sc[1].Bytes)
	}
	if err := conn.ShaperCounters([2]int{0, 9999}, &sc); !errors.Is(err, ErrNoLink) {
		t.Errorf("a device without a tree: %v, want ErrNoLink", err)
	}
	// The roots alone, by GET: the dump's root counters, and with a cake
	// root (the whole tree) its marks and delay too.
	// A packet may cross between two reads (the namespace's own IPv6
	// solicitations): the GET is compared with dumps on both sides of it
	// that agree.
	kinds := [2]string{p.Ingress.Shaper.Qdiscs[0].Kind, p.Egress.Qdiscs[0].Kind}
	var rc [2]ShaperCounters
	for try := 0; ; try++ {
		sc = readShaper(t, conn, idx)
		if err := conn.ShaperRootCounters(idx, kinds, &rc); err != nil {
			t.Fatalf("ShaperRootCounters: %v", err)
		}
		if after := readShaper(t, conn, idx); after == sc || try == 5 {
			break
		}
	}
	for d := range rc {
		want := sc[d]
		if !cake {
			want.Marks = rc[d].Marks // the leaves' marks: not the root's to give
		}
		if rc[d] != want {
			t.Errorf("direction %d: root counters by GET %+v, by dump %+v", d, rc[d], sc[d])
		}
	}
	if err := conn.ShaperRootCounters(idx, [2]string{kinds[0], "sfq"}, &rc); !errors.Is(err, ErrNoLink) {
		t.Errorf("a root of another kind than asked: %v, want ErrNoLink", err)
	}
	if err := conn.ShaperRootCounters([2]int{0, 9999}, kinds, &rc); !errors.Is(err, ErrNoLink) {
		t.Errorf("a missing device: %v, want ErrNoLink", err)
	}
}

// BenchmarkShaperCounters is the autorate loop's read of both directions
// (simple recipe, pfifo leaves, on the host kernel), once per 100 ms tick.
func BenchmarkShaperCounters(b *testing.B) {
	testutil.RequireRoot(b)
	ns, conn := setupNS(b)
	_ = ns
	q := queue("simple", "pfifo")
	p := build(b, q)
	res, err := conn.Apply(p, nil, ApplyOptions{})
	if err != nil {
		b.Fatal(err)
	}
	idx := [2]int{res.Owned.IFBIndex, res.Owned.Ifindex}
	var sc [2]ShaperCounters
	b.ReportAllocs()
	for b.Loop() {
		if err := conn.ShaperCounters(idx, &sc); err != nil {
			b.Fatal(err)
		}
	}
}

// TestVMShaperCountersCake: with cake roots, ShaperCounters reads the
// configured rates, the queue and cake's delay while a burst drains, and
// Status's counters once it has.
func TestVMShaperCountersCake(t *testing.T) {
	testutil.RequireVM(t)
	ns, conn, p, idx := shaperTree(t, "piece_of_cake", "cake")
	if sc := readShaper(t, conn, idx); !sc[0].Cake || !sc[1].Cake || sc[1].RateBits != 100000 || sc[0].RateBits != 10000000 {
		t.Errorf("counters %+v; want cake at 100 kbit/s egress, 10 Mbit/s ingress", sc)
	}
	// 20 frames of 200 bytes: 16 ms each at 100 kbit/s, so a few have
	// waited in the queue and left after 200 ms, and most still wait.
	sendFrames(t, ns, "wan0", framesFrom(ns, "wan0", "wan1", 20, 200))
	time.Sleep(200 * time.Millisecond)
	if sc := readShaper(t, conn, idx); sc[1].Backlog == 0 || sc[1].CakeDelayUS == 0 {
		t.Errorf("20 frames sent into 100 kbit/s: backlog %d bytes, cake's delay %d µs; want both above 0", sc[1].Backlog, sc[1].CakeDelayUS)
	}
	checkDrained(t, conn, p, idx, true)
}
