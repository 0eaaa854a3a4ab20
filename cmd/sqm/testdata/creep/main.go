// Command creep is a deliberate mistake for TestForbiddenDepsCatches: it
// links the metrics HTTP handler (and with it the page's server, httpd)
// and net/http with TLS, which the router build must not.
package main

import (
	"net/http"
	"os"

	"sqm/internal/metrics/metricshttp"
)

func main() {
	_ = metricshttp.Handler
	_ = http.ListenAndServe
	os.Exit(0)
}
