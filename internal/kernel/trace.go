package kernel

import (
	"fmt"

	"sqm/internal/rtlink"
)

// Op is one change Apply or Remove sent to the kernel, for SetTrace.
type Op struct {
	_ [0]func() // not comparable: no equality code (docs/testing.md, "Package sizes")

	// Device is the network device the change is about (an interface or
	// its IFB), by name.
	Device string
	// What says what was asked, in tc's words: "add qdisc cake 1: (parent
	// root) on eth1", "delete qdisc 1: (parent root)", "create ifb ifb4eth1".
	What string
	// Err is the kernel's answer; nil when it accepted.
	Err error
}

func (o Op) String() string {
	s := o.Device + ": " + o.What
	if o.Err != nil {
		return s + ": " + o.Err.Error()
	}
	return s + ": ok"
}

// SetTrace makes c report every netlink request that changes the kernel
// (qdisc, class and filter adds, qdisc deletes, IFB creation, link up and
// delete), with the kernel's answer, to fn; nil turns it off. sqm-scripts'
// debug_logging wrote every tc command it ran to a log file; this is what
// lets sqm do the same without forking tc. Reads (dumps) are not reported.
func (c *Conn) SetTrace(fn func(Op)) { c.traceFn = fn }

// traceOp reports one request; ifindex names the device when dev is empty.
func (c *Conn) traceOp(dev string, ifindex int, what string, err error) {
	if c.traceFn == nil {
		return
	}
	if dev == "" {
		dev = fmt.Sprintf("ifindex %d", ifindex)
		if l, lerr := rtlink.ByIndex(c.raw, ifindex); lerr == nil {
			dev = l.Name
		}
	}
	c.traceFn(Op{Device: dev, What: what, Err: err})
}
