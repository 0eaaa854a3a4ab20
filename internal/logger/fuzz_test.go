package logger

import (
	"bytes"
	"context"
	"log/slog"
	"testing"
)

// FuzzQuoteMatchesSlog feeds one string as a message, a key and values
// of the string kinds (string, error, []byte) to both handlers.
func FuzzQuoteMatchesSlog(f *testing.F) {
	for _, s := range quoteCases {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		var a, b bytes.Buffer
		err := errString(s)
		NewText(&a, LevelInfo).Handle(context.Background(), Record{Time: when, Level: LevelInfo, Message: s,
			Attrs: []Attr{{s, s}, {"err", err}, {"b", []byte(s)}}})
		r := slog.NewRecord(when, slog.LevelInfo, s, 0)
		r.Add(s, s, "err", err, "b", []byte(s))
		slog.NewTextHandler(&b, nil).Handle(context.Background(), r)
		if a.String() != b.String() {
			t.Errorf("%q:\n sqm  %q\n slog %q", s, a.String(), b.String())
		}
	})
}

type errString string

func (e errString) Error() string { return string(e) }

// FuzzLevelMatchesSlog: --log-level takes what slog took.
func FuzzLevelMatchesSlog(f *testing.F) {
	for _, s := range []string{"debug", "INFO", "warn-2", "error+10", "info+", "trace", "", "ınfo", "info+-1", "warn+99999999999999999999"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		checkLevelAgainstSlog(t, s)
	})
}
