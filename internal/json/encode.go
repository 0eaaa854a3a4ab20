// Package json is the part of encoding/json that sqm uses, written again
// with a fraction of its code: encoding/json costs 328 KB of the 3.5 MB
// router build on mipsle, mostly its generated per-type encoders and
// decoders and the scanner's state machine. This package walks values with
// reflect each time instead, which is slower but small, and sqm encodes a
// few kilobytes at a time.
//
// The output is byte for byte what encoding/json writes for the same
// values (golden files and docs/status-json.md depend on it), and decoding
// accepts and rejects the same inputs for the types sqm uses; the
// differential tests and fuzz targets hold it to that. What sqm does not
// use is refused with an error instead of half supported: the ",string"
// and ",omitzero" tag options, embedded pointers to structs, and map keys
// other than strings and integers.
package json

import (
	"bytes"
	"encoding"
	"io"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Marshaler is a type that writes its own JSON.
type Marshaler interface {
	MarshalJSON() ([]byte, error)
}

// RawDecoder is a type that reads its own JSON: DecodeJSON is given the
// value's bytes as they appear in the input, "null" included, as
// encoding/json gives them to UnmarshalJSON.
//
// StringDecoder is a type that is read from a JSON string:
// DecodeJSONString is given the string's unescaped contents, as
// encoding/json gives them to UnmarshalText; other JSON values are of the
// wrong type for it, and null leaves it alone.
//
// They are not UnmarshalJSON and UnmarshalText because this package
// would call those through an interface, and a method called through an
// interface is kept by the linker for every type that is ever stored in
// one: time.Time's UnmarshalJSON and UnmarshalText link time's whole
// layout parser (the router build on mipsle is 25 KB smaller without, its
// own RFC 3339 reader included). A type that has only the standard
// methods is refused with an error that says so, rather than decoded
// field by field; time.Time is decoded here (parseTime), as its
// UnmarshalJSON does. Encoding does call MarshalJSON and MarshalText:
// time.Time's share the RFC 3339 writer that encoding a time needs anyway.
type (
	RawDecoder    interface{ DecodeJSON([]byte) error }
	StringDecoder interface{ DecodeJSONString([]byte) error }
)

// RawMessage is JSON kept as bytes, decoded later or written verbatim
// (compacted, as encoding/json does).
type RawMessage []byte

// MarshalJSON returns m, or null for a nil m.
func (m RawMessage) MarshalJSON() ([]byte, error) {
	if m == nil {
		return []byte("null"), nil
	}
	return m, nil
}

// DecodeJSON keeps a copy of data: the input buffer may be reused.
func (m *RawMessage) DecodeJSON(data []byte) error {
	if m == nil {
		return &Error{Msg: "RawMessage.DecodeJSON on a nil pointer"}
	}
	*m = append((*m)[0:0], data...)
	return nil
}

// UnmarshalJSON is DecodeJSON, for encoding/json (the differential tests
// decode the same types with it).
func (m *RawMessage) UnmarshalJSON(data []byte) error { return m.DecodeJSON(data) }

var (
	marshalerType       = reflect.TypeFor[Marshaler]()
	unmarshalerType     = reflect.TypeFor[interface{ UnmarshalJSON([]byte) error }]()
	textMarshalerType   = reflect.TypeFor[encoding.TextMarshaler]()
	textUnmarshalerType = reflect.TypeFor[encoding.TextUnmarshaler]()
)

// maxDepth bounds nesting both ways. encoding/json's scanner allows 10000
// levels of input; encoding stops at the same depth so that a cyclic
// value fails with an error instead of exhausting the stack.
const maxDepth = 10000

// Marshal returns the JSON encoding of v, with <, > and & escaped in
// strings as encoding/json does.
func Marshal(v any) ([]byte, error) {
	e := encoder{html: true}
	if err := e.value(reflect.ValueOf(v)); err != nil {
		return nil, e.wrap(err, v)
	}
	return e.buf, nil
}

// MarshalIndent is Marshal laid out with one element per line.
func MarshalIndent(v any, prefix, indent string) ([]byte, error) {
	b, err := Marshal(v)
	if err != nil {
		return nil, err
	}
	return appendIndent(make([]byte, 0, len(b)*2), b, prefix, indent), nil
}

// An Encoder writes one JSON value per Encode, each followed by a newline.
type Encoder struct {
	_ [0]func() // not comparable: no equality code (docs/testing.md, "Package sizes")

	w              io.Writer
	html           bool
	prefix, indent string
}

// NewEncoder returns an Encoder writing to w.
func NewEncoder(w io.Writer) *Encoder { return &Encoder{w: w, html: true} }

// SetIndent makes Encode lay values out as MarshalIndent does.
func (enc *Encoder) SetIndent(prefix, indent string) { enc.prefix, enc.indent = prefix, indent }

// SetEscapeHTML(false) leaves <, > and & in strings as they are.
func (enc *Encoder) SetEscapeHTML(on bool) { enc.html = on }

// Encode writes v's JSON and a newline in one Write.
func (enc *Encoder) Encode(v any) error {
	e := encoder{html: enc.html}
	if err := e.value(reflect.ValueOf(v)); err != nil {
		return e.wrap(err, v)
	}
	b := e.buf
	if enc.prefix != "" || enc.indent != "" {
		b = appendIndent(make([]byte, 0, len(b)*2), b, enc.prefix, enc.indent)
	}
	b = append(b, '\n')
	_, err := enc.w.Write(b)
	return err
}

type encoder struct {
	buf   []byte
	html  bool
	depth int
}

// wrap names the root type in front of the Go path the error collected on
// its way up, so it reads "plan.Plan.Classes[2].Rate: ...".
func (e *encoder) wrap(err error, v any) error {
	if pe, ok := err.(*Error); ok {
		pe.Op = "encoding"
		pe.Root = rootName(reflect.TypeOf(v))
		pe.Offset = -1
	}
	return err
}

func (e *encoder) value(v reflect.Value) error {
	if !v.IsValid() {
		e.buf = append(e.buf, "null"...)
		return nil
	}
	t := v.Type()
	if t.Kind() != reflect.Pointer && v.CanAddr() && reflect.PointerTo(t).Implements(marshalerType) {
		return e.marshaler(v.Addr())
	}
	if t.Implements(marshalerType) {
		return e.marshaler(v)
	}
	if t.Kind() != reflect.Pointer && v.CanAddr() && reflect.PointerTo(t).Implements(textMarshalerType) {
		return e.textMarshaler(v.Addr())
	}
	if t.Implements(textMarshalerType) {
		return e.textMarshaler(v)
	}
	switch t.Kind() {
	case reflect.Bool:
		e.buf = strconv.AppendBool(e.buf, v.Bool())
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		e.buf = strconv.AppendInt(e.buf, v.Int(), 10)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		e.buf = strconv.AppendUint(e.buf, v.Uint(), 10)
	case reflect.Float32, reflect.Float64:
		return e.float(v.Float(), t.Bits())
	case reflect.String:
		e.buf = appendString(e.buf, v.String(), e.html)
	case reflect.Interface:
		if v.IsNil() {
			e.buf = append(e.buf, "null"...)
			return nil
		}
		return e.nested(v.Elem())
	case reflect.Pointer:
		if v.IsNil() {
			e.buf = append(e.buf, "null"...)
			return nil
		}
		return e.nested(v.Elem())
	case reflect.Struct:
		return e.structValue(v)
	case reflect.Map:
		return e.mapValue(v)
	case reflect.Slice:
		if v.IsNil() {
			e.buf = append(e.buf, "null"...)
			return nil
		}
		if isBytes(t) {
			e.buf = append(e.buf, '"')
			e.buf = appendBase64(e.buf, v.Bytes())
			e.buf = append(e.buf, '"')
			return nil
		}
		return e.array(v)
	case reflect.Array:
		return e.array(v)
	default:
		return &Error{Msg: "a " + t.String() + " has no JSON form"}
	}
	return nil
}

// isBytes reports whether a slice type is written as base64, as
// encoding/json decides it: bytes whose pointer has no JSON or text
// methods of its own.
func isBytes(t reflect.Type) bool {
	if t.Elem().Kind() != reflect.Uint8 {
		return false
	}
	p := reflect.PointerTo(t.Elem())
	return !p.Implements(marshalerType) && !p.Implements(textMarshalerType)
}

func (e *encoder) nested(v reflect.Value) error {
	e.depth++
	if e.depth > maxDepth {
		return &Error{Msg: "nested more than " + strconv.Itoa(maxDepth) + " deep (a cycle?)"}
	}
	err := e.value(v)
	e.depth--
	return err
}

func (e *encoder) float(f float64, bits int) error {
	if math.IsInf(f, 0) || math.IsNaN(f) {
		return &Error{Msg: strconv.FormatFloat(f, 'g', -1, bits) + " has no JSON form"}
	}
	// JSON numbers as JavaScript prints them: plain decimals between 1e-6
	// and 1e21, exponents outside, with no leading zero in the exponent.
	format := byte('f')
	if a := math.Abs(f); a != 0 {
		if bits == 64 && (a < 1e-6 || a >= 1e21) || bits == 32 && (float32(a) < 1e-6 || float32(a) >= 1e21) {
			format = 'e'
		}
	}
	e.buf = strconv.AppendFloat(e.buf, f, format, -1, bits)
	if format == 'e' {
		if n := len(e.buf); n >= 4 && e.buf[n-4] == 'e' && e.buf[n-3] == '-' && e.buf[n-2] == '0' {
			e.buf[n-2] = e.buf[n-1]
			e.buf = e.buf[:n-1]
		}
	}
	return nil
}

func (e *encoder) marshaler(v reflect.Value) error {
	if v.Kind() == reflect.Pointer && v.IsNil() || v.Kind() == reflect.Interface && v.IsNil() {
		e.buf = append(e.buf, "null"...)
		return nil
	}
	b, err := v.Interface().(Marshaler).MarshalJSON()
	if err != nil {
		return &Error{Msg: "MarshalJSON of " + v.Type().String() + ": " + err.Error(), Err: err}
	}
	n := len(e.buf)
	e.buf, err = appendCompact(e.buf, b, e.html)
	if err != nil {
		e.buf = e.buf[:n]
		return &Error{Msg: "MarshalJSON of " + v.Type().String() + " returned bad JSON: " + err.Error(), Err: err}
	}
	return nil
}

func (e *encoder) textMarshaler(v reflect.Value) error {
	if v.Kind() == reflect.Pointer && v.IsNil() || v.Kind() == reflect.Interface && v.IsNil() {
		e.buf = append(e.buf, "null"...)
		return nil
	}
	b, err := v.Interface().(encoding.TextMarshaler).MarshalText()
	if err != nil {
		return &Error{Msg: "MarshalText of " + v.Type().String() + ": " + err.Error(), Err: err}
	}
	e.buf = appendString(e.buf, string(b), e.html)
	return nil
}

func (e *encoder) structValue(v reflect.Value) error {
	fs, err := fieldsOf(v.Type())
	if err != nil {
		return err
	}
	e.buf = append(e.buf, '{')
	first := true
	for i := range fs {
		f := &fs[i]
		fv := v // (the decoder's loop: FieldByIndex is 0.6 KB more)
		for _, i := range f.index {
			fv = fv.Field(i)
		}
		if f.omitEmpty && isEmpty(fv) {
			continue
		}
		if !first {
			e.buf = append(e.buf, ',')
		}
		first = false
		e.buf = appendString(e.buf, f.name, e.html)
		e.buf = append(e.buf, ':')
		if err := e.nested(fv); err != nil {
			return addPath(err, "."+f.goName, -1)
		}
	}
	e.buf = append(e.buf, '}')
	return nil
}

// isEmpty is omitempty's test, encoding/json's: the length for these
// kinds, reflect.Value.IsZero for the others, spelt out per kind because
// IsZero itself, for every kind, is 2.3 KB of the router build on mipsle
// (TestIsEmptyLikeIsZero).
func isEmpty(v reflect.Value) bool {
	switch v.Kind() {
	case reflect.Array, reflect.Map, reflect.Slice, reflect.String:
		return v.Len() == 0
	case reflect.Bool:
		return !v.Bool()
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return v.Int() == 0
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return v.Uint() == 0
	case reflect.Float32, reflect.Float64:
		return v.Float() == 0 // -0.0 too, as IsZero says
	case reflect.Interface, reflect.Pointer:
		return v.IsNil()
	}
	return false
}

func (e *encoder) mapValue(v reflect.Value) error {
	if v.IsNil() {
		e.buf = append(e.buf, "null"...)
		return nil
	}
	if err := checkMapKey(v.Type()); err != nil {
		return err
	}
	entries := make([]mapEntry, v.Len())
	kvs := make([]*mapEntry, 0, len(entries))
	it := v.MapRange()
	for it.Next() {
		k := it.Key()
		var s string
		switch k.Kind() {
		case reflect.String:
			s = k.String()
		case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
			s = strconv.FormatInt(k.Int(), 10)
		default:
			s = strconv.FormatUint(k.Uint(), 10)
		}
		m := &entries[len(kvs)]
		m.k, m.v = s, it.Value()
		kvs = append(kvs, m)
	}
	slices.SortFunc(kvs, func(a, b *mapEntry) int { return strings.Compare(a.k, b.k) })
	e.buf = append(e.buf, '{')
	for i, m := range kvs {
		k := m.k
		if i > 0 {
			e.buf = append(e.buf, ',')
		}
		e.buf = appendString(e.buf, k, e.html)
		e.buf = append(e.buf, ':')
		if err := e.nested(m.v); err != nil {
			return addPath(err, "["+strconv.Quote(k)+"]", -1)
		}
	}
	e.buf = append(e.buf, '}')
	return nil
}

// mapEntry is one of a map's members, sorted by key through pointers:
// slices.SortFunc of a pointer slice shares its code with every other
// pointer sort (flag's among them), where a sort of a struct slice would
// be 10 KB of code of its own and sort.Interface would link package sort
// (6 KB) into the router build, which has no other use for it.
type mapEntry struct {
	_ [0]func() // not comparable: no equality code (docs/testing.md, "Package sizes")

	k string
	v reflect.Value
}

// checkMapKey refuses the key types encoding/json would write through
// their text methods: sqm has none, and supporting them means one more
// method lookup per key.
func checkMapKey(t reflect.Type) error {
	k := t.Key()
	switch k.Kind() {
	case reflect.String:
		return nil
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		if !reflect.PointerTo(k).Implements(textMarshalerType) && !reflect.PointerTo(k).Implements(textUnmarshalerType) {
			return nil
		}
	}
	return &Error{Msg: "map key type " + k.String() + " is not supported (only strings and integers without text methods)"}
}

func (e *encoder) array(v reflect.Value) error {
	e.buf = append(e.buf, '[')
	n := v.Len()
	for i := 0; i < n; i++ {
		if i > 0 {
			e.buf = append(e.buf, ',')
		}
		if err := e.nested(v.Index(i)); err != nil {
			return addPath(err, "", i)
		}
	}
	e.buf = append(e.buf, ']')
	return nil
}

const hex = "0123456789abcdef"

// appendString quotes s the way encoding/json does: the short escapes for
// quote, backslash, \b \f \n \r \t, \u00XX for other control bytes,
// U+FFFD for invalid UTF-8, and \u2028 and \u2029 always (JavaScript
// parsers take them as line ends); with html, also <, > and &.
func appendString(dst []byte, s string, html bool) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && (!html || c != '<' && c != '>' && c != '&') {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch c {
			case '"', '\\':
				dst = append(dst, '\\', c)
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			i++
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hex[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// appendIndent lays out src, which must be compact valid JSON (Marshal's
// output), with one element per line; empty objects and arrays stay {}
// and [].
func appendIndent(dst, src []byte, prefix, indent string) []byte {
	depth := 0
	newline := func() {
		dst = append(dst, '\n')
		dst = append(dst, prefix...)
		for range depth {
			dst = append(dst, indent...)
		}
	}
	for i := 0; i < len(src); i++ {
		c := src[i]
		switch c {
		case '"':
			j := i + 1
			for ; src[j] != '"'; j++ {
				if src[j] == '\\' {
					j++
				}
			}
			dst = append(dst, src[i:j+1]...)
			i = j
		case '{', '[':
			dst = append(dst, c)
			if i+1 < len(src) && (src[i+1] == '}' || src[i+1] == ']') {
				dst = append(dst, src[i+1])
				i++
				continue
			}
			depth++
			newline()
		case '}', ']':
			depth--
			newline()
			dst = append(dst, c)
		case ',':
			dst = append(dst, c)
			newline()
		case ':':
			dst = append(dst, ':', ' ')
		default:
			dst = append(dst, c)
		}
	}
	return dst
}

// Compact appends src to dst without its insignificant white space.
func Compact(dst *bytes.Buffer, src []byte) error {
	b, err := appendCompact(dst.AvailableBuffer(), src, false)
	if err != nil {
		return err
	}
	dst.Write(b)
	return nil
}

// appendCompact checks src and appends it without white space; with
// html it escapes <, >, & and U+2028/9 in strings, as encoding/json does
// with what a MarshalJSON method returns.
func appendCompact(dst, src []byte, html bool) ([]byte, error) {
	if err := checkValid(src); err != nil {
		return dst, err
	}
	start := 0
	for i := 0; i < len(src); i++ {
		c := src[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			dst = append(dst, src[start:i]...)
			start = i + 1
		case c == '"':
			for i++; src[i] != '"'; i++ {
				switch c := src[i]; {
				case c == '\\':
					i++
				case html && (c == '<' || c == '>' || c == '&'):
					dst = append(dst, src[start:i]...)
					dst = append(dst, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
					start = i + 1
				case html && c == 0xE2 && i+2 < len(src) && src[i+1] == 0x80 && src[i+2]&^1 == 0xA8:
					dst = append(dst, src[start:i]...)
					dst = append(dst, '\\', 'u', '2', '0', '2', hex[src[i+2]&0xF])
					i += 2
					start = i + 1
				}
			}
		}
	}
	return append(dst, src[start:]...), nil
}
