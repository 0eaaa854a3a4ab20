package cli

import "testing"

// TestLinkMTU: sqm plan and apply --dry-run plan with the device's MTU,
// read over rtnetlink; lo is in every namespace, with the MTU it had when
// the test ran (ip link may have changed it from 65536).
func TestLinkMTU(t *testing.T) {
	mtu, ok := linkMTU("lo")
	if !ok || mtu < 1280 {
		t.Errorf(`linkMTU("lo") = %d, %v`, mtu, ok)
	}
	if mtu, ok := linkMTU("sqmnosuch0"); ok {
		t.Errorf("a missing device has MTU %d", mtu)
	}
}
