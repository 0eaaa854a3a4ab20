package service

import (
	"sqm/internal/plan"
)

// Kernel is what the service needs from internal/kernel. *kernel.Conn
// satisfies it; tests use a fake, so lifecycle, state and daemon logic are
// tested without root.
type Kernel interface {
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

// TEMPORARY: mirrors of internal/kernel's documented types until that
// package is committed; then these become aliases (type Owned = kernel.Owned).

// Owned is what sqm created on one interface.
type Owned struct {
	Interface    string      `json:"interface"`
	Ifindex      int         `json:"ifindex"`
	EgressRoot   bool        `json:"egress_root"`
	EgressHandle plan.Handle `json:"egress_handle"`
	Ingress      bool        `json:"ingress"`
	IFB          string      `json:"ifb,omitempty"`
	IFBIndex     int         `json:"ifb_index,omitempty"`
}

// ApplyOptions modify Apply.
type ApplyOptions struct{ Force bool }

// Result is what Apply did.
type Result struct {
	Owned   Owned
	Changed bool
}
