package service

import (
	stdjson "encoding/json"
	"testing"
	"time"

	"sqm/internal/config"
	"sqm/internal/json/jsontest"
	"sqm/internal/kernel"
	"sqm/internal/plan"
)

// TestStateFilesJSON holds the state, pending and refused files to what
// encoding/json wrote and read: files written by an older sqm must still
// load, and a plan compared byte for byte must not change its bytes.
func TestStateFilesJSON(t *testing.T) {
	q := &config.Queue{Name: "wan", Interface: "eth0", Enabled: true, Download: 85000, Upload: 10000,
		Qdisc: "cake", Script: "piece_of_cake.qos", LinkLayer: "ethernet", Overhead: 34, StabMTU: 2047, StabTSize: 512, LLAM: "default"}
	p, err := plan.Build(q, plan.Env{MTU: 1500})
	if err != nil {
		t.Fatal(err)
	}
	pj, err := stdjson.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 12, 1, 23, 45, 6, 789, time.FixedZone("", 3600))
	values := []any{
		&State{Version: 1, Interface: "eth0", Source: "/etc/config/sqm", Section: "wan", SectionPos: "/etc/config/sqm:3",
			AppliedAt: at, PID: 42, Queue: *q, Plan: pj,
			Owned: kernel.Owned{Interface: "eth0", Ifindex: 2, EgressRoot: true, EgressHandle: 0x10000, Ingress: true, IFB: "ifb4eth0", IFBIndex: 9, Plan: p}},
		&pending{Interface: "eth0", PID: 7, Started: at, Source: SourceCLI, Plan: pj, IFB: "ifb4eth0"},
		&[]Refused{{Source: "/etc/config/sqm", Section: "lan", SectionPos: "x:9", Errors: []string{`bad "rate" <0>`}, At: at}},
	}
	for _, v := range values {
		if err := jsontest.Marshal(v); err != nil {
			t.Error(err)
		}
		b, err := stdjson.MarshalIndent(v, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		for _, newV := range []func() any{
			func() any { return new(State) }, func() any { return new(pending) }, func() any { return new([]Refused) },
		} {
			if err := jsontest.Unmarshal(b, newV); err != nil {
				t.Error(err)
			}
		}
	}
}
