package service

import "sqm/internal/config"

// Restart rebuilds the selected sections from scratch: fresh qdiscs, so
// every counter starts from zero, even where nothing changed. Sections of
// source that were deleted or disabled are removed, as by Reload.
//
// It is not stop-then-start. Each interface's new tree replaces the old one
// in one kernel transaction (Kernel.Apply with the old Owned and
// ApplyOptions.Rebuild), and a tree the kernel refuses is rolled back to
// the old one, state included. A stop followed by a failing start used to
// leave the interface unshaped. Like Start, a section that does not
// validate or plan is refused and the others go on; unlike Start, a
// kernel failure on one interface puts back the ones this call already
// rebuilt.
func (s *Service) Restart(qs []config.Queue, source string, o PrepareOptions, force bool) ([]Outcome, error) {
	return s.reload(qs, source, o, force, true)
}
