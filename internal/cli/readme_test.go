package cli

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// TestREADMELabTable: the README shows a real `sqm lab` run. Its numbers
// are that run's, but its rows must be the ones the lab prints today
// (internal/lab's golden table), so the README cannot drift back into a
// table the command never printed.
func TestREADMELabTable(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	i := strings.Index(string(readme), "printed, verbatim:\n\n```\n")
	if i < 0 {
		t.Fatal("README has no verbatim lab output")
	}
	block := string(readme)[i+len("printed, verbatim:\n\n```\n"):]
	block = block[:strings.Index(block, "```")]
	golden, err := os.ReadFile("../lab/testdata/table.golden")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := tableRows(block), tableRows(string(golden)); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("README's lab table rows differ from what the lab prints:\nREADME:\n%s\nlab:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	for _, prefix := range []string{"Emulated link: ", "Shaping (after): ", "Throughput given up for it: "} {
		if !strings.Contains(block, "\n"+prefix) && !strings.HasPrefix(block, prefix) {
			t.Errorf("README's lab output lacks the %q line", prefix)
		}
	}
}

// tableRows returns the row labels of the side-by-side table: from the
// "without SQM" header to the blank line after it.
func tableRows(s string) []string {
	label := regexp.MustCompile(`^(\s*\S.*?)\s{2,}\S`)
	var rows []string
	in := false
	for _, l := range strings.Split(s, "\n") {
		switch {
		case strings.Contains(l, "without SQM") && strings.Contains(l, "with SQM"):
			in = true
		case in && strings.TrimSpace(l) == "":
			return rows
		case in:
			if m := label.FindStringSubmatch(l); m != nil {
				rows = append(rows, m[1])
			} else {
				rows = append(rows, strings.TrimRight(l, " "))
			}
		}
	}
	return rows
}
