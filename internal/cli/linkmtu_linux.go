package cli

import "sqm/internal/rtlink"

// linkMTU is the device's MTU, if it exists: asked over rtnetlink, so
// that the router build does not link package net for it.
func linkMTU(name string) (int, bool) {
	l, err := rtlink.Lookup(name)
	return l.MTU, err == nil
}
