package cli

import (
	"strings"
	"testing"
	"time"
)

// waitListening polls a server's log until it says it listens. The server
// logs that line only once its socket is bound, so a client started after
// this cannot be refused; a fixed number of polls that then carries on
// regardless made the client's "connection refused" the failure on a slow
// machine. The bound only ends a test whose server never came up.
func waitListening(t *testing.T, log interface{ String() string }, cancel func()) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); !strings.Contains(log.String(), "listening"); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			cancel()
			t.Fatalf("server did not say it listens within 30 s:\n%s", log.String())
		}
	}
}
