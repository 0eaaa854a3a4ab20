package rpm

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// writeLog is a ResponseWriter that records the size of each write and
// fails after a few, like a client that goes away.
type writeLog struct {
	h      http.Header
	sizes  []int
	status int
}

func (w *writeLog) Header() http.Header { return w.h }
func (w *writeLog) WriteHeader(s int)   { w.status = s }
func (w *writeLog) Write(p []byte) (int, error) {
	w.sizes = append(w.sizes, len(p))
	if len(w.sizes) == 8 {
		return 0, errors.New("client gone")
	}
	return len(p), nil
}

// TestLargeWriteSize: Go's HTTP/2 server makes DATA frames from each
// handler write, and a self probe's response waits behind the frame being
// written (docs/rpm.md: 16 KB frames doubled the probes' wait on download
// connections), so the large object must go out in writes of at most
// largeChunk, and in whole ones (not a byte at a time either).
func TestLargeWriteSize(t *testing.T) {
	w := &writeLog{h: http.Header{}}
	Handler(time.Second).ServeHTTP(w, httptest.NewRequest(http.MethodGet, PathLarge, nil))
	if len(w.sizes) != 8 {
		t.Fatalf("%d writes before the handler stopped; it must stop at the first failed write (8th)", len(w.sizes))
	}
	for i, n := range w.sizes {
		if n != largeChunk {
			t.Errorf("write %d: %d bytes, want %d", i, n, largeChunk)
		}
	}
	if largeChunk > 4<<10 {
		t.Errorf("largeChunk %d: more than 4 KB", largeChunk)
	}
	if got := w.h.Get("Content-Length"); got != "8589934592" {
		t.Errorf("Content-Length %q, want 8 GiB", got)
	}
}
