//go:build linux

package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"

	"sqm/internal/config"
	"sqm/internal/kernel"
	"sqm/internal/logger"
	"sqm/internal/plan"
	"sqm/internal/service"
)

// levelTrace is sqm-scripts' TRACE verbosity (10), below Debug.
const levelTrace = logger.LevelTrace

// verbosityLevel maps sqm-scripts' verbosity option (0 silent, 1 error,
// 2 warning, 5 info, 8 debug, 10 trace; a message is shown when its level
// is at most the verbosity) to the lowest level shown. show is false
// for 0: nothing at all.
func verbosityLevel(v int) (level logger.Level, show bool) {
	switch {
	case v >= 10:
		return levelTrace, true
	case v >= 8:
		return logger.LevelDebug, true
	case v >= 5:
		return logger.LevelInfo, true
	case v >= 2:
		return logger.LevelWarn, true
	case v >= 1:
		return logger.LevelError, true
	}
	return logger.LevelError, false
}

// debugLogMax bounds a debug log the daemon appends to: the state
// directory is a small tmpfs on a router.
const debugLogMax = 1 << 20

// sectionLogs routes log records by the section they are about (their
// "interface" attribute, or the IFB of that interface) so that each
// section's verbosity and debug_logging options work as in sqm-scripts:
//
//   - verbosity gates the lines about that section on stderr (the daemon's
//     log); lines about no section use the command's own level;
//   - debug_logging '1' also writes every line about the section, at every
//     level down to trace, with each netlink change sqm sends (kernel
//     SetTrace, the equivalent of sqm-scripts' logged tc commands), to a
//     file in the state directory: <iface>.start-sqm.log or
//     <iface>.stop-sqm.log (the names luci-app-sqm's help gives),
//     rewritten by each command as sqm-scripts does; the daemon appends
//     to <iface>.start-sqm.log (cut at 1 MiB) and, when it removes the
//     shaping at exit, rewrites <iface>.stop-sqm.log.
type sectionLogs struct {
	mu       sync.Mutex
	out      logger.Handler
	level    logger.Level
	sections map[string]*sectionLog // by interface and by its IFB
}

type sectionLog struct {
	iface string
	show  bool
	level logger.Level
	path  string
	file  *os.File
	size  int64
}

func newSectionLogs(w io.Writer, level logger.Level) *sectionLogs {
	return &sectionLogs{
		out:      logger.NewText(w, levelTrace),
		level:    level,
		sections: map[string]*sectionLog{},
	}
}

// logger returns a logger over the routing handler.
func (s *sectionLogs) logger() *logger.Logger { return logger.New(&sectionHandler{s: s}) }

// configure sets the sections records are routed by, replacing earlier
// ones. With dir non-empty, sections with debug_logging get a debug file
// there: named file (e.g. "start-sqm") truncated, or with appendMode
// "debug" appended to. Files of sections no longer configured are closed.
func (s *sectionLogs) configure(qs []config.Queue, dir, file string, appendMode bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	old := s.sections
	s.sections = map[string]*sectionLog{}
	var errs []error
	for i := range qs {
		q := &qs[i]
		if !q.Enabled || q.Interface == "" || s.sections[q.Interface] != nil {
			continue
		}
		level, show := verbosityLevel(q.Verbosity)
		sl := &sectionLog{iface: q.Interface, show: show, level: level}
		if q.DebugLogging && dir != "" {
			sl.path = filepath.Join(dir, q.Interface+"."+file+".log")
			if prev := old[q.Interface]; prev != nil && prev.path == sl.path && prev.file != nil {
				sl.file, sl.size = prev.file, prev.size
				prev.file = nil // handed over
			} else if err := sl.open(appendMode); err != nil {
				errs = append(errs, err)
			}
		}
		s.sections[q.Interface] = sl
		s.sections[plan.IFBName(q.Interface)] = sl
	}
	for _, sl := range old {
		if sl.file != nil {
			sl.file.Close()
			sl.file = nil
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("debug_logging: %w", errs[0])
	}
	return nil
}

func (sl *sectionLog) open(appendMode bool) error {
	flags := os.O_WRONLY | os.O_CREATE | os.O_TRUNC
	if appendMode {
		flags = os.O_WRONLY | os.O_CREATE | os.O_APPEND
	}
	// The state directory may be one a user chose: no links followed,
	// no directory another user can write to (service.OpenStateFile).
	if err := service.EnsureStateDir(filepath.Dir(sl.path)); err != nil {
		return err
	}
	f, err := service.OpenStateFile(sl.path, flags, 0o600)
	if err != nil {
		return err
	}
	if fi, err := f.Stat(); err == nil {
		sl.size = fi.Size()
	}
	sl.file = f
	return nil
}

// write sends r to the debug file, starting the file over when it
// reaches debugLogMax.
func (sl *sectionLog) write(ctx context.Context, r logger.Record) {
	if sl.file == nil {
		return
	}
	if sl.size >= debugLogMax {
		if err := sl.file.Truncate(0); err == nil {
			sl.size = 0
			fmt.Fprintf(sl.file, "(sqm: %s was cut at %d bytes)\n", filepath.Base(sl.path), debugLogMax)
		}
	}
	cw := &countWriter{w: sl.file}
	h := logger.NewText(cw, levelTrace)
	_ = h.Handle(ctx, r)
	sl.size += cw.n
}

type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// close closes every debug file.
func (s *sectionLogs) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, sl := range s.sections {
		if sl.file != nil {
			sl.file.Close()
			sl.file = nil
		}
	}
}

// trace is a kernel.Conn trace function: each change, at debug level
// (sqm-scripts logs each successful command at DEBUG), under the
// interface it belongs to.
func (s *sectionLogs) trace(log *logger.Logger) func(kernel.Op) {
	return func(op kernel.Op) {
		iface := op.Device
		s.mu.Lock()
		if sl := s.sections[op.Device]; sl != nil {
			iface = sl.iface
		}
		s.mu.Unlock()
		args := []any{"interface", iface, "device", op.Device, "op", op.What}
		if op.Err != nil {
			args = append(args, "err", op.Err)
		} else {
			args = append(args, "result", "ok")
		}
		log.Debug("netlink", args...)
	}
}

type sectionHandler struct {
	s     *sectionLogs
	attrs []logger.Attr
}

func (h *sectionHandler) Enabled(ctx context.Context, l logger.Level) bool {
	h.s.mu.Lock()
	defer h.s.mu.Unlock()
	if l >= h.s.level {
		return true
	}
	for _, sl := range h.s.sections {
		if (sl.show && l >= sl.level) || sl.file != nil {
			return true
		}
	}
	return false
}

func (h *sectionHandler) Handle(ctx context.Context, r logger.Record) error {
	if len(h.attrs) > 0 {
		// With's attrs first, as a text handler's own With puts them.
		r.Attrs = append(h.attrs[:len(h.attrs):len(h.attrs)], r.Attrs...)
	}
	iface := ""
	for _, a := range r.Attrs {
		if a.Key == "interface" {
			iface, _ = a.Value.(string)
			break
		}
	}
	h.s.mu.Lock()
	defer h.s.mu.Unlock()
	sl := h.s.sections[iface]
	if sl == nil {
		if r.Level >= h.s.level {
			return h.s.out.Handle(ctx, r)
		}
		return nil
	}
	sl.write(ctx, r)
	if sl.show && r.Level >= sl.level {
		return h.s.out.Handle(ctx, r)
	}
	return nil
}

func (h *sectionHandler) WithAttrs(as []logger.Attr) logger.Handler {
	return &sectionHandler{s: h.s, attrs: append(append([]logger.Attr(nil), h.attrs...), as...)}
}

// debugHeader starts each debug log with the command and sqm's version,
// at trace level (stderr shows it only with verbosity 10).
func debugHeader(log *logger.Logger, qs []config.Queue, command string) {
	for _, q := range qs {
		if q.Enabled && q.DebugLogging {
			log.Log(context.Background(), levelTrace, "sqm "+command, "interface", q.Interface, "section", q.Name,
				"version", Version, "verbosity", q.Verbosity)
		}
	}
}
