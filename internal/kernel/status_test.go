package kernel

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"sqm/internal/nlattr"
	"sqm/internal/plan"
)

// TestOwnedJSON: the state file must bring back everything Remove and the
// rollback need, the plan included.
func TestOwnedJSON(t *testing.T) {
	p, err := plan.Build(queue("simple", "fq_codel"), plan.Env{MTU: 1500})
	if err != nil {
		t.Fatal(err)
	}
	o := Owned{Interface: "wan0", Ifindex: 3, EgressRoot: true, EgressHandle: plan.MakeHandle(1, 0),
		Ingress: true, IFB: "ifb4wan0", IFBIndex: 4, Plan: p}
	b, err := json.Marshal(o)
	if err != nil {
		t.Fatal(err)
	}
	var back Owned
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatalf("unmarshal %s: %v", b, err)
	}
	if !reflect.DeepEqual(o, back) {
		t.Errorf("round trip differs:\n%+v\n%+v", o, back)
	}
	if !strings.Contains(string(b), `"egress_handle":"1:"`) {
		t.Errorf("handle not in tc notation: %s", b)
	}
}

// TestStatusHost sends frames through simple.qos and checks the counters
// Status reports, as JSON.
func TestStatusHost(t *testing.T) {
	ns, c := setupNS(t)
	p := build(t, queue("simple", "bfifo"))
	if _, err := c.Apply(p, nil, ApplyOptions{}); err != nil {
		t.Fatal(err)
	}
	sendFrames(t, ns, "wan0", udpFrames(ns, 50, 100))
	// The shaper (10 Mbit/s, a bucket of a dozen such frames) lets the
	// first frames through at once and the rest after a few ms; HTB counts
	// a frame when it dequeues it. Read the counters once the backlog is
	// gone: sent+backlog taken from one dump is not exact either, as the
	// kernel reads the two without the qdisc lock.
	st := drained(t, c, "wan0", p.Ingress.IFB)
	if len(st) != 2 || st[0].Device != "wan0" || st[1].Device != p.Ingress.IFB {
		t.Fatalf("devices: %+v", st)
	}
	if st[0].Filters != len(p.Egress.Filters)+len(p.Ingress.Hook) {
		t.Errorf("wan0 filters = %d, want %d", st[0].Filters, len(p.Egress.Filters)+len(p.Ingress.Hook))
	}
	var root *QdiscStatus
	for i := range st[0].Qdiscs {
		if st[0].Qdiscs[i].Parent == plan.HandleRoot {
			root = &st[0].Qdiscs[i]
		}
	}
	if root == nil || root.Kind != "htb" || root.Packets != 50 || root.Bytes != 50*(14+28+100) {
		t.Errorf("root qdisc: %+v", root)
	}
	var be *ClassStatus
	for i := range st[0].Classes {
		if st[0].Classes[i].ClassID == plan.MakeHandle(1, 0x12) {
			be = &st[0].Classes[i]
		}
	}
	if be == nil || be.Packets != 50 || be.HTB == nil {
		t.Errorf("class 1:12: %+v", be)
	}
	b, err := json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{`"classid":"1:12"`, `"backlog_bytes"`, `"tokens"`, `"parent":"root"`} {
		if !strings.Contains(string(b), k) {
			t.Errorf("status JSON lacks %s", k)
		}
	}
	if _, err := c.Status("nosuch0"); err == nil {
		t.Error("Status of a missing device succeeded")
	}
}

// drained polls Status until no qdisc on the devices holds a packet; the
// 2 s limit is hundreds of times the few ms the test's frames need.
func drained(t *testing.T, c *Conn, devices ...string) []DeviceStatus {
	t.Helper()
	deadline := time.Now().Add(2 * time.Second)
	for {
		st, err := c.Status(devices...)
		if err != nil {
			t.Fatal(err)
		}
		backlog := 0
		for _, d := range st {
			for _, q := range d.Qdiscs {
				backlog += int(q.BacklogPackets)
			}
		}
		if backlog == 0 {
			return st
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d packets still queued after 2 s: %+v", backlog, st)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// FuzzDecodeObject: dump messages come from the kernel, but a decoder that
// panics on a short or odd attribute would take the daemon down.
func FuzzDecodeObject(f *testing.F) {
	msg := tcmsg(2, plan.MakeHandle(1, 0), plan.HandleRoot, 0)
	msg = append(msg, nlattr.Attr(tcaKind, cstr("cake"))...)
	msg = append(msg, nlattr.Nest(tcaStats2, append(nlattr.Attr(tcaStatsBasic, make([]byte, 16)), nlattr.Attr(tcaStatsApp, nlattr.Nest(cakeStatsTinStats, nlattr.Nest(1, nlattr.Attr(2, le32(5)))))...))...)
	f.Add(msg)
	f.Add(append(tcmsg(2, 0, 0, 0x000a0300), nlattr.Attr(tcaKind, cstr("u32"))...))
	f.Fuzz(func(t *testing.T, b []byte) {
		o, err := decodeObject(b)
		if err != nil {
			return
		}
		qdiscFacts(&o)
		classFacts(&o)
		filterDesc(&o)
		decodeCakeXStats(o.XStats)
		cakeTinSums(o.XStats)
		decodeFqCodelXStats(o.XStats)
	})
}

// TestCakeTinSums: the autorate counters' walk over cake's xstats gives
// what the full decoder does (marks over all tins, the largest average
// delay) on diffserv4-shaped stats.
func TestCakeTinSums(t *testing.T) {
	var tins []byte
	for i, tin := range []struct{ marks, avg uint32 }{{3, 120}, {0, 4500}, {7, 80}, {1, 0}} {
		a := append(nlattr.Attr(cakeTinECNMarkedPackets, le32(tin.marks)), nlattr.Attr(cakeTinAvgDelayUS, le32(tin.avg))...)
		a = append(a, nlattr.Attr(18, le32(tin.avg*2))...) // the peak delay, larger: not the one read
		tins = append(tins, nlattr.Nest(uint16(i+1), a)...)
	}
	x := append(nlattr.Attr(cakeStatsMemoryUsed, le32(4096)), nlattr.Nest(cakeStatsTinStats, tins)...)
	full := decodeCakeXStats(x)
	var wantMarks uint64
	var wantDelay uint32
	for _, tin := range full.Tins {
		wantMarks += uint64(tin.ECNMarkedPackets)
		wantDelay = max(wantDelay, tin.AvgDelayUS)
	}
	marks, delay := cakeTinSums(x)
	if len(full.Tins) != 4 || marks != wantMarks || delay != wantDelay || marks != 11 || delay != 4500 {
		t.Errorf("cakeTinSums: marks %d delay %d µs; the full decoder: %d tins, marks %d delay %d", marks, delay, len(full.Tins), wantMarks, wantDelay)
	}
}
