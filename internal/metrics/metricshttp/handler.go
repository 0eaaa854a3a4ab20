// Package metricshttp serves sqm's Prometheus metrics over HTTP. It is
// apart from package metrics so that `sqm status --prom` does not link
// net/http: in a router build without the web page that would add about
// 1.5 MB (measured on linux/mipsle, stripped) for one flag.
package metricshttp

import (
	"bytes"
	"net/http"
	"strconv"

	"sqm/internal/metrics"
)

// Handler serves src's snapshot at whatever path it is mounted on (the
// daemon mounts it at /metrics). It holds one Collector, so 32-bit kernel
// counters are extended across scrapes for the life of the handler.
// Serving policy (listen address, authentication) is the caller's.
func Handler(src metrics.Source) http.Handler {
	return &handler{src: src, c: metrics.NewCollector()}
}

type handler struct {
	src metrics.Source
	c   *metrics.Collector
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "metrics: only GET and HEAD", http.StatusMethodNotAllowed)
		return
	}
	snap, err := h.src.Snapshot()
	if snap == nil {
		msg := "metrics: no snapshot"
		if err != nil {
			msg = "metrics: " + err.Error()
		}
		http.Error(w, msg, http.StatusInternalServerError)
		return
	}
	// Rendered into memory first: a failure must not leave a truncated
	// body that parses as a smaller, valid exposition.
	var buf bytes.Buffer
	if werr := h.c.Write(&buf, snap, err); werr != nil {
		http.Error(w, "metrics: "+werr.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", metrics.ContentType)
	w.Header().Set("Content-Length", strconv.Itoa(buf.Len()))
	if r.Method == http.MethodHead {
		return
	}
	w.Write(buf.Bytes())
}
