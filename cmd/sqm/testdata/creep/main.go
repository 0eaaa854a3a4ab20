// Command creep is a deliberate mistake for TestForbiddenDepsCatches: it
// links the metrics HTTP handler, and with it net/http and TLS, which
// the router build must not.
package main

import (
	"os"

	"sqm/internal/metrics/metricshttp"
)

func main() {
	_ = metricshttp.Handler
	os.Exit(0)
}
