package bloat

import (
	"fmt"
	"testing"
)

// TestNoteOnce checks that a repeated note (every marked stream's dial on
// an OS that cannot mark DSCP) is kept and logged once.
func TestNoteOnce(t *testing.T) {
	var logged []string
	c := &client{o: Options{Logf: func(f string, a ...any) { logged = append(logged, fmt.Sprintf(f, a...)) }}}
	for _, d := range []int{8, 8, 46, 8} {
		c.note("cannot mark traffic with DSCP %d: %v", d, errNoteTest)
	}
	want := []string{"cannot mark traffic with DSCP 8: no marks here", "cannot mark traffic with DSCP 46: no marks here"}
	if fmt.Sprint(c.notes) != fmt.Sprint(want) || fmt.Sprint(logged) != fmt.Sprint(want) {
		t.Errorf("notes %q, logged %q; want both %q", c.notes, logged, want)
	}
}

var errNoteTest = fmt.Errorf("no marks here")
