package uci

import (
	"strings"
	"testing"
	"time"
)

// TestLargeInputsAreLinear guards against quadratic parsing (copying the
// rest of the file per line, as an early version did): that takes minutes
// here, linear parsing a fraction of a second (a few with -race on a busy
// machine), hence the generous bound.
func TestLargeInputsAreLinear(t *testing.T) {
	if testing.Short() {
		t.Skip("-short")
	}
	inputs := map[string]string{
		"many lines":    "config q a\n" + strings.Repeat("option v 1\n", 200000),
		"long value":    "config q a\noption v '" + strings.Repeat("x\n", 200000) + "'\n",
		"continuations": "config q a\noption v " + strings.Repeat("x\\\n", 200000) + "\n",
		"many sections": strings.Repeat("config q\n", 100000),
	}
	for name, in := range inputs {
		start := time.Now()
		if _, err := Parse("big", strings.NewReader(in)); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if d := time.Since(start); d > 15*time.Second {
			t.Errorf("%s: parsing %d bytes took %v", name, len(in), d)
		}
	}
}
