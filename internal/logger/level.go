package logger

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Level orders records by importance. The values are log/slog's (Debug
// -4, Info 0, Warn 4, Error 8), so a level read from a config that once
// went to slog means the same, plus LevelTrace for sqm-scripts' TRACE
// verbosity, the netlink changes and debug-file headers that only a
// section's debug log wants.
type Level int

const (
	LevelTrace Level = -8
	LevelDebug Level = -4
	LevelInfo  Level = 0
	LevelWarn  Level = 4
	LevelError Level = 8
)

// String names the level as the text handler prints it: a base name, and
// the distance from it for levels between the named ones ("INFO+2"), as
// slog does; below Debug the base is TRACE (sqm-scripts' name) where slog
// would say DEBUG-4.
func (l Level) String() string {
	name, base := "ERROR", LevelError
	switch {
	case l < LevelDebug:
		name, base = "TRACE", LevelTrace
	case l < LevelInfo:
		name, base = "DEBUG", LevelDebug
	case l < LevelWarn:
		name, base = "INFO", LevelInfo
	case l < LevelError:
		name, base = "WARN", LevelWarn
	}
	if l == base {
		return name
	}
	return fmt.Sprintf("%s%+d", name, int(l-base))
}

// UnmarshalText reads a level the way slog.Level.UnmarshalText does, so
// the daemon's --log-level and log_level take the same words they did
// when the daemon logged through slog: debug, info, warn or error in any
// case, optionally followed by a signed offset ("warn-2"). TRACE is not
// accepted: it is a section's verbosity, not the daemon's.
func (l *Level) UnmarshalText(text []byte) error {
	s := string(text)
	name, offset := s, 0
	if i := strings.IndexAny(s, "+-"); i >= 0 {
		n, err := strconv.Atoi(s[i:])
		if err != nil {
			return fmt.Errorf("log level %q: offset %q is not a number", s, s[i:])
		}
		name, offset = s[:i], n
	}
	var base Level
	// ToUpper rather than EqualFold: slog accepts what upper-cases to a
	// name (e.g. a dotless ı), and so does this.
	switch strings.ToUpper(name) {
	case "DEBUG":
		base = LevelDebug
	case "INFO":
		base = LevelInfo
	case "WARN":
		base = LevelWarn
	case "ERROR":
		base = LevelError
	default:
		return fmt.Errorf("log level %q: %w", s, errUnknownLevel)
	}
	*l = base + Level(offset)
	return nil
}

var errUnknownLevel = errors.New("unknown name; use debug, info, warn or error")
