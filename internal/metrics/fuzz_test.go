package metrics

import (
	"bytes"
	"regexp"
	"testing"
	"unicode/utf8"

	"sqm/internal/kernel"
	"sqm/internal/plan"
)

// sampleLine is the text format's sample line: a name, optional labels
// with escaped values, one value.
var sampleLine = regexp.MustCompile(`^[a-zA-Z_:][a-zA-Z0-9_:]*(\{[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\n]|\\[\\"n])*"(?:,[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\n]|\\[\\"n])*")*\})? [^ ]+$`)

// FuzzLabelValues: whatever a config section, script or interface name
// holds (they come from a user-edited file and from state files), every
// line of the output is a comment or a well-formed sample.
func FuzzLabelValues(f *testing.F) {
	for _, s := range []string{"wan", `odd "name"\x`, "new\nline", "", "\\", "ünïcödé", "\xff\xfe", `a\"b`} {
		f.Add(s, s, s)
	}
	f.Fuzz(func(t *testing.T, iface, section, grade string) {
		snap := &Snapshot{
			Build: BuildInfo{Version: section, GoVersion: grade},
			Queues: []Queue{{Interface: iface, Section: section, Recipe: grade, Qdisc: iface, Directions: []Direction{{
				Name: "egress", Device: section, RateKbit: 1,
				Root: &kernel.QdiscStatus{Kind: grade, Handle: plan.MakeHandle(1, 0), Cake: &kernel.CakeStats{Tins: []kernel.CakeTin{{}}}},
			}}}},
			LastTest: &TestResult{Mode: iface, Server: section, Grade: grade},
		}
		var buf bytes.Buffer
		if err := NewCollector().Write(&buf, snap, nil); err != nil {
			t.Fatal(err)
		}
		out := buf.Bytes()
		if len(out) == 0 || out[len(out)-1] != '\n' {
			t.Fatalf("output does not end in a newline")
		}
		for _, line := range bytes.Split(out[:len(out)-1], []byte("\n")) {
			if bytes.HasPrefix(line, []byte("# HELP ")) || bytes.HasPrefix(line, []byte("# TYPE ")) {
				continue
			}
			if !utf8.Valid(line) {
				t.Fatalf("invalid UTF-8 in %q", line)
			}
			if !sampleLine.Match(line) {
				t.Fatalf("malformed sample line %q", line)
			}
		}
	})
}
