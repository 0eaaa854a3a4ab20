package uci

import (
	"bytes"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// The differential tests compare Parse with the real libuci: set
// SQM_LIBUCI to a `uci` binary built from openwrt/uci (cli.c libuci.c
// file.c util.c delta.c parse.c; no libubox needed) to run them, e.g.
//
//	SQM_LIBUCI=/tmp/libuci/uci go test ./internal/uci -run LibUCI
//	SQM_LIBUCI=/tmp/libuci/uci go test ./internal/uci -run XXX -fuzz FuzzLibUCI -fuzztime 60s
//
// Without it they are skipped: the binary is not part of the build.
func libuci(t testing.TB) string {
	t.Helper()
	bin := os.Getenv("SQM_LIBUCI")
	if bin == "" {
		t.Skip("set SQM_LIBUCI to a uci binary built from openwrt/uci to compare with libuci")
	}
	return bin
}

var libuciErrLine = regexp.MustCompile(`at line (\d+)`)

// compareWithLibUCI parses in with both and reports any difference in
// success, exported content or error line.
func compareWithLibUCI(t testing.TB, bin, in string) {
	t.Helper()
	if strings.IndexByte(in, 0) >= 0 {
		return // documented difference: we reject NUL bytes
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "t"), []byte(in), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-c", dir, "export", "t")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	runErr := cmd.Run()

	f, err := Parse("t", strings.NewReader(in))
	switch {
	case runErr != nil && err == nil:
		t.Fatalf("libuci rejects, we accept:\n%q\nlibuci: %s", in, stderr.String())
	case runErr == nil && err != nil:
		t.Fatalf("libuci accepts, we reject:\n%q\nours: %v\nlibuci export:\n%s", in, err, stdout.String())
	case runErr != nil:
		m := libuciErrLine.FindStringSubmatch(stderr.String())
		var e *Error
		if m != nil && asError(err, &e) {
			if n, _ := strconv.Atoi(m[1]); n != e.Line {
				t.Logf("error line differs for %q: libuci %s, ours %v", in, strings.TrimSpace(stderr.String()), err)
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
	theirs := stdout.String()
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

func TestLibUCIDifferential(t *testing.T) {
	bin := libuci(t)
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
	for _, in := range inputs {
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
	pieces := []string{"config ", "option ", "list ", "c ", "o ", "l ", "package ", "q ", "a", "b", "1", "-",
		".", " ", " ", "\t", "\n", "\n", "\n\t", "'", "\"", "\\", ";", "#", "\r", "''", "config q a\n", "config q\n"}
	r := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < n; i++ {
		var b strings.Builder
		if r.IntN(2) == 0 {
			b.WriteString("config q a\n")
		}
		for j := r.IntN(14); j >= 0; j-- {
			b.WriteString(pieces[r.IntN(len(pieces))])
		}
		compareWithLibUCI(t, bin, b.String())
	}
}
