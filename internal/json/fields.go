package json

import (
	"reflect"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"
)

// Error is every error this package returns for bad input or an
// unencodable value. It says where: the byte offset in the input when
// decoding, and the Go path of the value (plan.Plan.Classes[2].Rate) when
// one is known.
type Error struct {
	_ [0]func() // not comparable: no equality code (docs/testing.md, "Package sizes")

	Op     string // "decoding" or "encoding"; "" for a syntax error
	Root   string // the Go type at the top, without pointers
	Path   string // below Root: .Field, [index], ["key"]
	Offset int64  // byte offset in the input; -1 when encoding
	Msg    string
	Err    error // what a MarshalJSON, UnmarshalJSON or text method returned

	short bool // the input ended early (a Decoder reads more)
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("json: ")
	if e.Op != "" {
		b.WriteString(e.Op)
		b.WriteByte(' ')
	}
	if w := e.Root + e.Path; w != "" {
		b.WriteString(w)
		b.WriteString(": ")
	}
	b.WriteString(e.Msg)
	if e.Offset >= 0 {
		b.WriteString(" (at byte ")
		b.WriteString(strconv.FormatInt(e.Offset, 10))
		b.WriteByte(')')
	}
	return b.String()
}

func (e *Error) Unwrap() error { return e.Err }

// addPath puts one step (".Field", or an index when idx >= 0) in front of
// the path an error has collected so far.
func addPath(err error, step string, idx int) error {
	if pe, ok := err.(*Error); ok {
		if idx >= 0 {
			step = "[" + strconv.Itoa(idx) + "]"
		}
		pe.Path = step + pe.Path
	}
	return err
}

func rootName(t reflect.Type) string {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil {
		return ""
	}
	return t.String()
}

// A field is one JSON member of a struct: its name in JSON, its Go name
// for errors, and the index path to it through embedded structs.
type field struct {
	name      string
	goName    string
	index     []int
	omitEmpty bool
}

type fieldList struct {
	fs  []field
	err error
}

// fieldCache holds each struct type's fields; a plain map under a lock is
// enough for the few dozen types sqm writes.
var fieldCache struct {
	sync.RWMutex
	m map[reflect.Type]fieldList
}

func fieldsOf(t reflect.Type) ([]field, error) {
	fieldCache.RLock()
	l, ok := fieldCache.m[t]
	fieldCache.RUnlock()
	if ok {
		return l.fs, l.err
	}
	fs, err := typeFields(t)
	fieldCache.Lock()
	if fieldCache.m == nil {
		fieldCache.m = map[reflect.Type]fieldList{}
	}
	fieldCache.m[t] = fieldList{fs, err}
	fieldCache.Unlock()
	return fs, err
}

// typeFields lists t's JSON members in field order, with the fields of
// embedded structs promoted by Go's rules: of several fields with one
// name, the least nested wins, then the only tagged one; a tie hides all.
func typeFields(t reflect.Type) ([]field, error) {
	type cand struct {
		field
		depth  int
		tagged bool
	}
	var cands []cand
	var walk func(t reflect.Type, index []int, depth int) error
	walk = func(t reflect.Type, index []int, depth int) error {
		for i := 0; i < t.NumField(); i++ {
			sf := t.Field(i)
			ft := sf.Type
			if ft.Name() == "" && ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if sf.Anonymous {
				if !sf.IsExported() && ft.Kind() != reflect.Struct {
					continue
				}
			} else if !sf.IsExported() {
				continue
			}
			tag, ok := jsonTag(sf.Tag)
			if !ok {
				return &Error{Root: t.String(), Path: "." + sf.Name, Offset: -1, Msg: "a json tag with a backslash, a newline, U+FFFD or invalid UTF-8 is not supported"}
			}
			if tag == "-" {
				continue
			}
			name, opts, _ := strings.Cut(tag, ",")
			omit := false
			for opts != "" {
				var o string
				o, opts, _ = strings.Cut(opts, ",")
				if o != "omitempty" {
					return &Error{Root: t.String(), Path: "." + sf.Name, Offset: -1, Msg: "tag option " + strconv.Quote(o) + " is not supported (only omitempty)"}
				}
				omit = true
			}
			if name != "" && !validName(name) {
				return &Error{Root: t.String(), Path: "." + sf.Name, Offset: -1, Msg: "tag name " + strconv.Quote(name) + " is not a valid JSON member name (ASCII letters, digits and punctuation other than quotes, backslash and comma)"}
			}
			idx := append(index[:len(index):len(index)], i)
			if name != "" || !sf.Anonymous || ft.Kind() != reflect.Struct {
				tagged := name != ""
				if name == "" {
					name = sf.Name
				}
				cands = append(cands, cand{field{name, sf.Name, idx, omit}, depth, tagged})
				continue
			}
			if sf.Type.Kind() == reflect.Pointer {
				return &Error{Root: t.String(), Path: "." + sf.Name, Offset: -1, Msg: "embedded pointer to a struct is not supported"}
			}
			if err := walk(ft, idx, depth+1); err != nil {
				return err
			}
		}
		return nil
	}
	if err := walk(t, nil, 0); err != nil {
		return nil, err
	}
	var fs []field
	for i, c := range cands {
		best, n := -1, 0
		for j, d := range cands {
			if d.name != c.name {
				continue
			}
			switch {
			case best < 0 || d.depth < cands[best].depth:
				best, n = j, 1
			case d.depth == cands[best].depth:
				if d.tagged && !cands[best].tagged {
					best, n = j, 1
				} else if d.tagged == cands[best].tagged {
					n++
				}
			}
		}
		if best == i && n == 1 {
			fs = append(fs, c.field)
		}
	}
	return fs, nil
}

// jsonTag is tag.Get("json") for the tags this package takes: it finds
// the key as reflect.StructTag.Lookup does, but takes the value only if
// it needs no unquoting (ok false otherwise): Lookup's strconv.Unquote is
// 5 KB of the router build's code on mipsle, for escapes no sqm tag has.
// TestJSONTag holds it to Lookup.
func jsonTag(tag reflect.StructTag) (_ string, ok bool) {
	for tag != "" {
		i := 0
		for i < len(tag) && tag[i] == ' ' {
			i++
		}
		tag = tag[i:]
		if tag == "" {
			break
		}
		i = 0
		for i < len(tag) && tag[i] > ' ' && tag[i] != ':' && tag[i] != '"' && tag[i] != 0x7f {
			i++
		}
		if i == 0 || i+1 >= len(tag) || tag[i] != ':' || tag[i+1] != '"' {
			break
		}
		name := tag[:i]
		tag = tag[i+1:]
		i = 1
		for i < len(tag) && tag[i] != '"' {
			if tag[i] == '\\' {
				i++
			}
			i++
		}
		if i >= len(tag) {
			break
		}
		v := string(tag[1:i])
		tag = tag[i+1:]
		if name == "json" {
			for _, r := range v { // (a loop: utf8.ValidString is another 1.4 KB)
				if r == '\\' || r == '\n' || r == utf8.RuneError {
					return "", false
				}
			}
			return v, true
		}
	}
	return "", true
}

// validName is encoding/json's rule for tag names, for ASCII: letters,
// digits and punctuation other than quotes, backslash and comma. A name
// with other letters is refused (TestValidName).
func validName(s string) bool {
	for _, c := range s {
		switch {
		case strings.ContainsRune("!#$%&()*+-./:;<=>?@[]^_{|}~ ", c):
		case c >= utf8.RuneSelf:
			// encoding/json takes any Unicode letter or digit; sqm's tags
			// are ASCII, and unicode's letter and digit tables would be
			// the router build's only use of them.
			return false
		case !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9'):
			return false
		}
	}
	return true
}
