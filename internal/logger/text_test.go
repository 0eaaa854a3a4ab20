package logger

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/netip"
	"os"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"
)

var when = time.Date(2026, 12, 1, 23, 30, 5, 123987654, time.UTC)

// The lines sqm's users and tests know, written out: the format itself,
// not only agreement with slog.
func TestTextGolden(t *testing.T) {
	cest := time.FixedZone("CEST", 2*3600)
	tests := []struct {
		name string
		r    Record
		with []Attr
		want string
	}{
		{"plain", Record{Time: when, Level: LevelInfo, Message: "daemon started",
			Attrs: []Attr{{"config", "/etc/config/sqm"}, {"sections", 2}, {"pid", 4242}}},
			nil, `time=2026-12-01T23:30:05.123Z level=INFO msg="daemon started" config=/etc/config/sqm sections=2 pid=4242` + "\n"},
		{"no time", Record{Level: LevelWarn, Message: "x"}, nil, "level=WARN msg=x\n"},
		{"trace", Record{Level: LevelTrace, Message: "sqm start"}, nil, "level=TRACE msg=\"sqm start\"\n"},
		{"zone and ms padding", Record{Time: time.Date(2026, 1, 2, 3, 4, 5, 0, cest), Level: LevelError, Message: "m"},
			nil, "time=2026-01-02T03:04:05.000+02:00 level=ERROR msg=m\n"},
		{"error value", Record{Level: LevelError, Message: "link watching failed",
			Attrs: []Attr{{"err", fmt.Errorf("netlink: %w", errors.New(`bad "ifname"`))}}},
			nil, `level=ERROR msg="link watching failed" err="netlink: bad \"ifname\""` + "\n"},
		{"kinds", Record{Level: LevelDebug, Message: "k", Attrs: []Attr{
			{"took", 1500 * time.Millisecond}, {"ok", true}, {"f", 2.5}, {"big", 1e21}, {"neg", -3},
			{"empty", ""}, {"eq", "a=b"}, {"nl", "a\nb"}, {"bs", `C:\x`}, {"bad", "\xff"}, {"bytes", []byte("ab")},
			{"nil", nil}, {"addr", netip.MustParseAddr("192.0.2.1")}}},
			nil, `level=DEBUG msg=k took=1.5s ok=true f=2.5 big=1e+21 neg=-3 empty="" eq="a=b" nl="a\nb" bs=C:\x bad="\xff" bytes="ab" nil=<nil> addr=192.0.2.1` + "\n"},
		{"with first", Record{Level: LevelInfo, Message: "m", Attrs: []Attr{{"b", 2}}},
			[]Attr{{"a", 1}}, "level=INFO msg=m a=1 b=2\n"},
		{"quoted key", Record{Level: LevelInfo, Message: "m", Attrs: []Attr{{"a key", 1}, {"", 2}, {"", nil}}},
			nil, `level=INFO msg=m "a key"=1 ""=2` + "\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			var h Handler = NewText(&buf, LevelTrace)
			h = h.WithAttrs(tt.with)
			if err := h.Handle(context.Background(), tt.r); err != nil {
				t.Fatal(err)
			}
			if buf.String() != tt.want {
				t.Errorf("got  %q\nwant %q", buf.String(), tt.want)
			}
		})
	}
}

// zeroTime makes a handler's lines comparable: each logger stamps its
// records with its own time.Now.
type zeroTime struct{ h slog.Handler }

func (z zeroTime) Enabled(ctx context.Context, l slog.Level) bool { return z.h.Enabled(ctx, l) }
func (z zeroTime) Handle(ctx context.Context, r slog.Record) error {
	r.Time = time.Time{}
	return z.h.Handle(ctx, r)
}
func (z zeroTime) WithAttrs(as []slog.Attr) slog.Handler { return zeroTime{z.h.WithAttrs(as)} }
func (z zeroTime) WithGroup(g string) slog.Handler       { return zeroTime{z.h.WithGroup(g)} }

type zeroTimeOwn struct{ h Handler }

func (z zeroTimeOwn) Enabled(ctx context.Context, l Level) bool { return z.h.Enabled(ctx, l) }
func (z zeroTimeOwn) Handle(ctx context.Context, r Record) error {
	r.Time = time.Time{}
	return z.h.Handle(ctx, r)
}
func (z zeroTimeOwn) WithAttrs(as []Attr) Handler { return zeroTimeOwn{z.h.WithAttrs(as)} }

// slogLevelNames makes slog print levels under sqm's names (TRACE below
// Debug), as internal/cli did with ReplaceAttr.
func slogLevelNames(groups []string, a slog.Attr) slog.Attr {
	if a.Key == slog.LevelKey && len(groups) == 0 {
		if l, ok := a.Value.Any().(slog.Level); ok {
			a.Value = slog.StringValue(Level(l).String())
		}
	}
	return a
}

type stringer struct{ n int }

func (s stringer) String() string { return fmt.Sprintf("stringer %d", s.n) }

type action string

type badText struct{}

func (badText) MarshalText() ([]byte, error) { return nil, errors.New("no text") }

type wrapErr struct{ err error }

func (w *wrapErr) Error() string { return "wrapped: " + w.err.Error() }
func (w *wrapErr) Unwrap() error { return w.err }

// quoteCases are strings on either side of the quoting rule.
var quoteCases = []string{
	"", "plain", "with space", `say "hi"`, "a=b", "=", "line\nnext", "tab\there", "cr\r",
	`back\slash`, "\x00", "\x7f", "<&>", "ünïcødé", "日本", "\u00a0nbsp", "\u2028", "\u200b",
	"\xff", "ok\xc3", "\xed\xa0\x80", "emoji🙂", "\ufffd", "{json:1}", "-", "'", "`",
}

// The attribute kinds sqm logs (and a few it might), through both
// loggers from the call down, With included.
func TestTextMatchesSlog(t *testing.T) {
	var sqmLine, slogLine bytes.Buffer
	own := New(zeroTimeOwn{NewText(&sqmLine, LevelTrace)})
	ref := slog.New(zeroTime{slog.NewTextHandler(&slogLine, &slog.HandlerOptions{Level: slog.Level(LevelTrace), ReplaceAttr: slogLevelNames})})
	cases := [][]any{
		{"interface", "eth0", "section", "wan", "version", "v1.2.3", "verbosity", 10},
		{"err", errors.New("netlink: operation not permitted")},
		{"err", fmt.Errorf("open %q: %w", "/tmp/a b", os.ErrNotExist)},
		{"err", &wrapErr{errors.New("x=y")}},
		{"err", error(nil)},
		{"took", 1234567 * time.Microsecond, "zero", time.Duration(0), "neg", -time.Second},
		{"n", 0, "i8", int8(-8), "i16", int16(300), "i32", int32(-7), "i64", int64(math.MinInt64)},
		{"u", uint(7), "u8", uint8(255), "u16", uint16(9), "u32", uint32(1 << 31), "u64", uint64(math.MaxUint64), "up", uintptr(12)},
		{"f", 0.1, "f32", float32(0.1), "nan", math.NaN(), "inf", math.Inf(1), "ninf", math.Inf(-1), "negz", math.Copysign(0, -1), "e", 1e-7, "big", 123456789012345678.0},
		{"t", true, "f", false},
		{"at", when, "local", when.In(time.FixedZone("", -5*3600-30*60))},
		{"bytes", []byte("a b\x00"), "nilbytes", []byte(nil)},
		{"addr", netip.MustParseAddr("2001:db8::1"), "prefix", netip.MustParsePrefix("10.0.0.0/8"), "bad", badText{}},
		{"action", action("applied"), "quoted", action("not applied"), "s", stringer{3}, "struct", struct {
			A int
			B string
		}{1, "x y"}},
		{"map", map[bool]string{true: "removed"}[true], "slice", []string{"a", "b"}, "ptr", (*int)(nil), "nil", nil},
		{"lonely"},
		{42, "x"},
		{"k", 1, slog.Attr{}, "tail"},
		{"", "empty key"},
	}
	for _, s := range quoteCases {
		cases = append(cases, []any{"v", s}, []any{s, "key"})
	}
	levels := []Level{LevelTrace, LevelDebug, LevelInfo, LevelWarn, LevelError, LevelInfo + 2, LevelError + 3, LevelDebug - 1}
	for i, args := range cases {
		level := levels[i%len(levels)]
		msg := quoteCases[i%len(quoteCases)]
		sqmLine.Reset()
		slogLine.Reset()
		// slog.Attr is slog's; give ours the same thing as one of ours.
		ownArgs := make([]any, len(args))
		for j, a := range args {
			if sa, ok := a.(slog.Attr); ok {
				a = Attr{sa.Key, sa.Value.Any()}
			}
			ownArgs[j] = a
		}
		own.Log(context.Background(), level, msg, ownArgs...)
		ref.Log(context.Background(), slog.Level(level), msg, args...)
		if sqmLine.String() != slogLine.String() {
			t.Errorf("case %d %v:\n sqm  %q\n slog %q", i, args, sqmLine.String(), slogLine.String())
		}
		// The same attrs given once to With, twice nested.
		sqmLine.Reset()
		slogLine.Reset()
		own.With(ownArgs...).With("n", i).Warn(msg, "last", true)
		ref.With(args...).With("n", i).Warn(msg, "last", true)
		if sqmLine.String() != slogLine.String() {
			t.Errorf("case %d With %v:\n sqm  %q\n slog %q", i, args, sqmLine.String(), slogLine.String())
		}
	}
}

// Time stamps (cut to the millisecond, three digits always) over
// nanosecond edges and zones.
func TestTimeMatchesSlog(t *testing.T) {
	zones := []*time.Location{time.UTC, time.FixedZone("", 3600), time.FixedZone("", -(9*3600 + 30*60))}
	nanos := []int{0, 1, 999999, 1000000, 999999999, 123456789, 500000, 100000}
	for _, z := range zones {
		for _, ns := range nanos {
			at := time.Date(2026, 3, 29, 1, 59, 59, ns, z)
			var a, b bytes.Buffer
			NewText(&a, LevelInfo).Handle(context.Background(), Record{Time: at, Level: LevelInfo, Message: "m", Attrs: []Attr{{"at", at}}})
			r := slog.NewRecord(at, slog.LevelInfo, "m", 0)
			r.AddAttrs(slog.Time("at", at))
			slog.NewTextHandler(&b, nil).Handle(context.Background(), r)
			if a.String() != b.String() {
				t.Errorf("%v:\n sqm  %q\n slog %q", at, a.String(), b.String())
			}
		}
	}
}

func TestLevelString(t *testing.T) {
	for l, want := range map[Level]string{
		LevelTrace: "TRACE", LevelTrace - 1: "TRACE-1", LevelTrace + 2: "TRACE+2", LevelDebug: "DEBUG",
		LevelDebug + 1: "DEBUG+1", LevelInfo: "INFO", LevelInfo + 3: "INFO+3", LevelWarn: "WARN",
		LevelError: "ERROR", LevelError + 10: "ERROR+10",
	} {
		if got := l.String(); got != want {
			t.Errorf("Level(%d) = %q, want %q", int(l), got, want)
		}
		// From Debug up the names are slog's.
		if l >= LevelDebug {
			if s := slog.Level(l).String(); s != want {
				t.Errorf("slog names Level(%d) %q, sqm %q", int(l), s, want)
			}
		}
	}
}

func TestLevelUnmarshalText(t *testing.T) {
	tests := []struct {
		in   string
		want Level
		err  string
	}{
		{"debug", LevelDebug, ""}, {"INFO", LevelInfo, ""}, {"Warn", LevelWarn, ""}, {"error", LevelError, ""},
		{"warn-2", LevelWarn - 2, ""}, {"info+1", LevelInfo + 1, ""}, {"error+0", LevelError, ""},
		{"", 0, `log level "": unknown name; use debug, info, warn or error`},
		{"trace", 0, `log level "trace": unknown name; use debug, info, warn or error`},
		{"warning", 0, "unknown name"}, {" info", 0, "unknown name"},
		{"info+", 0, `log level "info+": offset "+" is not a number`}, {"info+x", 0, "not a number"},
		{"info-1-1", 0, "not a number"},
	}
	for _, tt := range tests {
		var l Level = 99
		err := l.UnmarshalText([]byte(tt.in))
		switch {
		case tt.err == "" && err != nil:
			t.Errorf("%q: %v", tt.in, err)
		case tt.err == "" && l != tt.want:
			t.Errorf("%q = %v, want %v", tt.in, l, tt.want)
		case tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)):
			t.Errorf("%q: error %v, want one with %q", tt.in, err, tt.err)
		case tt.err != "" && l != 99:
			t.Errorf("%q: level changed to %v on error", tt.in, l)
		}
		checkLevelAgainstSlog(t, tt.in)
	}
}

func checkLevelAgainstSlog(t *testing.T, s string) {
	t.Helper()
	var own Level
	var ref slog.Level
	oerr, rerr := own.UnmarshalText([]byte(s)), ref.UnmarshalText([]byte(s))
	if (oerr == nil) != (rerr == nil) || (oerr == nil && int(own) != int(ref)) {
		t.Errorf("%q: sqm %v (%v), slog %v (%v)", s, own, oerr, ref, rerr)
	}
}

func TestLoggerLevelsAndBadKeys(t *testing.T) {
	var buf bytes.Buffer
	l := New(zeroTimeOwn{NewText(&buf, LevelInfo)})
	l.Debug("hidden")
	l.Info("shown", "k")
	l.Warn("w", 1, 2)
	l.Error("e", Attr{"a", "b"})
	want := "level=INFO msg=shown !BADKEY=k\nlevel=WARN msg=w !BADKEY=1 !BADKEY=2\nlevel=ERROR msg=e a=b\n"
	if buf.String() != want {
		t.Errorf("got %q\nwant %q", buf.String(), want)
	}
	if l.Enabled(context.Background(), LevelDebug) || !l.Enabled(context.Background(), LevelInfo) {
		t.Error("Enabled does not follow the handler's level")
	}
}

func TestNilAndDiscard(t *testing.T) {
	var l *Logger
	l.Info("nothing", "k", 1) // must not panic
	if l.With("a", 1) != nil || l.Enabled(context.Background(), LevelError) {
		t.Error("a nil logger is not a discarding one")
	}
	if New(nil).Handler() != Discard || New(Discard).Enabled(context.Background(), LevelError) {
		t.Error("Discard wants records")
	}
	fmt.Fprintln(New(nil).Writer(LevelError), "dropped")
}

func TestWriter(t *testing.T) {
	var buf bytes.Buffer
	l := New(zeroTimeOwn{NewText(&buf, LevelDebug)})
	w := l.Writer(LevelWarn)
	io.WriteString(w, "config: line 3: unknown option\n\n  second line  \n")
	io.WriteString(w, "http: TLS handshake error from 192.0.2.1:5555: EOF\n")
	io.WriteString(l.Writer(LevelTrace), "not wanted\n")
	want := `level=WARN msg="config: line 3: unknown option"` + "\n" +
		`level=WARN msg="second line"` + "\n" +
		`level=WARN msg="http: TLS handshake error from 192.0.2.1:5555: EOF"` + "\n"
	if buf.String() != want {
		t.Errorf("got %q\nwant %q", buf.String(), want)
	}
}

// Lines from many goroutines through handlers that share one writer
// come out whole (go test -race checks the sharing).
func TestConcurrentLinesWhole(t *testing.T) {
	var buf bytes.Buffer
	base := NewText(&buf, LevelInfo)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l := New(base).With("g", g)
			for i := range 50 {
				l.Info("line", "i", i)
			}
		}()
	}
	wg.Wait()
	lines := strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n")
	if len(lines) != 400 {
		t.Fatalf("%d lines, want 400", len(lines))
	}
	for _, ln := range lines {
		if !strings.Contains(ln, " level=INFO msg=line g=") || strings.Count(ln, "time=") != 1 {
			t.Fatalf("torn line %q", ln)
		}
	}
}

// TestNeedsQuoteAllRunes: needsQuote decides on every non-ASCII rune as
// slog's text handler does, by unicode.IsSpace and unicode.IsPrint (it
// asks strconv.IsPrint, whose tables are smaller).
func TestNeedsQuoteAllRunes(t *testing.T) {
	for r := rune(utf8.RuneSelf); r <= unicode.MaxRune; r++ {
		if !utf8.ValidRune(r) || r == utf8.RuneError {
			continue
		}
		want := unicode.IsSpace(r) || !unicode.IsPrint(r)
		if got := needsQuote("a" + string(r)); got != want {
			t.Errorf("needsQuote(%q) = %v, want %v", "a"+string(r), got, want)
		}
	}
}
