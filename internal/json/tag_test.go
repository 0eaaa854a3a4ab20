package json

import (
	"reflect"
	"strings"
	"testing"
)

var tagInputs = []string{
	``, `json:"a"`, `json:"a,omitempty"`, `json:"-"`, `json:"-,"`, `json:""`, `xml:"x" json:"b"`, `json:"c" xml:"x"`,
	`  json:"d"  `, `jsonx:"e"`, `xjson:"e"`, `json:e`, `json: "f"`, `json:"g`, `json:"h\"i"`, `json:"\u00e9"`, `json:"é"`,
	`a:"1" b:"2" json:"j"`, "json:\"k\nl\"", `bad json:"m"`, `:"n" json:"o"`, `"x" json:"p"`, `json:"q" json:"r"`,
	`a:"\\" json:"s"`, `a:"\"" json:"t"`, "json:\"\xff\"", `json:"\x41"`, `ju:"1"json:"2"`, "a\x7f:\"1\" json:\"3\"",
}

// TestJSONTag holds jsonTag to reflect.StructTag.Lookup: the same value
// wherever it takes the tag, and a refusal only where Lookup unquotes.
func TestJSONTag(t *testing.T) {
	for _, tag := range tagInputs {
		sameTag(t, reflect.StructTag(tag))
	}
}

func sameTag(t *testing.T, tag reflect.StructTag) {
	t.Helper()
	got, ok := jsonTag(tag)
	want := tag.Get("json")
	switch {
	case ok && got != want:
		t.Fatalf("jsonTag(%q) = %q, Lookup gives %q", tag, got, want)
	case !ok && !strings.Contains(string(tag), `\`) && !strings.Contains(string(tag), "\n") && want != "\ufffd" && !strings.ContainsRune(want, '\ufffd'):
		t.Fatalf("jsonTag(%q) refuses a tag that needs no unquoting (Lookup gives %q)", tag, want)
	}
}

func FuzzJSONTag(f *testing.F) {
	for _, tag := range tagInputs {
		f.Add(tag)
	}
	f.Fuzz(func(t *testing.T, tag string) { sameTag(t, reflect.StructTag(tag)) })
}
