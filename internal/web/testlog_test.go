package web

import (
	"bytes"
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"sqm/internal/bloat"
	"sqm/internal/logger"
)

// syncBuffer is a log sink the test goroutine and the page's test
// goroutine may share.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestTestNoteLogged: a warning the tester reports through Logf (a printf
// format and arguments) reaches the daemon's log as one formatted message,
// not as a format string with its arguments as malformed attributes.
func TestTestNoteLogged(t *testing.T) {
	r := newRig(t)
	var logs syncBuffer
	r.srv.Log = logger.New(logger.NewText(&logs, logger.LevelInfo))
	done := make(chan struct{})
	r.srv.Test = func(ctx context.Context, o bloat.Options) (*bloat.Result, error) {
		defer close(done)
		o.Logf("cannot mark traffic %s: %v", "CS1", "operation not permitted")
		return &bloat.Result{Grade: "A"}, nil
	}
	adm := r.client()
	if code := adm.login("admin-secret"); code != http.StatusOK {
		t.Fatalf("admin login: %d", code)
	}
	if code, m := adm.change("/api/test", map[string]any{"server": "192.0.2.1", "duration_s": 1}); code != http.StatusAccepted {
		t.Fatalf("start test: %d %v", code, m)
	}
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the fake test never ran")
	}
	got := logs.String()
	if !strings.Contains(got, "cannot mark traffic CS1: operation not permitted") || strings.Contains(got, "BADKEY") {
		t.Errorf("log of the tester's note:\n%s\nwant the formatted note, no !BADKEY", got)
	}
}
