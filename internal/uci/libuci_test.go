package uci

import (
	"bufio"
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// The differential tests compare Parse with the real libuci. They work in
// two modes:
//
// Live, with SQM_LIBUCI set to a `uci` binary built from openwrt/uci
// (cli.c libuci.c file.c util.c delta.c parse.c with an empty
// uci_config.h; no libubox needed), e.g.
//
//	SQM_LIBUCI=/tmp/libuci/uci go test ./internal/uci -run LibUCI
//	SQM_LIBUCI=/tmp/libuci/uci go test ./internal/uci -run XXX -fuzz FuzzLibUCI -fuzztime 60s
//
// Recorded, always: testdata/differential/libuci.golden holds what that
// binary answered (exit status, export output or error message) for every
// input of TestLibUCIDifferential and TestLibUCIRandom, and
// TestLibUCIGolden checks Parse against those answers, so `go test` and
// CI compare with libuci without its sources. With SQM_LIBUCI set,
// TestLibUCIGolden also checks that the recording is still what the binary
// says, and `-update` rewrites it (SQM_LIBUCI_SOURCE names the uci version
// for the file's header). The recording is data produced by running
// libuci, not its code.
func libuci(t testing.TB) string {
	t.Helper()
	bin := os.Getenv("SQM_LIBUCI")
	if bin == "" {
		t.Skip("set SQM_LIBUCI to a uci binary built from openwrt/uci to compare with libuci live (TestLibUCIGolden compares with its recorded answers)")
	}
	return bin
}

const libuciGolden = "testdata/differential/libuci.golden"

// libuciAnswer is what `uci -c DIR export t` did with one input file.
type libuciAnswer struct {
	OK     bool   // exit status 0
	Stdout string // the export, when OK
	Stderr string // the error message, when not
}

var libuciErrLine = regexp.MustCompile(`at line (\d+)`)

// askLibUCI runs the uci binary on in.
func askLibUCI(t testing.TB, bin, in string) libuciAnswer {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "t"), []byte(in), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-c", dir, "export", "t")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if err != nil {
		if _, ok := err.(*exec.ExitError); !ok {
			t.Fatalf("run %s: %v", bin, err)
		}
	}
	// uci prefixes its messages with argv[0]; name it uci so the recording
	// does not depend on where the binary was built.
	msg := strings.ReplaceAll(stderr.String(), bin+":", "uci:")
	return libuciAnswer{OK: err == nil, Stdout: stdout.String(), Stderr: msg}
}

// compareWithLibUCI parses in with both and reports any difference in
// success, exported content or error line.
func compareWithLibUCI(t testing.TB, bin, in string) {
	t.Helper()
	if skipLibUCI(in) {
		return
	}
	checkLibUCIAnswer(t, in, askLibUCI(t, bin, in))
}

// skipLibUCI reports inputs that are not compared: a documented
// difference, we reject NUL bytes.
func skipLibUCI(in string) bool { return strings.IndexByte(in, 0) >= 0 }

// checkLibUCIAnswer compares Parse with libuci's answer a for input in.
func checkLibUCIAnswer(t testing.TB, in string, a libuciAnswer) {
	t.Helper()
	f, err := Parse("t", strings.NewReader(in))
	switch {
	case !a.OK && err == nil:
		t.Fatalf("libuci rejects, we accept:\n%q\nlibuci: %s", in, a.Stderr)
	case a.OK && err != nil:
		t.Fatalf("libuci accepts, we reject:\n%q\nours: %v\nlibuci export:\n%s", in, err, a.Stdout)
	case !a.OK:
		m := libuciErrLine.FindStringSubmatch(a.Stderr)
		var e *Error
		if m != nil && asError(err, &e) {
			if n, _ := strconv.Atoi(m[1]); n != e.Line {
				t.Logf("error line differs for %q: libuci %s, ours %v", in, strings.TrimSpace(a.Stderr), err)
			}
		}
		return
	}
	for _, s := range f.Sections {
		if exportType(s.Type) != s.Type {
			return // we quote such types on export; uci writes them bare (and cannot read them back)
		}
	}
	var ours bytes.Buffer
	f.Package = "" // uci export names the file; compare the sections only
	if err := f.Export(&ours); err != nil {
		t.Fatal(err)
	}
	theirs := a.Stdout
	if i := strings.Index(theirs, "\n"); strings.HasPrefix(theirs, "package ") && i >= 0 {
		theirs = theirs[i+1:]
	}
	if ours.String() != theirs {
		t.Fatalf("export differs for %q:\n--- ours\n%s--- libuci\n%s", in, ours.String(), theirs)
	}
}

func libuciCorpus(t testing.TB) []string {
	var corpus []string
	files, _ := filepath.Glob("testdata/*.sqm")
	more, _ := filepath.Glob("testdata/fuzz/FuzzParse/*")
	for _, p := range append(files, more...) {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		s := string(b)
		if strings.HasPrefix(s, "go test fuzz v1\n") {
			v, err := strconv.Unquote(strings.TrimSuffix(strings.TrimPrefix(strings.TrimSpace(s[len("go test fuzz v1\n"):]), "string("), ")"))
			if err != nil {
				continue
			}
			s = v
		}
		corpus = append(corpus, s)
	}
	return corpus
}

// libuciInputs are the chosen inputs of TestLibUCIDifferential: the
// package's testdata and fuzz corpus, and the corners of UCI's syntax.
func libuciInputs(t testing.TB) []string {
	inputs := libuciCorpus(t)
	inputs = append(inputs,
		"config q a\noption v 'x'\"y\"z\nlist l 1\noption v 1;\n",
		"config q a\noption v abc\\\ndef\n",
		"config q a\noption v \"abc\\\ndef\"\n",
		"config q a\noption v 'x\ny'\n",
		"config q a\noption v x#y\n",
		"config q a; option v 1; option w 2\n",
		"config q a\noption v 1\noption v ''\n",
		"config q a\noption v 1\nlist v 2\n",
		"config q a\nlist v 1\nlist v 2\noption v 3\n",
		"config q a\noption v 1\nconfig q b\nconfig q a\noption w 2\n",
		"config q\noption v 1\nconfig q named\noption v 2\nconfig q\noption v 3\n",
		"config q ''\noption v 1\n",
		"config q a\r\n\toption v 1\r\n",
		"config q a\noption v 1",
		"\n\n\tconfig\tq\ta\n\n\t\toption\tv\t1\n\n",
		"package sqm\nconfig q a\noption v 1\n",
		"option a 1\n", "config q a\n\nopton a 1\n", "config q a\noption\n", "config q a\noption",
		"config ''\n", "config q a\noption '' 1\n", "config q a-b\n", "config q a\noption down.load 1\n",
		"package 'a b'\n", "config 'a b'\n", "config q a\noption v 1 2\n", "config q a b\n",
		"config q a\noption v 'abc\n\n", "config q a\noption v \"abc", "config q a\nconfig r a\n",
		"config q a\noption v 1;\n", "config q a\noption v 1 ;  \n", "config q a\nlist l ''\n",
		"config q a\n\toption v a\\ b\n", "config q a\noption v a\\\\b\n", "config q a\noption v \"a\\\\b\"\n",
		"config q a\n# comment\n  # indented comment\noption v 1 # c\n",
		"c q a\no v 1\nl w 2\np x\n",
		"config q a; option v 1; option w 2\n", "config q a\noption v 1; option w 2\n",
		"config q a\noption v 1 ; option w 2\n", "config q a ;option v 1\n", "config q;option v 1\n",
		"config q 'a'; option v 1\n", "config q a\noption v 'x';option w 2\n", "config q a\noption v x\\y;option w 2\n",
		"config q a\noption v \"\";option w 2\n", "config q a\noption v 1;;\n", "config q a\noption v 1; ;option w 2\n",
	)
	return inputs
}

func TestLibUCIDifferential(t *testing.T) {
	bin := libuci(t)
	for _, in := range libuciInputs(t) {
		compareWithLibUCI(t, bin, in)
	}
}

func FuzzLibUCI(f *testing.F) {
	for _, s := range libuciCorpus(f) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		compareWithLibUCI(t, libuci(t), in)
	})
}

// TestLibUCIRandom compares inputs built from UCI's special characters and
// keywords; a cheaper and more targeted search than FuzzLibUCI, which runs
// one uci process per input. SQM_LIBUCI_N sets the count (default 3000).
func TestLibUCIRandom(t *testing.T) {
	bin := libuci(t)
	n := 3000
	if v, err := strconv.Atoi(os.Getenv("SQM_LIBUCI_N")); err == nil {
		n = v
	}
	for _, in := range libuciRandomInputs(n) {
		compareWithLibUCI(t, bin, in)
	}
}

// libuciRandomInputs builds n inputs from UCI's special characters and
// keywords, the same n for the same count.
func libuciRandomInputs(n int) []string {
	pieces := []string{"config ", "option ", "list ", "c ", "o ", "l ", "package ", "q ", "a", "b", "1", "-",
		".", " ", " ", "\t", "\n", "\n", "\n\t", "'", "\"", "\\", ";", "#", "\r", "''", "config q a\n", "config q\n"}
	r := rand.New(rand.NewPCG(1, 2))
	out := make([]string, 0, n)
	for i := 0; i < n; i++ {
		var b strings.Builder
		if r.IntN(2) == 0 {
			b.WriteString("config q a\n")
		}
		for j := r.IntN(14); j >= 0; j-- {
			b.WriteString(pieces[r.IntN(len(pieces))])
		}
		out = append(out, b.String())
	}
	return out
}

// TestLibUCIGolden compares Parse with libuci's recorded answers for the
// inputs of TestLibUCIDifferential and 3000 of TestLibUCIRandom (see the
// comment at the top of this file). It needs no external source.
func TestLibUCIGolden(t *testing.T) {
	bin := os.Getenv("SQM_LIBUCI")
	if *update && bin != "" {
		writeLibUCIGolden(t, bin)
	}
	rec, err := readLibUCIGolden(libuciGolden)
	if err != nil {
		t.Fatal(err)
	}
	if len(rec) < 1000 {
		t.Fatalf("%s: %d records; the recording should have the ~3100 inputs of the differential tests", libuciGolden, len(rec))
	}
	accepted := 0
	for _, r := range rec {
		if bin != "" && !*update {
			if live := askLibUCI(t, bin, r.In); live != r.Answer {
				t.Fatalf("%s is stale for %q: recorded %+v, %s now answers %+v; rerun with -update", libuciGolden, r.In, r.Answer, bin, live)
			}
		}
		checkLibUCIAnswer(t, r.In, r.Answer)
		if r.Answer.OK {
			accepted++
		}
	}
	// Inputs added since the recording (new fuzz corpus files) are not
	// compared until someone with libuci rerecords; say so.
	have := map[string]bool{}
	for _, r := range rec {
		have[r.In] = true
	}
	var missing int
	for _, in := range libuciGoldenInputs(t) {
		if !have[in] {
			missing++
		}
	}
	if missing > 0 {
		t.Logf("%d current inputs have no recorded libuci answer: rerecord with SQM_LIBUCI=... go test -run TestLibUCIGolden -update", missing)
	}
	t.Logf("%d inputs compared with recorded libuci answers (%d accepted, %d rejected by libuci)", len(rec), accepted, len(rec)-accepted)
}

// libuciGoldenInputs are the inputs the recording holds.
func libuciGoldenInputs(t testing.TB) []string {
	var out []string
	for _, in := range append(libuciInputs(t), libuciRandomInputs(3000)...) {
		if !skipLibUCI(in) {
			out = append(out, in)
		}
	}
	return out
}

type libuciRecord struct {
	In     string
	Answer libuciAnswer
}

// The recording is line-based text: a record is an `in` line with the
// quoted input, then `ok` with the quoted export or `err` with the quoted
// message. Lines starting with # are comments.
func writeLibUCIGolden(t *testing.T, bin string) {
	var b strings.Builder
	src := os.Getenv("SQM_LIBUCI_SOURCE")
	if src == "" {
		src = "unnamed uci version (set SQM_LIBUCI_SOURCE)"
	}
	fmt.Fprintf(&b, "# libuci's answers (uci -c DIR export t) for the inputs of the differential tests.\n")
	fmt.Fprintf(&b, "# Recorded by: SQM_LIBUCI=uci go test ./internal/uci -run TestLibUCIGolden -update\n")
	fmt.Fprintf(&b, "# uci built from: %s\n", src)
	seen := map[string]bool{}
	for _, in := range libuciGoldenInputs(t) {
		if seen[in] {
			continue
		}
		seen[in] = true
		a := askLibUCI(t, bin, in)
		fmt.Fprintf(&b, "in %s\n", strconv.QuoteToASCII(in))
		if a.OK {
			fmt.Fprintf(&b, "ok %s\n", strconv.QuoteToASCII(a.Stdout))
		} else {
			fmt.Fprintf(&b, "err %s\n", strconv.QuoteToASCII(a.Stderr))
		}
	}
	if err := os.MkdirAll(filepath.Dir(libuciGolden), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(libuciGolden, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
}

func readLibUCIGolden(path string) ([]libuciRecord, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []libuciRecord
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	line := 0
	var cur *libuciRecord
	for sc.Scan() {
		line++
		text := sc.Text()
		if text == "" || strings.HasPrefix(text, "#") {
			continue
		}
		key, q, _ := strings.Cut(text, " ")
		v, err := strconv.Unquote(q)
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %s: bad quoted string: %v", path, line, key, err)
		}
		switch {
		case key == "in" && cur == nil:
			cur = &libuciRecord{In: v}
		case key == "ok" && cur != nil:
			cur.Answer = libuciAnswer{OK: true, Stdout: v}
		case key == "err" && cur != nil:
			cur.Answer = libuciAnswer{Stderr: v}
		default:
			return nil, fmt.Errorf("%s:%d: unexpected %q (want in, then ok or err)", path, line, key)
		}
		if key != "in" {
			out = append(out, *cur)
			cur = nil
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %v", path, err)
	}
	if cur != nil {
		return nil, fmt.Errorf("%s: ends after an in line without its answer", path)
	}
	return out, nil
}
