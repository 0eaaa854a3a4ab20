package kernel

import (
	"errors"
	"fmt"
	"strings"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
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
	var oe *netlink.OpError
	if errors.As(err, &oe) {
		detail = oe.Err.Error()
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
// (ErrNotSupported, ErrNoLink) and the original error (errno, OpError).
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

// qdiscHint names the module (and OpenWrt package) providing a qdisc kind.
func qdiscHint(kind string) string {
	pkg := "kmod-sched"
	switch kind {
	case "cake":
		pkg = "kmod-sched-cake"
	case "htb", "tbf", "fq_codel", "ingress", "pfifo", "bfifo":
		pkg = "kmod-sched-core"
	}
	if kind == "pfifo" || kind == "bfifo" {
		return "kernel lacks the " + kind + " qdisc (built in everywhere; is this a Linux kernel with CONFIG_NET_SCHED?)"
	}
	return fmt.Sprintf("kernel module sch_%s missing (OpenWrt: %s; elsewhere: modprobe sch_%s)", kind, pkg, kind)
}

// filterHint names the modules a filter needs.
func filterHint(kind string, actions []string) string {
	mods := []string{"cls_" + kind}
	for _, a := range actions {
		mods = append(mods, "act_"+a)
	}
	return fmt.Sprintf("kernel module(s) %s missing or an option was refused (OpenWrt: kmod-sched-core for u32/mirred, kmod-sched for police/matchall)",
		strings.Join(mods, ", "))
}
