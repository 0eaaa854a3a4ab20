package main

import (
	"bufio"
	"fmt"
	"io"
	"regexp"
	"strings"
)

// counts is what one package's `go test -v` log says about its top-level
// tests and benchmarks. A test binary whose tests all call t.Skip exits 0
// like one whose tests passed, so the exit status alone cannot tell a run
// that proved something from one that proved nothing; these counts can.
type counts struct {
	Passed, Failed int
	// Skipped holds "TestName: reason" (the first line the test logged
	// before skipping, usually its t.Skip message).
	Skipped []string
	// BenchRan counts benchmarks that printed a result line; BenchSkipped
	// those that skipped.
	BenchRan, BenchSkipped int
}

// ran is the number of top-level tests that reported a result.
func (c counts) ran() int { return c.Passed + c.Failed + len(c.Skipped) }

func (c counts) String() string {
	s := fmt.Sprintf("%d ran: %d passed, %d failed, %d skipped", c.ran(), c.Passed, c.Failed, len(c.Skipped))
	if c.BenchRan+c.BenchSkipped > 0 {
		s += fmt.Sprintf("; %d benchmarks ran, %d skipped", c.BenchRan, c.BenchSkipped)
	}
	return s
}

// verdict is empty if the log shows the VM tests really ran, or says why
// not. wantTests is false when only benchmarks were selected; benches is
// the number of benchmarks selected.
func (c counts) verdict(wantTests bool, benches int) string {
	switch {
	case wantTests && c.ran() == 0:
		return "no VM test ran"
	case wantTests && c.Passed == 0 && c.Failed == 0:
		return fmt.Sprintf("all %d VM tests skipped inside the VM: nothing was tested", len(c.Skipped))
	case benches > 0 && c.BenchRan < benches:
		return fmt.Sprintf("%d of %d selected benchmarks ran", c.BenchRan, benches)
	}
	return ""
}

var (
	// resultRe matches a top-level result line; subtests are indented.
	// Benchmarks print "--- SKIP: BenchmarkX" without a duration.
	resultRe = regexp.MustCompile(`^--- (PASS|FAIL|SKIP): ((?:Test|Benchmark)\S*)`)
	// benchLineRe matches a benchmark's result: name, -GOMAXPROCS suffix,
	// iterations, then a measurement.
	benchLineRe = regexp.MustCompile(`^Benchmark\S*\s+\d+\s+[0-9.]+ \S+/op`)
)

// parseLog reads `go test -v` output (tests and benchmarks). With -v a
// test's log lines stream before its result line, after a "=== RUN"
// (or NAME/CONT) line naming it; a benchmark's name stands alone on a line.
func parseLog(r io.Reader) counts {
	var c counts
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	current := ""
	lastLog := map[string]string{} // test name -> its last log line
	for sc.Scan() {
		line := sc.Text()
		if m := headerRe.FindStringSubmatch(line); m != nil {
			current = m[1]
			continue
		}
		if benchNameRe.MatchString(line) {
			current = line
			continue
		}
		if m := logLineRe.FindStringSubmatch(line); m != nil && current != "" {
			lastLog[current] = m[1]
			continue
		}
		if benchLineRe.MatchString(line) {
			c.BenchRan++
			continue
		}
		m := resultRe.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		bench := strings.HasPrefix(m[2], "Benchmark")
		switch {
		case bench && m[1] == "SKIP":
			c.BenchSkipped++
		case bench:
			// A failed benchmark makes the binary exit non-zero; one that
			// ran is counted by its result line.
		case m[1] == "PASS":
			c.Passed++
		case m[1] == "FAIL":
			c.Failed++
		case m[1] == "SKIP":
			name := m[2]
			if why := lastLog[name]; why != "" {
				name += ": " + why
			}
			c.Skipped = append(c.Skipped, name)
		}
	}
	return c
}

var (
	headerRe    = regexp.MustCompile(`^=== (?:RUN|NAME|CONT|PAUSE)\s+(\S+)`)
	benchNameRe = regexp.MustCompile(`^Benchmark\S*$`)
	logLineRe   = regexp.MustCompile(`^\s+(\S+\.go:\d+: .*)$`)
)
