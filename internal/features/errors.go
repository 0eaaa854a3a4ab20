package features

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"golang.org/x/sys/unix"
)

// ErrNotAvailable matches (errors.Is) every error that says the kernel
// lacks a feature, as opposed to a probe that could not be run.
var ErrNotAvailable = errors.New("not available")

// ErrPermission matches probe errors caused by missing privileges.
var ErrPermission = errors.New("needs CAP_NET_ADMIN: run as root")

// MissingError says that a feature is not in the running kernel, and what
// to install.
type MissingError struct {
	Feature Feature
	Err     error // the kernel's answer, e.g. ENOENT
}

func (e *MissingError) Error() string {
	return fmt.Sprintf("%s is not available: %s", e.Feature, e.Feature.Advice())
}

// Advice says what is missing and what to install, for error messages:
// "kernel module sch_cake is missing (OpenWrt: apk add kmod-sched-cake)",
// naming the package manager this system has (see Installer).
func (f Feature) Advice() string { return f.AdviceFor(SystemInstaller()) }

// AdviceFor is Advice for a router whose package manager installs with
// install ("apk add", "opkg install"; "" is taken as opkg).
func (f Feature) AdviceFor(install string) string {
	if f.Module == "" {
		return "the kernel lacks traffic-control support (CONFIG_NET_SCHED, built into every OpenWrt kernel)"
	}
	return "kernel module " + f.Module + " is missing (" + f.OpenWrtHint(install) + ")"
}

// OpenWrtHint says how OpenWrt gets the module: "OpenWrt: apk add
// kmod-sched-cake", or, for what OpenWrt builds into its kernel, that no
// package adds it.
func (f Feature) OpenWrtHint(install string) string {
	if f.OpenWrt == "" {
		return "OpenWrt builds it into its kernel; a custom kernel needs it enabled"
	}
	if install == "" {
		install = InstallOpkg
	}
	return "OpenWrt: " + install + " " + f.OpenWrt
}

// The install commands of OpenWrt's package managers: apk from 25.12 on,
// opkg before.
const (
	InstallAPK  = "apk add"
	InstallOpkg = "opkg install"
)

// Installer returns the install command of the package manager found
// under root ("/" on the router; tests pass a directory): InstallAPK when
// usr/bin/apk exists, InstallOpkg when bin/opkg does, "" when neither (not
// OpenWrt; hints then name opkg, which every release before 25.12 has).
// An image upgraded to 25.12 may keep a stale opkg, so apk wins.
func Installer(root string) string {
	exists := func(p string) bool {
		st, err := os.Stat(filepath.Join(root, p))
		return err == nil && !st.IsDir()
	}
	switch {
	case exists("usr/bin/apk"):
		return InstallAPK
	case exists("bin/opkg"):
		return InstallOpkg
	}
	return ""
}

// SystemInstaller is Installer("/"), looked up once: a router does not
// change package managers while sqm runs.
var SystemInstaller = sync.OnceValue(func() string { return Installer("/") })

// Refused interprets the kernel's answer to creating an object of kind
// name (a netlink error from RTM_NEWQDISC, RTM_NEWTFILTER, RTM_NEWACTION
// or RTM_NEWLINK). The kernel answers ENOENT when it has no qdisc,
// classifier or action of that kind even after trying to load its module
// ("Specified qdisc kind is unknown", "TC classifier not found"), and
// EOPNOTSUPP for an unknown link kind ("Unknown device type"). For those
// it returns a *MissingError naming the module and the OpenWrt package;
// for anything else, or a kind not in the table, nil.
//
// This is how shaping reports missing modules: it creates the objects and
// interprets a refusal, instead of probing first, so it needs no probe
// namespace and no extra round trips.
func Refused(t Type, name string, err error) *MissingError {
	if err == nil || !(errors.Is(err, unix.ENOENT) || errors.Is(err, unix.EOPNOTSUPP)) {
		return nil
	}
	f, ok := Lookup(t, name)
	if !ok {
		return nil
	}
	return &MissingError{Feature: f, Err: err}
}

func (e *MissingError) Is(target error) bool { return target == ErrNotAvailable }
func (e *MissingError) Unwrap() error        { return e.Err }

// permissionError wraps EPERM/EACCES so that it reads as advice.
type permissionError struct {
	Feature Feature
	Err     error
}

func (e *permissionError) Error() string {
	return fmt.Sprintf("probe %s: %v", e.Feature, ErrPermission)
}
func (e *permissionError) Is(target error) bool { return target == ErrPermission }
func (e *permissionError) Unwrap() error        { return e.Err }
