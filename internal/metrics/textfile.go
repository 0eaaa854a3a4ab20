package metrics

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
)

// WriteFile writes the exposition to path for a textfile collector
// (node_exporter --collector.textfile.directory, or
// prometheus-node-exporter-lua's textfile module on OpenWrt). It writes a
// temporary file in the same directory and renames it over path, so a
// collector reading at the same moment sees the old file or the new one,
// never half of one. The temporary name starts with a dot and does not
// end in .prom, so collectors that glob *.prom skip it.
func (c *Collector) WriteFile(path string, snap *Snapshot, scrapeErr error) error {
	var buf bytes.Buffer
	if err := c.Write(&buf, snap, scrapeErr); err != nil {
		return err
	}
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	f, err := os.CreateTemp(dir, "."+base+".tmp*")
	if err != nil {
		return fmt.Errorf("metrics textfile: %w", err)
	}
	tmp := f.Name()
	_, werr := f.Write(buf.Bytes())
	if err := f.Chmod(0o644); werr == nil {
		werr = err
	}
	if err := f.Close(); werr == nil {
		werr = err
	}
	if werr == nil {
		werr = os.Rename(tmp, path)
	}
	if werr != nil {
		os.Remove(tmp)
		return fmt.Errorf("metrics textfile %s: %w", path, werr)
	}
	return nil
}
