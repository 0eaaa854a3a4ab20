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
	var msg string
	var oe *netlink.OpError
	if errors.As(err, &oe) && oe.Message != "" {
		msg = oe.Message
	}
	detail := err.Error()
	if msg != "" && !strings.Contains(detail, msg) {
		detail += ": " + msg
	}
	switch {
	case errors.Is(err, unix.EPERM), errors.Is(err, unix.EACCES):
		return fmt.Errorf("%s: %s: needs CAP_NET_ADMIN (run as root): %w", op, detail, err)
	case errors.Is(err, unix.ENODEV):
		return fmt.Errorf("%s: %s: the device disappeared: %w", op, detail, errors.Join(ErrNoLink, err))
	case hint != "" && (errors.Is(err, unix.ENOENT) || errors.Is(err, unix.EOPNOTSUPP)):
		return fmt.Errorf("%s: %s: %s: %w", op, detail, hint, errors.Join(ErrNotSupported, err))
	}
	return fmt.Errorf("%s: %s: %w", op, detail, err)
}

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
