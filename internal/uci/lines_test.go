package uci

import (
	"regexp"
	"testing"
)

// The patterns lines.go matches by hand; regexp stays out of the binary
// but holds the hand-written matchers to the same answers here.
var (
	valueRE      = `(?:'[^']*'|"(?:[^"\\\n]|\\.)*"|\\[^\n]|[^\s'"#;\\])+`
	optionLineRE = regexp.MustCompile(`^([ \t]*(?:option|o)[ \t]+([A-Za-z0-9_]+)[ \t]+)(` + valueRE + `)([ \t]*(?:#.*)?)$`)
	configLineRE = regexp.MustCompile(`^[ \t]*(?:config|c)[ \t]+(?:` + valueRE + `)(?:[ \t]+(?:` + valueRE + `))?[ \t]*(?:#.*)?$`)
)

var lineShapes = []string{
	"", " ", "option", "option a", "option a b", "\toption a 'b c' # why", "o a b", "op a b", "optiona b",
	"option a 'b'\\''c'", `option a "b\"c"`, `option a "b\`, `option a "b\nc"`, "option a 'b", "option a b;c",
	"option a b c", "option a b #c", "option a b#c", "option a\tb\t", "option a-b c", "option _9 x", "option a \\x",
	"option a \\", "option a b\r", "option a b\v", "option a 'b\nc'", "option a b # x\ny", "  o  n  v  ",
	"config", "config a", "config a b", "config a b c", "c a", "c a 'b c'", "config a #x", "config a b#x",
	"config 'a' \"b\"", "config a ;", "configa b", "config\ta\tb\t# c", "option a ''", "option a \"\"",
	"option a \xff", "option \xff a", "config a\xff", "option a é", "option a b  # 'x", "list a b",
}

func checkLineShape(t *testing.T, s string) {
	t.Helper()
	m, ok := matchOption(s)
	want := optionLineRE.FindStringSubmatch(s)
	if ok != (want != nil) || ok && (m.prefix != want[1] || m.name != want[2] || m.value != want[3] || m.trail != want[4]) {
		t.Errorf("matchOption(%q) = %+v, %v; regexp %q", s, m, ok, want)
	}
	if got, want := isConfigLine(s), configLineRE.MatchString(s); got != want {
		t.Errorf("isConfigLine(%q) = %v, regexp %v", s, got, want)
	}
	if got, want := indent(s), regexp.MustCompile(`^[ \t]*`).FindString(s); got != want {
		t.Errorf("indent(%q) = %q, want %q", s, got, want)
	}
}

func TestLineShapesMatchRegexp(t *testing.T) {
	for _, s := range lineShapes {
		checkLineShape(t, s)
	}
}

func FuzzLineShapes(f *testing.F) {
	for _, s := range lineShapes {
		f.Add(s)
	}
	f.Fuzz(checkLineShape)
}
