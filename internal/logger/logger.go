// Package logger is the part of log/slog's model sqm uses: leveled
// records of a message and key-value attributes, handlers that decide
// where they go, and a text handler whose lines are slog.TextHandler's.
//
// It exists for size: slog, with the JSON handler it always links (and
// with it encoding/json), cost the router build about 90 KB on mipsle,
// this package about 20 KB, for a daemon that only ever writes text
// lines. The output format is kept byte for byte because people read the
// daemon's log and tests and tools grep it (a section's
// <iface>.start-sqm.log).
package logger

import (
	"context"
	"io"
	"strings"
	"time"
)

// Attr is one key-value pair of a record. Value is kept as given and
// formatted only by the handler that prints it, so a record no handler
// wants costs no formatting.
type Attr struct {
	Key   string
	Value any
}

// Record is one log event. Attrs are in the order they were given; a
// handler that adds attrs must copy the slice first (it may be shared
// with the caller's other handlers).
type Record struct {
	Time    time.Time
	Level   Level
	Message string
	Attrs   []Attr
}

// Handler decides whether a level is wanted and where records go. The
// context is slog's: passed through for handlers that want one, unused
// by sqm's.
type Handler interface {
	Enabled(ctx context.Context, level Level) bool
	Handle(ctx context.Context, r Record) error
	// WithAttrs returns a handler that adds attrs to every record; the
	// receiver is left as it was.
	WithAttrs(attrs []Attr) Handler
}

// Discard is a handler that wants nothing, for components run without a
// log (tests, library use).
var Discard Handler = discard{}

type discard struct{}

func (discard) Enabled(context.Context, Level) bool  { return false }
func (discard) Handle(context.Context, Record) error { return nil }
func (discard) WithAttrs([]Attr) Handler             { return discard{} }

// Logger turns calls with alternating keys and values into records for
// its handler. A nil *Logger discards, so a component's Log field may be
// left unset.
type Logger struct {
	h Handler
}

// New returns a logger over h; a nil h discards.
func New(h Handler) *Logger {
	if h == nil {
		h = Discard
	}
	return &Logger{h: h}
}

// Handler returns the logger's handler.
func (l *Logger) Handler() Handler {
	if l == nil {
		return Discard
	}
	return l.h
}

// With returns a logger whose records carry args (as for Info) after the
// time, level and message and before the call's own attrs.
func (l *Logger) With(args ...any) *Logger {
	if l == nil || len(args) == 0 {
		return l
	}
	return &Logger{h: l.h.WithAttrs(attrs(args))}
}

// Enabled reports whether a record at level would be handled, for
// callers that would spend effort building its attrs.
func (l *Logger) Enabled(ctx context.Context, level Level) bool {
	if l == nil {
		return false
	}
	if ctx == nil {
		ctx = context.Background()
	}
	return l.h.Enabled(ctx, level)
}

// Debug, Info, Warn and Error are Log at their level.
func (l *Logger) Debug(msg string, args ...any) {
	l.Log(context.Background(), LevelDebug, msg, args...)
}

func (l *Logger) Info(msg string, args ...any) {
	l.Log(context.Background(), LevelInfo, msg, args...)
}

func (l *Logger) Warn(msg string, args ...any) {
	l.Log(context.Background(), LevelWarn, msg, args...)
}

func (l *Logger) Error(msg string, args ...any) {
	l.Log(context.Background(), LevelError, msg, args...)
}

// Log records msg at level with args: alternating string keys and
// values, or Attrs. As with slog, a key without a value, or a value where
// a key belongs, is kept under the key "!BADKEY" rather than dropped, so
// a mistake in a call shows in its line.
func (l *Logger) Log(ctx context.Context, level Level, msg string, args ...any) {
	if ctx == nil {
		ctx = context.Background()
	}
	if !l.Enabled(ctx, level) {
		return
	}
	_ = l.h.Handle(ctx, Record{Time: time.Now(), Level: level, Message: msg, Attrs: attrs(args)})
}

const badKey = "!BADKEY"

func attrs(args []any) []Attr {
	if len(args) == 0 {
		return nil
	}
	as := make([]Attr, 0, (len(args)+1)/2)
	for len(args) > 0 {
		switch x := args[0].(type) {
		case Attr:
			as = append(as, x)
			args = args[1:]
		case string:
			if len(args) == 1 {
				as = append(as, Attr{badKey, x})
				args = nil
				break
			}
			as = append(as, Attr{x, args[1]})
			args = args[2:]
		default:
			as = append(as, Attr{badKey, x})
			args = args[1:]
		}
	}
	return as
}

// Writer returns a writer whose lines become records at level, for code
// that reports through an io.Writer (the config warnings printed by a
// loader shared with the commands). Each Write's lines are records of their own, surrounding
// space trimmed, blank ones dropped, so the log stays one line per
// event; a line split across two Writes is two records.
func (l *Logger) Writer(level Level) io.Writer { return lineWriter{l, level} }

type lineWriter struct {
	l     *Logger
	level Level
}

func (w lineWriter) Write(p []byte) (int, error) {
	if !w.l.Enabled(context.Background(), w.level) {
		return len(p), nil
	}
	for _, line := range strings.Split(string(p), "\n") {
		if line = strings.TrimSpace(line); line != "" {
			w.l.Log(context.Background(), w.level, line)
		}
	}
	return len(p), nil
}
