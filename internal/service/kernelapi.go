package service

import (
	"sqm/internal/kernel"
	"sqm/internal/plan"
)

// Kernel is what the service needs from internal/kernel. *kernel.Conn
// satisfies it; tests use a fake, so lifecycle, state and daemon logic are
// tested without root.
type Kernel interface {
	// LinkMTU's error wraps kernel.ErrNoLink when iface does not exist.
	LinkMTU(iface string) (int, error)
	LinkExists(iface string) (bool, error)
	// Apply builds p transactionally; prev is what sqm installed before on
	// that interface (nil if nothing), so the kernel can replace it.
	Apply(p *plan.Plan, prev *Owned, opts ApplyOptions) (*Result, error)
	// Remove deletes exactly o, tolerating objects already gone.
	Remove(o *Owned) error
	// Matches reports whether the kernel holds p's tree now.
	Matches(p *plan.Plan) (ok bool, diff string, err error)
}

var _ Kernel = (*kernel.Conn)(nil)

// The kernel's types, under the names the service uses.
type (
	Owned        = kernel.Owned
	ApplyOptions = kernel.ApplyOptions
	Result       = kernel.Result
)
