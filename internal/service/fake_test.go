package service

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"sqm/internal/config"
	"sqm/internal/kernel"
	"sqm/internal/logger"
	"sqm/internal/plan"
)

// fakeKernel keeps "trees" as plan JSON per interface, which is all the
// service can observe through Kernel.
type fakeKernel struct {
	mu        sync.Mutex
	links     map[string]int    // interface -> MTU
	trees     map[string]string // interface -> plan JSON
	ifbs      map[string]bool
	applies   map[string]int
	forced    map[string]int
	removes   map[string]int
	removed   map[string]Owned // the last Owned Remove was given, per interface
	matches   map[string]int   // Matches calls: how often a tree was compared
	failApply map[string]error
	// prevPlans and prevIFBs are the previous plan and IFB Apply was
	// handed last, per interface.
	prevPlans map[string]*plan.Plan
	prevIFBs  map[string]string
	// lookups counts LinkMTU and LinkExists calls (netlink round trips
	// in the real kernel).
	lookups int
	// afterApply, if set, runs after each successful Apply (with the
	// kernel's lock held), e.g. to break the state directory.
	afterApply func(iface string)
}

func newFake(links ...string) *fakeKernel {
	k := &fakeKernel{links: map[string]int{}, trees: map[string]string{}, ifbs: map[string]bool{},
		applies: map[string]int{}, forced: map[string]int{}, removes: map[string]int{}, removed: map[string]Owned{}, matches: map[string]int{}, failApply: map[string]error{},
		prevPlans: map[string]*plan.Plan{}, prevIFBs: map[string]string{}}
	for _, l := range links {
		k.links[l] = 1500
	}
	return k
}

var errFakeForeign = errors.New("fake: foreign qdisc")

func (k *fakeKernel) LinkMTU(iface string) (int, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.lookups++
	m, ok := k.links[iface]
	if !ok {
		return 0, fmt.Errorf("fake: no link %s: %w", iface, kernel.ErrNoLink)
	}
	return m, nil
}

func (k *fakeKernel) LinkExists(iface string) (bool, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.lookups++
	_, ok := k.links[iface]
	return ok || k.ifbs[iface], nil
}

func (k *fakeKernel) Apply(p *plan.Plan, prev *Owned, opts ApplyOptions) (*Result, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if err := k.failApply[p.Interface]; err != nil {
		return nil, err
	}
	if _, ok := k.links[p.Interface]; !ok {
		return nil, fmt.Errorf("fake: no link %s", p.Interface)
	}
	b, _ := json.Marshal(p)
	if cur, ok := k.trees[p.Interface]; ok && cur != "foreign-ok" && prev == nil && !opts.Force && cur != string(b) {
		return nil, errFakeForeign
	}
	if opts.Force {
		k.forced[p.Interface]++
	}
	k.trees[p.Interface] = string(b)
	k.applies[p.Interface]++
	if prev != nil {
		k.prevPlans[p.Interface] = prev.Plan
		k.prevIFBs[p.Interface] = prev.IFB
	}
	if k.afterApply != nil {
		k.afterApply(p.Interface)
	}
	o := Owned{Interface: p.Interface, Ifindex: 7, EgressRoot: p.Egress != nil, Ingress: p.Ingress != nil, Plan: p}
	if p.Ingress != nil {
		o.IFB = p.Ingress.IFB
		k.ifbs[o.IFB] = true
	}
	return &Result{Owned: o, Changed: true}, nil
}

func (k *fakeKernel) Remove(o *Owned) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	delete(k.trees, o.Interface)
	delete(k.ifbs, o.IFB)
	k.removes[o.Interface]++
	k.removed[o.Interface] = *o
	return nil
}

func (k *fakeKernel) Matches(p *plan.Plan) (bool, string, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.matches[p.Interface]++
	b, _ := json.Marshal(p)
	cur := k.trees[p.Interface]
	if cur == string(b) {
		return true, "", nil
	}
	return false, fmt.Sprintf("root: want sqm tree, have %q", cur), nil
}

func (k *fakeKernel) count(m map[string]int, iface string) int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return m[iface]
}

func (k *fakeKernel) setLink(iface string, present bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if present {
		k.links[iface] = 1500
	} else {
		delete(k.links, iface)
		delete(k.trees, iface)
	}
}

func (k *fakeKernel) tamper(iface string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.trees[iface] = "someone else's"
}

// fakePlan is a planner with the shape of the real one: egress on the
// interface, ingress through "ifb4"+iface cut to 15 characters.
func fakePlan(q *config.Queue, mtu int) (*plan.Plan, error) {
	if q.Script == "broken" {
		return nil, q.Errorf("script", "no such script %q", q.Script)
	}
	p := &plan.Plan{Interface: q.Interface, Section: q.Name, Script: q.Script, Qdisc: q.Qdisc}
	if q.Upload > 0 {
		p.Egress = &plan.Tree{Device: q.Interface, RateKbit: q.Upload}
	}
	if q.Download > 0 {
		ifb := "ifb4" + q.Interface
		if len(ifb) > 15 {
			ifb = ifb[:15]
		}
		p.Ingress = &plan.Ingress{IFB: ifb, RateKbit: q.Download}
	}
	return p, nil
}

func queue(name, iface string, down, up uint64) config.Queue {
	return config.Queue{Name: name, Pos: config.Position{File: "/etc/config/sqm", Line: 1},
		Enabled: true, Interface: iface, Download: down, Upload: up, Qdisc: "fq_codel", Script: "simplest"}
}

func newService(t *testing.T, k *fakeKernel) (*Service, *logBuf) {
	t.Helper()
	lb := &logBuf{}
	return &Service{
		Kernel: k,
		Store:  &Store{Dir: t.TempDir()},
		Plan:   fakePlan,
		Log:    logger.New(logger.NewText(lb, logger.LevelDebug)),
		Now:    func() time.Time { return time.Date(2026, 11, 29, 23, 0, 0, 0, time.UTC) },
	}, lb
}

// logBuf is a goroutine-safe log sink.
type logBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuf) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
