package logger

import (
	"context"
	"encoding"
	"fmt"
	"io"
	"strconv"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"
)

// TextHandler writes each record as one line of key=value pairs, the
// line slog.TextHandler writes for the same record:
//
//	time=2026-12-01T23:30:00.123Z level=INFO msg="daemon started" pid=42
//
// Values are formatted as slog formats them in text: strings, errors and
// other values through fmt's %+v, quoted (Go syntax) when they would not
// read back as one token; numbers, bools and durations bare; times as
// RFC 3339 with milliseconds; a []byte always quoted; a value with
// MarshalText by its text. What it leaves out of slog's: groups,
// LogValuer, source positions, ReplaceAttr, and the reflection slog uses
// to treat named byte-slice types as []byte (they print through fmt).
type TextHandler struct {
	w   io.Writer
	mu  *sync.Mutex // shared by handlers made by WithAttrs: one writer, whole lines
	min Level
	pre []byte // the WithAttrs attrs, formatted, each with its leading space
}

// NewText returns a handler writing records at min or above to w.
func NewText(w io.Writer, min Level) *TextHandler {
	return &TextHandler{w: w, mu: new(sync.Mutex), min: min}
}

func (h *TextHandler) Enabled(_ context.Context, l Level) bool { return l >= h.min }

func (h *TextHandler) WithAttrs(as []Attr) Handler {
	if len(as) == 0 {
		return h
	}
	h2 := *h
	h2.pre = appendAttrs(append([]byte(nil), h.pre...), as)
	return &h2
}

func (h *TextHandler) Handle(_ context.Context, r Record) error {
	b := make([]byte, 0, 256)
	if !r.Time.IsZero() {
		b = append(b, "time="...)
		b = appendTime(b, r.Time)
		b = append(b, ' ')
	}
	b = append(b, "level="...)
	b = appendString(b, r.Level.String())
	b = append(b, " msg="...)
	b = appendString(b, r.Message)
	b = append(b, h.pre...)
	b = appendAttrs(b, r.Attrs)
	b = append(b, '\n')
	h.mu.Lock()
	defer h.mu.Unlock()
	_, err := h.w.Write(b)
	return err
}

func appendAttrs(b []byte, as []Attr) []byte {
	for _, a := range as {
		if a.Key == "" && a.Value == nil {
			continue // slog's empty Attr: elided
		}
		b = append(b, ' ')
		b = appendString(b, a.Key)
		b = append(b, '=')
		b = appendValue(b, a.Value)
	}
	return b
}

// appendValue follows slog's kinds: the types slog.AnyValue gives a kind
// of their own print bare; everything else is slog's KindAny.
func appendValue(b []byte, v any) []byte {
	switch v := v.(type) {
	case string:
		return appendString(b, v)
	case int:
		return strconv.AppendInt(b, int64(v), 10)
	case int8:
		return strconv.AppendInt(b, int64(v), 10)
	case int16:
		return strconv.AppendInt(b, int64(v), 10)
	case int32:
		return strconv.AppendInt(b, int64(v), 10)
	case int64:
		return strconv.AppendInt(b, v, 10)
	case uint:
		return strconv.AppendUint(b, uint64(v), 10)
	case uint8:
		return strconv.AppendUint(b, uint64(v), 10)
	case uint16:
		return strconv.AppendUint(b, uint64(v), 10)
	case uint32:
		return strconv.AppendUint(b, uint64(v), 10)
	case uint64:
		return strconv.AppendUint(b, v, 10)
	case uintptr:
		return strconv.AppendUint(b, uint64(v), 10)
	case float32:
		return strconv.AppendFloat(b, float64(v), 'g', -1, 64)
	case float64:
		return strconv.AppendFloat(b, v, 'g', -1, 64)
	case bool:
		return strconv.AppendBool(b, v)
	case time.Duration:
		return append(b, v.String()...)
	case time.Time:
		return appendTime(b, v)
	case encoding.TextMarshaler:
		text, err := v.MarshalText()
		if err != nil {
			return appendString(b, fmt.Sprintf("!ERROR:%v", err))
		}
		return appendString(b, string(text))
	case []byte:
		return strconv.AppendQuote(b, string(v))
	}
	return appendString(b, fmt.Sprintf("%+v", v))
}

// appendTime writes t in RFC 3339 to the millisecond, always three
// digits (the time= of every line lines up), cut rather than rounded.
func appendTime(b []byte, t time.Time) []byte {
	return t.AppendFormat(b, "2006-01-02T15:04:05.000Z07:00")
}

// appendString writes s bare when it reads back as one token of a line,
// and Go-quoted when not: when empty, or when it has a space, '=', '"', a
// control character, a non-printing or space rune, or bytes that are not
// UTF-8. Backslashes alone do not quote (slog's rule, which is JSON's
// set of characters safe in a string, plus space and '=').
func appendString(b []byte, s string) []byte {
	if needsQuote(s) {
		return strconv.AppendQuote(b, s)
	}
	return append(b, s...)
}

func needsQuote(s string) bool {
	if s == "" {
		return true
	}
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c < ' ' || c == ' ' || c == '=' || c == '"' {
				return true
			}
			i++
			continue
		}
		// strconv.IsPrint is unicode.IsPrint (its documented definition;
		// TestNeedsQuoteAllRunes checks) from strconv's compact tables, which
		// fmt links anyway: unicode's tables for it are 7 KB of data.
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError || unicode.IsSpace(r) || !strconv.IsPrint(r) {
			return true
		}
		i += n
	}
	return false
}
