//go:build sqm_noautorate

package service

import "sqm/internal/logger"

// StartAutorate: this build has no autorate (dist/build.mk: the router
// package is over its size budget with it). The queue is shaped at its
// base rates, and the log and `sqm status` say why.
func StartAutorate(st *State, mtu int, log *logger.Logger) (AutorateRunner, error) {
	return nil, ErrAutorateOmitted
}
