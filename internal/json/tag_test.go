package json

import (
	stdjson "encoding/json"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"
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

// TestValidName: for every ASCII byte, a tag name of it (and of "a" and
// it) is valid exactly when encoding/json takes it as the member's name;
// a non-ASCII letter, which encoding/json takes, is refused.
func TestValidName(t *testing.T) {
	for c := range utf8.RuneSelf {
		if c == '"' || c == '\\' || c == '`' || c == ',' {
			continue // a tag cannot hold the first three as they are; a comma ends the name
		}
		for _, name := range []string{string(rune(c)), "a" + string(rune(c))} {
			typ := reflect.StructOf([]reflect.StructField{{Name: "F", Type: reflect.TypeFor[int](), Tag: reflect.StructTag(`json:"` + name + `"`)}})
			b, err := stdjson.Marshal(reflect.New(typ).Elem().Interface())
			if err != nil {
				t.Fatal(err)
			}
			std := name == "F" || string(b) != `{"F":0}` // it fell back to the field's name
			if got := validName(name); got != std {
				t.Errorf("validName(%q) = %v, encoding/json takes it: %v (%s)", name, got, std, b)
			}
		}
	}
	for _, name := range []string{"é", "aé", "名前"} {
		if validName(name) {
			t.Errorf("validName(%q) = true, want a refusal", name)
		}
	}
}
