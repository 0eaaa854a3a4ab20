package features

import (
	"errors"
	"fmt"
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
	f := e.Feature
	if f.Module == "" {
		return fmt.Sprintf("%s is not available: the kernel lacks traffic-control support (CONFIG_NET_SCHED) (OpenWrt: opkg install %s)", f, f.OpenWrt)
	}
	return fmt.Sprintf("%s is not available: kernel module %s is missing (OpenWrt: opkg install %s)", f, f.Module, f.OpenWrt)
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
