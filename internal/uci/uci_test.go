package uci

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden")

// dump renders a parsed file with every line number, for golden files.
func dump(f *File) string {
	var b strings.Builder
	fmt.Fprintf(&b, "package %q\n", f.Package)
	for _, s := range f.Sections {
		fmt.Fprintf(&b, "section %s type=%q name=%q line=%d\n", s.Ref(), s.Type, s.Name, s.Line)
		for _, o := range s.Options {
			kind := "option"
			if o.IsList {
				kind = "list"
			}
			fmt.Fprintf(&b, "\t%s %s line=%d\n", kind, o.Name, o.Line)
			for _, v := range o.Values {
				fmt.Fprintf(&b, "\t\t%q line=%d\n", v.Text, v.Line)
			}
		}
	}
	return b.String()
}

func TestGolden(t *testing.T) {
	files, err := filepath.Glob("testdata/*.sqm")
	if err != nil || len(files) == 0 {
		t.Fatalf("no fixtures: %v", err)
	}
	for _, path := range files {
		t.Run(filepath.Base(path), func(t *testing.T) {
			in, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			f, err := Parse(path, bytes.NewReader(in))
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			got := dump(f)
			golden := strings.TrimSuffix(path, ".sqm") + ".golden"
			if *update {
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run go test -update)", err)
			}
			if got != string(want) {
				t.Errorf("%s differs from %s:\n--- got\n%s\n--- want\n%s", path, golden, got, want)
			}
			assertExportRoundTrip(t, f)
		})
	}
}

// assertExportRoundTrip checks that Export writes what Parse reads back.
func assertExportRoundTrip(t *testing.T, f *File) {
	t.Helper()
	var buf bytes.Buffer
	if err := f.Export(&buf); err != nil {
		t.Fatal(err)
	}
	g, err := Parse("export", &buf)
	if err != nil {
		t.Fatalf("re-parse of export failed: %v\n%s", err, buf.String())
	}
	if a, b := strip(f), strip(g); !reflect.DeepEqual(a, b) {
		t.Fatalf("export round trip differs:\n%s\nvs\n%s\nexport:\n%s", a, b, buf.String())
	}
}

// strip renders the content without line numbers.
func strip(f *File) string {
	var b strings.Builder
	fmt.Fprintf(&b, "package %q\n", f.Package)
	for _, s := range f.Sections {
		fmt.Fprintf(&b, "%q %q %d\n", s.Type, s.Name, s.Index)
		for _, o := range s.Options {
			fmt.Fprintf(&b, " %q %v", o.Name, o.IsList)
			for _, v := range o.Values {
				fmt.Fprintf(&b, " %q", v.Text)
			}
			b.WriteString("\n")
		}
	}
	return b.String()
}

// unset in TestParseValues means the option must not exist.
const unset = "\x00unset"

func TestParseValues(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want map[string]string // "ref.option" -> value
	}{
		{"plain", "config queue wan\n\toption download 85000\n", map[string]string{"wan.download": "85000"}},
		{"short forms", "c queue wan\no download 1\nl x a\nl x b\n", map[string]string{"wan.download": "1", "wan.x": "a b"}},
		{"single quotes literal", `config q a` + "\n" + `option v 'a\b "c"'`, map[string]string{"a.v": `a\b "c"`}},
		{"double quote backslash", `config q a` + "\n" + `option v "a\"b\\c\n"`, map[string]string{"a.v": `a"b\cn`}},
		{"concatenation", `config q a` + "\n" + `option v 'a'"b"c`, map[string]string{"a.v": "abc"}},
		{"quote escape", `config q a` + "\n" + `option v 'it'\''s'`, map[string]string{"a.v": "it's"}},
		{"multi-line single", "config q a\noption v 'x\ny'\n", map[string]string{"a.v": "x\ny"}},
		{"multi-line double", "config q a\noption v \"x\ny\"\n", map[string]string{"a.v": "x\ny"}},
		{"backslash continuation", "config q a\noption v abc\\\ndef\n", map[string]string{"a.v": "abcdef"}},
		{"backslash continuation crlf", "config q a\r\noption v abc\\\r\ndef\r\n", map[string]string{"a.v": "abcdef"}},
		{"backslash continuation in double quotes", "config q a\noption v \"abc\\\ndef\"\n", map[string]string{"a.v": "abcdef"}},
		{"backslash literal outside quotes", `config q a` + "\n" + `option v a\ b`, map[string]string{"a.v": "a b"}},
		{"comment after value", "config q a\noption v x#y\n", map[string]string{"a.v": "x"}},
		{"hash in quotes", "config q a\noption v 'x#y'\n", map[string]string{"a.v": "x#y"}},
		{"semicolons", "config q a ; option v 1 ; option w 2\n", map[string]string{"a.v": "1", "a.w": "2"}},
		{"semicolons after quotes", "config q 'a'; option v '1'; option w 2\n", map[string]string{"a.v": "1", "a.w": "2"}},
		{"semicolon right after a bare word ends the line", "config q a; option v 1\noption w 2; option x 3\n", map[string]string{"a.w": "2", "a.v": unset, "a.x": unset}},
		{"semicolon in quotes", "config q a\noption v 'a;b'\n", map[string]string{"a.v": "a;b"}},
		{"trailing semicolon", "config q a\noption v 1;  \n", map[string]string{"a.v": "1"}},
		{"empty value is a no-op", "config q a\noption v 1\noption v ''\n", map[string]string{"a.v": "1"}},
		{"overwrite", "config q a\noption v 1\noption v 2\n", map[string]string{"a.v": "2"}},
		{"list after option keeps old value", "config q a\noption v 1\nlist v 2\n", map[string]string{"a.v": "1 2"}},
		{"option after list replaces it", "config q a\nlist v 1\nlist v 2\noption v 3\n", map[string]string{"a.v": "3"}},
		{"merge", "config q a\noption v 1\nconfig q b\nconfig q a\noption w 2\n", map[string]string{"a.v": "1", "a.w": "2"}},
		{"anonymous refs", "config q\noption v 1\nconfig q named\noption v 2\nconfig q\noption v 3\n",
			map[string]string{"@q[0].v": "1", "@q[1].v": "2", "named.v": "2", "@q[2].v": "3", "@q[-1].v": "3", "@q[-3].v": "1"}},
		{"quoted empty name is anonymous", "config q ''\noption v 1\n", map[string]string{"@q[0].v": "1"}},
		{"crlf", "config q a\r\n\toption v 1\r\n", map[string]string{"a.v": "1"}},
		{"no final newline", "config q a\noption v 1", map[string]string{"a.v": "1"}},
		{"tabs and blank lines", "\n\n\tconfig\tq\ta\n\n\t\toption\tv\t1\n\n", map[string]string{"a.v": "1"}},
		{"package ignored", "package sqm\nconfig q a\noption v 1\n", map[string]string{"a.v": "1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := Parse("test", strings.NewReader(tt.in))
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			for key, want := range tt.want {
				ref, opt, _ := strings.Cut(key, ".")
				if i := strings.LastIndex(key, "]."); i >= 0 {
					ref, opt = key[:i+1], key[i+2:]
				}
				s := f.Lookup(ref)
				if s == nil {
					t.Fatalf("Lookup(%q) = nil; file:\n%s", ref, dump(f))
				}
				got, ok := s.Get(opt)
				if want == unset {
					if ok {
						t.Errorf("%s = %q, want it unset", key, got)
					}
					continue
				}
				if !ok || got != want {
					t.Errorf("%s = %q (set %v), want %q; file:\n%s", key, got, ok, want, dump(f))
				}
			}
			assertExportRoundTrip(t, f)
		})
	}
}

func TestLines(t *testing.T) {
	in := "# c\n\nconfig queue wan\n\toption a 1\n\tlist l x\n\n\tlist l 'y\nz'\n\toption b 2\nconfig queue wan\n\toption a 3\n"
	f, err := Parse("f", strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	s := f.Lookup("wan")
	if s.Line != 3 {
		t.Errorf("section line = %d, want 3", s.Line)
	}
	if o := s.Option("a"); o.Line != 11 || o.Values[0].Line != 11 {
		t.Errorf("option a line = %d, want 11 (the last set)", o.Line)
	}
	if o := s.Option("l"); o.Line != 5 || o.Values[0].Line != 5 || o.Values[1].Line != 7 {
		t.Errorf("list l lines = %d %+v, want 5 and values 5, 7", o.Line, o.Values)
	}
	if o := s.Option("b"); o.Line != 9 {
		t.Errorf("option b line = %d, want 9 (after a two-line value)", o.Line)
	}
	var names []string
	for _, o := range s.Options {
		names = append(names, o.Name)
	}
	if got := strings.Join(names, ","); got != "a,l,b" {
		t.Errorf("option order = %s, want a,l,b (a re-set option keeps its place, as in libuci)", got)
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want string
	}{
		{"option before section", "option a 1\n", `f:1: option/list command found before the first section; add a ` + "`config TYPE [NAME]`" + ` line first`},
		{"invalid command", "config q a\n\nopton a 1\n", `f:3: invalid command "opton"; expected package, config, option or list`},
		{"command alone", "config q a\noption\n", `f:2: option without arguments`},
		{"command alone at eof", "config q a\noption", `f:2: option without name`},
		{"config without type", "config ''\n", `f:1: insufficient arguments: config needs a section type, e.g. config queue 'wan'`},
		{"option without name", "config q a\noption '' 1\n", `f:2: insufficient arguments: option and list need a name, e.g. option download '85000'`},
		{"package without name", "package ''\n", `f:1: insufficient arguments: package needs a name`},
		{"bad section name", "config q a-b\n", `f:1: invalid character '-' in name "a-b"; names may contain only letters, digits and _`},
		{"bad option name", "config q a\noption down.load 1\n", `f:2: invalid character '.' in name "down.load"; names may contain only letters, digits and _`},
		{"bad package name", "package 'a b'\n", `f:1: invalid character ' ' in name "a b"; names may contain only letters, digits, _ and -`},
		{"bad type", "config 'a b'\n", `f:1: invalid character in section type "a b"; types are printable ASCII without spaces`},
		{"too many arguments", "config q a\noption v 1 2\n", `f:2: too many arguments (unexpected "2"); quote values that contain spaces`},
		{"too many config arguments", "config q a b\n", `f:1: too many arguments (unexpected "b"); quote values that contain spaces`},
		{"unterminated single", "config q a\noption v 'abc\n\n", `f:3: unterminated ' quote opened at line 2 (end of file reached)`},
		{"unterminated double", "config q a\noption v \"abc", `f:2: unterminated " quote opened at line 2 (end of file reached)`},
		{"type change", "config q a\nconfig r a\n", `f:2: section "a" of type "q" is redefined with type "r" (first defined at line 1)`},
		{"space after semicolon", "config q a\noption v 1 ;  \n", `f:2: invalid command: nothing follows the ';' (remove it, or the space after it)`},
		{"nul byte", "config q a\noption v a\x00b\n", `f:2: NUL byte in file; UCI files are text`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse("f", strings.NewReader(tt.in))
			if err == nil {
				t.Fatalf("Parse succeeded, want %q", tt.want)
			}
			if err.Error() != tt.want {
				t.Errorf("error = %q\n want %q", err, tt.want)
			}
		})
	}
}

func TestLookupMisses(t *testing.T) {
	f, err := Parse("f", strings.NewReader("config q a\nconfig q\n"))
	if err != nil {
		t.Fatal(err)
	}
	for _, ref := range []string{"b", "@q[2]", "@q[-3]", "@r[0]", "@q[x]", "@q", "@q[0"} {
		if s := f.Lookup(ref); s != nil {
			t.Errorf("Lookup(%q) = %s, want nil", ref, s.Ref())
		}
	}
	if s := f.Lookup("@q[1]"); s == nil || s.Ref() != "@q[1]" {
		t.Errorf("Lookup(@q[1]) = %v", s)
	}
}

func FuzzParse(f *testing.F) {
	files, _ := filepath.Glob("testdata/*.sqm")
	for _, p := range files {
		b, err := os.ReadFile(p)
		if err == nil {
			f.Add(string(b))
		}
	}
	f.Add("config q a; option v 'x'\"y\"\\\nz # c\nlist l 1\n")
	f.Fuzz(func(t *testing.T, in string) {
		file, err := Parse("fuzz", strings.NewReader(in))
		if err != nil {
			var e *Error
			if !asError(err, &e) || e.Line < 1 {
				t.Fatalf("error %v is not an *Error with a line", err)
			}
			return
		}
		assertExportRoundTrip(t, file)
	})
}

func asError(err error, target **Error) bool {
	e, ok := err.(*Error)
	if ok {
		*target = e
	}
	return ok
}
