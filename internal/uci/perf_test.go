package uci

import (
	"strings"
	"testing"
	"time"
)

func TestLargeInputsAreLinear(t *testing.T) {
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
		if d := time.Since(start); d > 2*time.Second {
			t.Errorf("%s: parsing %d bytes took %v", name, len(in), d)
		}
	}
}
