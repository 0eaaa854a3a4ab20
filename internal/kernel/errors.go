package kernel

import (
	"errors"
	"fmt"
	"strings"

	"golang.org/x/sys/unix"

	"sqm/internal/features"
	"sqm/internal/netlink"
)

// explain turns a netlink failure into an error that says what failed, the
// kernel's own message (extended ack) and what the user can do. hint is
// used for ENOENT/EOPNOTSUPP, which on a tc request almost always mean the
// kind's module is missing.
func explain(op string, err error, hint string) error {
	if err == nil {
		return nil
	}
	detail := err.Error()
	if oe, ok := netlink.As[*netlink.Error](err); ok {
		detail = oe.Errno.Error()
		if oe.Message != "" {
			detail += fmt.Sprintf(" (kernel: %q)", oe.Message)
		}
	}
	switch {
	case errors.Is(err, unix.EPERM), errors.Is(err, unix.EACCES):
		return &kernelError{fmt.Sprintf("%s: %s: needs CAP_NET_ADMIN (run as root)", op, detail), []error{err}}
	case errors.Is(err, unix.ENODEV):
		return &kernelError{fmt.Sprintf("%s: %s: the device disappeared", op, detail), []error{ErrNoLink, err}}
	case hint != "" && (errors.Is(err, unix.ENOENT) || errors.Is(err, unix.EOPNOTSUPP)):
		return &kernelError{fmt.Sprintf("%s: %s: %s", op, detail, hint), []error{ErrNotSupported, err}}
	}
	return &kernelError{fmt.Sprintf("%s: %s", op, detail), []error{err}}
}

// kernelError is a netlink failure explained; it unwraps to the sentinel
// (ErrNotSupported, ErrNoLink) and the original error (errno, *netlink.Error).
type kernelError struct {
	msg  string
	errs []error
}

func (e *kernelError) Error() string   { return e.msg }
func (e *kernelError) Unwrap() []error { return e.errs }

// permHint adds the privilege hint to socket-open failures.
func permHint(err error) error {
	if errors.Is(err, unix.EPERM) || errors.Is(err, unix.EACCES) {
		return fmt.Errorf("%w (needs CAP_NET_ADMIN: run as root)", err)
	}
	return err
}

// The hints below come from internal/features, the one table of which
// module and OpenWrt package provide each kind. Apply does not probe
// before building: it sends the tree inside its transaction, and the
// kernel's ENOENT/EOPNOTSUPP for an unknown kind is what reports a missing
// module (explain attaches these hints, Apply rolls back). That needs only
// CAP_NET_ADMIN and the interface itself, and costs no extra round trips.

// qdiscHint names the module (and OpenWrt package) providing a qdisc kind.
func qdiscHint(kind string) string {
	if f, ok := features.Lookup(features.TypeQdisc, kind); ok {
		return f.Advice()
	}
	return fmt.Sprintf("the kernel has no %s qdisc (module sch_%s missing?)", kind, kind)
}

// filterHint names the modules a filter needs: the classifier's and its
// actions'. The errno cannot say which one is missing; the kernel's own
// message, which explain shows, does ("TC classifier not found", "Failed
// to load TC action module").
func filterHint(kind string, actions []string) string {
	var parts []string
	add := func(t features.Type, name, fallback string) {
		if f, ok := features.Lookup(t, name); ok {
			parts = append(parts, fmt.Sprintf("%s (%s)", f.Module, f.OpenWrtHint(features.SystemInstaller())))
		} else {
			parts = append(parts, fallback)
		}
	}
	add(features.TypeClassifier, kind, "cls_"+kind)
	for _, a := range actions {
		add(features.TypeAction, a, "act_"+a)
	}
	if len(parts) == 1 {
		return "kernel module " + parts[0] + " is missing"
	}
	return "one of the kernel modules " + strings.Join(parts, ", ") + " is missing"
}

// ifbHint names the module (and OpenWrt package) providing IFB devices.
func ifbHint() string {
	f, _ := features.Lookup(features.TypeLink, "ifb")
	return f.Advice()
}
