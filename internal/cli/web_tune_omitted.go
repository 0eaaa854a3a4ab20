//go:build linux && !sqm_noweb && sqm_notest

package cli

import (
	"context"

	"sqm/internal/tune"
	"sqm/internal/web"
)

// A build with the page but without the tester (-tags sqm_notest) has no
// sqm tune: the page's Tune hook stays nil and the page offers no tuning.
func webTune(*Env, string, string, *heldFlag, func() error) func(context.Context, web.TuneRequest) (*tune.Result, error) {
	return nil
}

type heldFlag struct{}

func (*heldFlag) set(bool)  {}
func (*heldFlag) get() bool { return false }
