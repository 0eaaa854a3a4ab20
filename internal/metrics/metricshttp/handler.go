// Package metricshttp serves sqm's Prometheus metrics over HTTP, as an
// httpd handler (the daemon's own server: net/http would cost sqm-full
// some 3.5 MB on mipsle). It is apart from package metrics so that `sqm
// status --prom` links no HTTP server at all.
package metricshttp

import (
	"bytes"
	"strconv"

	"sqm/internal/httpd"
	"sqm/internal/metrics"
)

// Handler serves src's snapshot at whatever path it is mounted on (the
// daemon mounts it at /metrics). It holds one Collector, so 32-bit kernel
// counters are extended across scrapes for the life of the handler.
// Serving policy (listen address, authentication) is the caller's.
func Handler(src metrics.Source) httpd.Handler {
	return &handler{src: src, c: metrics.NewCollector()}
}

type handler struct {
	src metrics.Source
	c   *metrics.Collector
}

func (h *handler) ServeHTTP(w httpd.ResponseWriter, r *httpd.Request) {
	if r.Method != "GET" && r.Method != "HEAD" {
		w.Header().Set("Allow", "GET, HEAD")
		httpd.Error(w, "metrics: only GET and HEAD", httpd.StatusMethodNotAllowed)
		return
	}
	snap, err := h.src.Snapshot()
	if snap == nil {
		msg := "metrics: no snapshot"
		if err != nil {
			msg = "metrics: " + err.Error()
		}
		httpd.Error(w, msg, httpd.StatusInternalServerError)
		return
	}
	// Rendered into memory first: a failure must not leave a truncated
	// body that parses as a smaller, valid exposition.
	var buf bytes.Buffer
	if werr := h.c.Write(&buf, snap, err); werr != nil {
		httpd.Error(w, "metrics: "+werr.Error(), httpd.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", metrics.ContentType)
	w.Header().Set("Content-Length", strconv.Itoa(buf.Len()))
	if r.Method == "HEAD" {
		return
	}
	w.Write(buf.Bytes())
}
