//go:build !linux

package cli

import "net"

// linkMTU is the device's MTU, if it exists. Off Linux only `sqm plan`
// asks, and those builds link net for the tester anyway.
func linkMTU(name string) (int, bool) {
	ifc, err := net.InterfaceByName(name)
	if err != nil {
		return 0, false
	}
	return ifc.MTU, true
}
