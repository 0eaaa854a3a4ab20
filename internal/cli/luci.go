//go:build linux

package cli

import (
	"errors"
	"path/filepath"
	"time"

	"sqm/internal/features"
	"sqm/internal/logger"
	"sqm/internal/luci"
)

// refreshAvailableQdiscs rewrites <state-dir>/available_qdiscs (on OpenWrt
// /var/run/sqm/available_qdiscs, where luci-app-sqm lists qdiscs from)
// from real probes. The daemon calls it at start and on every reload, so
// a qdisc whose kernel module was installed after boot shows up in LuCI
// without a reboot: each call uses a fresh prober, because the shared one
// caches "missing" for the life of the process.
func refreshAvailableQdiscs(log *logger.Logger, stateDir string) {
	start := time.Now()
	dir := filepath.Join(stateDir, "available_qdiscs")
	p := features.NewProber()
	avail, err := luci.RefreshQdiscs(dir, p.Qdiscs, func(err error) bool { return errors.Is(err, features.ErrNotAvailable) })
	if err != nil {
		log.Warn("available qdiscs for LuCI not fully refreshed", "dir", dir, "err", err)
	}
	log.Debug("available qdiscs refreshed", "dir", dir, "qdiscs", luci.Summary(avail), "took", time.Since(start).Round(time.Millisecond))
}
