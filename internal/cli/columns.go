package cli

import (
	"io"
	"strings"
	"unicode/utf8"
)

// columns lays out status's tables the way text/tabwriter does with
// padding 2, pad character ' ' and no other flags (AlignRight when right
// is set), for tables where every line has the same number of cells: each
// cell but a line's last is padded with spaces to its column's widest
// cell plus two. tabwriter costs the router build about 8 KB of code for
// what these few lines do; columns_test.go checks they print the same.
type columns struct {
	right bool
	rows  [][]string
}

// add takes one line, its cells separated by tabs (no newline).
func (c *columns) add(line string) { c.rows = append(c.rows, strings.Split(line, "\t")) }

// write prints the lines, each ended by a newline.
func (c *columns) write(w io.Writer) error {
	var width []int
	for _, r := range c.rows {
		for i, cell := range r[:len(r)-1] {
			if i == len(width) {
				width = append(width, 0)
			}
			width[i] = max(width[i], utf8.RuneCountInString(cell)+2)
		}
	}
	var b []byte
	for _, r := range c.rows {
		for i, cell := range r[:len(r)-1] {
			if !c.right {
				b = append(b, cell...)
			}
			for range width[i] - utf8.RuneCountInString(cell) { // (strings.Repeat: 1.5 KB on mipsle)
				b = append(b, ' ')
			}
			if c.right {
				b = append(b, cell...)
			}
		}
		b = append(append(b, r[len(r)-1]...), '\n')
	}
	_, err := w.Write(b)
	return err
}
