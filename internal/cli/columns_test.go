package cli

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"text/tabwriter"
)

// TestColumnsAsTabwriter: columns prints status's kind of table (every
// line with the same number of cells) byte for byte as text/tabwriter
// with the flags status used, left and right aligned.
func TestColumnsAsTabwriter(t *testing.T) {
	tables := [][]string{
		{"a"},
		{""},
		{"a\tb", "ccc\td"},
		{"  \tkind\thandle\tparent\tbytes\tecn marks", "  qdisc\tcake\t8001:\troot\t1.2MB\t0", "  class\thtb\t1:11\t1:1\t0B\t12345"},
		{"    \tBulk\tBest Effort\tVoice\t", "    thresh\t1.2Mbit\t20Mbit\t5Mbit\t", "    pk delay\t1ms\t12.5ms\t0s\t"},
		{"\t\t", "x\t\t", "\tyy\t"},
		{"héllo\twörld", "ab\tc"},
		{"trailing\tcell  ", "a\t"},
	}
	for _, lines := range tables {
		for _, right := range []bool{false, true} {
			var flags uint
			if right {
				flags = tabwriter.AlignRight
			}
			var want bytes.Buffer
			tw := tabwriter.NewWriter(&want, 0, 0, 2, ' ', flags)
			c := columns{right: right}
			for _, l := range lines {
				fmt.Fprintln(tw, l)
				c.add(l)
			}
			tw.Flush()
			var got bytes.Buffer
			if err := c.write(&got); err != nil {
				t.Fatal(err)
			}
			if got.String() != want.String() {
				t.Errorf("lines %q, right %v:\ngot\n%s\nwant (tabwriter)\n%s", lines, right,
					strings.ReplaceAll(got.String(), " ", "."), strings.ReplaceAll(want.String(), " ", "."))
			}
		}
	}
}
