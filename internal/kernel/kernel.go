// Package kernel applies an sqm plan (internal/plan) to the running kernel
// over netlink, reads the result back and reports its counters.
//
// Every request is encoded here: qdiscs, classes, filters and actions
// (spec.go, rawenc.go, police.go, stab.go) and links (internal/rtlink);
// reads use our own dump decoder (dump.go). All go over sqm's own netlink
// socket (internal/netlink), which replaced mdlayher/netlink and with it
// package net (0.24 MB of the router build's contents on mipsle). Until
// issue 24 writes went through florianl/go-tc and links through
// jsimonetti/rtnetlink/v2, which cost the router binary 0.33 and 0.2 MB
// (linux/mipsle); the requests sqm sends for every golden plan are still
// byte for byte the ones go-tc sent (testdata/requests-le,
// TestRequestsGolden), except where go-tc's were wrong: fq_pie's options
// need NLA_F_NESTED (the kernel refused them) and sfq's depth needs the
// whole tc_sfq_qopt_v1 (go-tc's 48 bytes lost it). go-tc's dump decoding
// was never used (its Stats2 decoding is wrong and its strict decoder
// fails the whole dump on one qdisc kind it does not know), and the stab
// size table and the police action's rate table were always ours.
//
// Nothing here forks tc or ip: sqm runs on routers where process start-up
// dominates the time a reconfiguration takes.
//
// Trees built here are the ones tc builds from plan.RenderShell's script,
// attribute for attribute as the kernel dumps them (transmit times
// truncated to whole microseconds, tbf's burst sent in bytes, u32 keys at
// one offset merged): the VM tests compare both dumps for every recipe.
//
// Apply is transactional and does not probe first: a failure, including
// the kernel refusing a qdisc, classifier or action kind whose module is
// missing, deletes what was built and rebuilds sqm's previous tree from
// Owned.Plan (which is why Owned carries the plan it came from); the error
// names the module and the OpenWrt package, from internal/features' table.
// Shaping thus needs CAP_NET_ADMIN and nothing else: no probe namespace
// (CAP_SYS_ADMIN) and no veth module.
package kernel

import (
	"errors"
	"fmt"

	"sqm/internal/netlink"
	"sqm/internal/plan"
)

// Sentinel errors callers branch on with errors.Is.
var (
	// ErrNoLink: the named network device does not exist.
	ErrNoLink = errors.New("no such network device")
	// ErrForeignQdisc: a qdisc (or IFB) sqm did not install is in the way.
	ErrForeignQdisc = errors.New("interface has a qdisc sqm did not install")
	// ErrNotSupported: the kernel lacks a qdisc, classifier or action the
	// plan uses (module not loaded or not built).
	ErrNotSupported = errors.New("not supported by this kernel")
)

// Conn is one netlink handle for traffic control and links, bound to the
// network namespace of the thread that opened it. It is not safe for
// concurrent use: callers serialise (the daemon owns one Conn).
type Conn struct {
	raw  *netlink.Conn
	tick float64 // psched ticks per microsecond
	// afterStep, when set (tests only), runs after each Apply step, to
	// inject failures such as the interface vanishing mid-apply.
	afterStep func(step string)
	// traceFn receives every change sent to the kernel (SetTrace).
	traceFn func(Op)
	// lookups counts RTM_GETLINK round trips (linkByName), so tests can
	// hold Apply to the lookups it needs.
	lookups int
	// rbuf is SetRate's request buffer, reused so that a rate change
	// allocates nothing of its own; stabKey/stabRaw cache the one size
	// table it resends (a cake with tc_stab).
	rbuf    []byte
	stabKey plan.Stab
	stabRaw []byte
}

// Open opens the netlink sockets in the caller's current network namespace.
func Open() (*Conn, error) {
	// Dial turns extended acks on: the kernel's own explanation
	// ("Specified qdisc kind is unknown") is the most useful part of most
	// errors.
	raw, err := netlink.Dial(netlink.Config{})
	if err != nil {
		return nil, permHint(fmt.Errorf("kernel: open netlink socket: %w", err))
	}
	return &Conn{raw: raw, tick: ticksPerMicrosecond}, nil
}

// Close releases the sockets.
func (c *Conn) Close() error {
	return c.raw.Close()
}

// Owned is what sqm created on one interface. It is saved in the state file
// (JSON) and is all Remove needs; Plan lets a failed re-apply restore the
// previous tree exactly.
type Owned struct {
	Interface    string      `json:"interface"`
	Ifindex      int         `json:"ifindex"`
	EgressRoot   bool        `json:"egress_root"`
	EgressHandle plan.Handle `json:"egress_handle"`
	Ingress      bool        `json:"ingress"`
	IFB          string      `json:"ifb,omitempty"`
	IFBIndex     int         `json:"ifb_index,omitempty"`
	// Plan is the plan that produced this state. Apply uses it to rebuild
	// the previous tree when a new one fails half-way, and Apply and
	// Remove compare the device with it to tell sqm's tree from someone
	// else's under the same handle (ownsRoot, ownsIngress).
	Plan *plan.Plan `json:"plan,omitempty"`
}

// ApplyOptions changes how Apply treats what it finds.
type ApplyOptions struct {
	// Force replaces root and ingress qdiscs (and reuses an IFB) that sqm
	// did not install. They cannot be restored if the apply then fails.
	Force bool
	// Rebuild builds the tree even when the kernel already holds it
	// (sqm restart: fresh qdiscs, counters from zero). It stays one
	// transaction: if the new tree fails, prev's tree is rebuilt.
	Rebuild bool
}

// Result is what Apply did.
type Result struct {
	Owned   Owned `json:"owned"`
	Changed bool  `json:"changed"`
}
