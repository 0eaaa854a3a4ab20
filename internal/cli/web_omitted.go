//go:build linux && sqm_noweb

package cli

import (
	"context"
	"flag"

	"sqm/internal/logger"
	"sqm/internal/service"
)

// A router build without the page (-tags sqm_noweb) keeps the daemon's
// flags and config options, so a config written for the full build still
// loads, and says why --http cannot work.
func webFlags(fs *flag.FlagSet) {
	fs.String("http", "", "not in this build (built with -tags sqm_noweb)")
	fs.String("http-users", "", "not in this build (built with -tags sqm_noweb)")
	fs.String("test-server", "", "not in this build (built with -tags sqm_noweb)")
	fs.String("http-cert", "", "not in this build (built with -tags sqm_noweb)")
	fs.String("http-key", "", "not in this build (built with -tags sqm_noweb)")
	fs.String("http-hosts", "", "not in this build (built with -tags sqm_noweb)")
}

type webPage struct{}

func prepareWeb(_ *Env, fs *flag.FlagSet, _ string) (*webPage, error) {
	if flagString(fs, "http") != "" {
		return nil, usageError("--http: this sqm was built without the web page (-tags sqm_noweb)")
	}
	return nil, nil
}

func (*webPage) close() {}

func (*webPage) start(context.Context, *service.Daemon, chan<- service.Request, *logger.Logger) {}
