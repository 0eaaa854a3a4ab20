//go:build tools

// Package deps pins modules that packages are about to import, so that
// parallel work on go.mod does not race. It is never built.
package deps

import (
	_ "github.com/florianl/go-tc"
	_ "github.com/jsimonetti/rtnetlink/v2"
	_ "github.com/mdlayher/netlink"
	_ "golang.org/x/net/icmp"
	_ "golang.org/x/sys/unix"
)
