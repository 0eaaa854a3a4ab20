//go:build sqm_notest

package irtt

import (
	"context"
	"errors"
	"testing"
)

// TestHMACOmitted: the router build refuses keys with an error that says
// why, before any packet is sent.
func TestHMACOmitted(t *testing.T) {
	if _, err := Open(context.Background(), nil, ask, []byte("k")); !errors.Is(err, ErrHMACOmitted) {
		t.Errorf("Open with a key: %v, want ErrHMACOmitted", err)
	}
	if _, err := ParseOpenReply([]byte{0x14, 0xa7, 0x5b, FlagOpen | FlagReply}, []byte("k")); !errors.Is(err, ErrHMACOmitted) {
		t.Errorf("ParseOpenReply with a key: %v, want ErrHMACOmitted", err)
	}
}
