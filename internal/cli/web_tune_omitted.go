//go:build linux && !sqm_noweb && sqm_notest

package cli

import (
	"context"
	"sync/atomic"

	"sqm/internal/tune"
	"sqm/internal/web"
)

// A build with the page but without the tester (-tags sqm_notest) has no
// sqm tune: the page's Tune hook stays nil and the page offers no tuning.
func webTune(*Env, string, string, *atomic.Bool, func() error) func(context.Context, web.TuneRequest) (*tune.Result, error) {
	return nil
}
