package json

import (
	"errors"
	"io"
	"reflect"
	"strconv"
	"strings"
	"time"
	"unicode/utf16"
	"unicode/utf8"
)

// Unmarshal stores the JSON value in data in what v points to, with
// encoding/json's rules: object members match fields by tag or Go name,
// exactly or else ignoring case; unknown members are skipped; null leaves
// non-pointer values alone; numbers must fit the field's type. A value of
// the wrong type is reported but the rest is still stored; a syntax error
// stores nothing.
func Unmarshal(data []byte, v any) error {
	rv := reflect.ValueOf(v)
	if rv.Kind() != reflect.Pointer || rv.IsNil() {
		return &Error{Offset: -1, Msg: "Unmarshal needs a non-nil pointer, not " + typeName(rv)}
	}
	if err := checkValid(data); err != nil {
		return err
	}
	return decodeValid(data, rv, 0, false)
}

func typeName(v reflect.Value) string {
	if !v.IsValid() {
		return "nil"
	}
	if v.Kind() == reflect.Pointer {
		return "a nil " + v.Type().String()
	}
	return "a " + v.Type().String()
}

// decodeValid decodes data, which checkValid has passed; base is data's
// offset in a Decoder's stream, for errors; strict refuses unknown members.
func decodeValid(data []byte, rv reflect.Value, base int64, strict bool) error {
	d := decoder{data: data, strict: strict}
	err := d.value(rv)
	if err == nil {
		err = d.saved
	}
	if pe, ok := err.(*Error); ok {
		pe.Op = "decoding"
		pe.Root = rootName(rv.Type())
		pe.Offset += base
	}
	return err
}

type decoder struct {
	data  []byte
	off   int
	saved error // the first value of the wrong type
	path  []step

	strict bool // an unknown member is an error (Decoder.DisallowUnknownFields)
}

// A step is one level of the Go path kept for errors: a field, a map key
// or (name == "") an index.
type step struct {
	_ [0]func() // not comparable: no equality code (docs/testing.md, "Package sizes")

	name  string
	index int
	key   bool
}

func (d *decoder) where() string {
	var b strings.Builder
	for _, s := range d.path {
		switch {
		case s.key:
			b.WriteString("[" + strconv.Quote(s.name) + "]")
		case s.name != "":
			b.WriteString("." + s.name)
		default:
			b.WriteString("[" + strconv.Itoa(s.index) + "]")
		}
	}
	return b.String()
}

func (d *decoder) typeError(what string, t reflect.Type, off int) {
	if d.saved == nil {
		d.saved = &Error{Path: d.where(), Offset: int64(off), Msg: "cannot store " + what + " in a Go " + t.String()}
	}
}

func (d *decoder) methodError(method string, err error, off int) error {
	return &Error{Path: d.where(), Offset: int64(off), Msg: method + ": " + err.Error(), Err: err}
}

func (d *decoder) space() {
	for d.off < len(d.data) {
		switch d.data[d.off] {
		case ' ', '\t', '\n', '\r':
			d.off++
		default:
			return
		}
	}
}

// skip passes over one value (known to be valid).
func (d *decoder) skip() {
	s := scanner{data: d.data, off: d.off}
	s.value(0)
	d.off = s.off
}

func (d *decoder) value(v reflect.Value) error {
	d.space()
	switch d.data[d.off] {
	case '{':
		return d.object(v)
	case '[':
		return d.array(v)
	}
	start := d.off
	d.skip()
	return d.literal(d.data[start:d.off], v, start)
}

// A hook is how a value with decoding of its own takes its JSON: see
// RawDecoder and StringDecoder. time.Time is decoded here (parseTime).
type hook struct {
	raw  RawDecoder
	str  StringDecoder
	time *time.Time
	// refuse names a standard method (UnmarshalJSON, UnmarshalText) that
	// the value has and this package does not call: see RawDecoder.
	refuse string
}

func (h *hook) set() bool { return h.raw != nil || h.str != nil || h.time != nil || h.refuse != "" }

var timeType = reflect.TypeFor[time.Time]()

// indirect goes through pointers (allocating nil ones) and interfaces
// holding pointers to the value to store into, stopping early at a
// value with a hook. For null it stops at the last settable pointer so
// that null can clear it, and only a RawDecoder (or a time, which
// ignores it, as time.Time's UnmarshalJSON does) takes it.
func indirect(v reflect.Value, null bool) (hook, reflect.Value) {
	v0 := v
	haveAddr := false
	// A named value's pointer methods count: start from its address.
	if v.Kind() != reflect.Pointer && v.Type().Name() != "" && v.CanAddr() {
		haveAddr = true
		v = v.Addr()
	}
	for {
		if v.Kind() == reflect.Interface && !v.IsNil() {
			e := v.Elem()
			if e.Kind() == reflect.Pointer && !e.IsNil() && (!null || e.Elem().Kind() == reflect.Pointer) {
				haveAddr = false
				v = e
				continue
			}
		}
		if v.Kind() != reflect.Pointer {
			break
		}
		if null && v.CanSet() {
			break
		}
		// An interface holding a pointer to itself would loop forever. The
		// same pointer of the same type is what reflect.Value.Equal would
		// say here, without linking its comparison of every kind (3 KB).
		if e := v.Elem(); e.Kind() == reflect.Interface {
			if p := e.Elem(); p.Kind() == reflect.Pointer && p.Type() == v.Type() && p.Pointer() == v.Pointer() {
				v = e
				break
			}
		}
		if v.IsNil() {
			v.Set(reflect.New(v.Type().Elem()))
		}
		if t := v.Type(); t.NumMethod() > 0 && v.CanInterface() {
			if t.Elem() == timeType {
				return hook{time: v.Interface().(*time.Time)}, reflect.Value{}
			}
			if u, ok := v.Interface().(RawDecoder); ok {
				return hook{raw: u}, reflect.Value{}
			}
			if t.Implements(unmarshalerType) {
				return hook{refuse: "UnmarshalJSON"}, reflect.Value{}
			}
			if !null {
				if u, ok := v.Interface().(StringDecoder); ok {
					return hook{str: u}, reflect.Value{}
				}
				if t.Implements(textUnmarshalerType) {
					return hook{refuse: "UnmarshalText"}, reflect.Value{}
				}
			}
		}
		if haveAddr {
			v = v0
			haveAddr = false
		} else {
			v = v.Elem()
		}
	}
	return hook{}, v
}

// refused is the error for a type with a standard decoding method only.
func (d *decoder) refused(method string, t reflect.Type, off int) error {
	ours := "DecodeJSON"
	if method == "UnmarshalText" {
		ours = "DecodeJSONString"
	}
	return &Error{Path: d.where(), Offset: int64(off), Msg: "a " + t.String() + " has " + method +
		", which this package does not call: give it a " + ours + " method"}
}

// composite handles an object or array (kind, for errors) that starts at
// start and goes to a type with a hook: a RawDecoder gets the raw
// value; a StringDecoder cannot take one, nor can a time. done is false
// when v (pointers allocated on the way) is for the caller to fill.
func (d *decoder) composite(v reflect.Value, start int, kind string) (_ reflect.Value, done bool, _ error) {
	h, pv := indirect(v, false)
	switch {
	case h.raw != nil:
		d.skip()
		if err := h.raw.DecodeJSON(d.data[start:d.off]); err != nil {
			return pv, true, d.methodError("DecodeJSON", err, start)
		}
		return pv, true, nil
	case h.time != nil:
		return pv, true, d.methodError("Time.UnmarshalJSON", errNotString, start)
	case h.refuse != "":
		return pv, true, d.refused(h.refuse, v.Type(), start)
	case h.str != nil:
		d.typeError(kind, v.Type(), start)
		d.skip()
		return pv, true, nil
	}
	return pv, false, nil
}

// errNotString is time.Time's UnmarshalJSON's error for a value that is
// not a string.
var errNotString = errors.New("input is not a JSON string")

func (d *decoder) object(v reflect.Value) error {
	start := d.off
	pv, done, err := d.composite(v, start, "an object")
	if done {
		return err
	}
	v = pv
	t := v.Type()
	var fs []field
	switch v.Kind() {
	case reflect.Interface:
		if v.NumMethod() != 0 {
			d.typeError("an object", t, start)
			d.skip()
			return nil
		}
		v.Set(reflect.ValueOf(d.anyValue()))
		return nil
	case reflect.Map:
		if err := checkMapKey(t); err != nil {
			pe := err.(*Error)
			pe.Path, pe.Offset = d.where(), int64(start)
			return pe
		}
		if v.IsNil() {
			v.Set(reflect.MakeMap(t))
		}
	case reflect.Struct:
		var err error
		if fs, err = fieldsOf(t); err != nil {
			return err
		}
	default:
		d.typeError("an object", t, start)
		d.skip()
		return nil
	}
	d.off++
	d.space()
	if d.data[d.off] == '}' {
		d.off++
		return nil
	}
	for {
		d.space()
		keyOff := d.off
		key := d.readString()
		d.space()
		d.off++ // ':'
		if v.Kind() == reflect.Map {
			elem := reflect.New(t.Elem()).Elem()
			d.path = append(d.path, step{name: key, key: true})
			err := d.value(elem)
			d.path = d.path[:len(d.path)-1]
			if err != nil {
				return err
			}
			kt := t.Key()
			kv := reflect.New(kt).Elem()
			ok := true
			switch kt.Kind() {
			case reflect.String:
				kv.SetString(key)
			case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
				n, err := strconv.ParseInt(key, 10, 64)
				if ok = err == nil && !kv.OverflowInt(n); ok {
					kv.SetInt(n)
				}
			default:
				n, err := strconv.ParseUint(key, 10, 64)
				if ok = err == nil && !kv.OverflowUint(n); ok {
					kv.SetUint(n)
				}
			}
			if ok {
				v.SetMapIndex(kv, elem)
			} else {
				d.typeError("key "+strconv.Quote(key), kt, keyOff)
			}
		} else if f := lookup(fs, key); f == nil {
			if d.strict && d.saved == nil {
				d.saved = &Error{Path: d.where(), Offset: int64(keyOff), Msg: "unknown field " + strconv.Quote(key)}
			}
			d.skip()
		} else {
			fv := v
			for _, i := range f.index {
				fv = fv.Field(i)
			}
			d.path = append(d.path, step{name: f.goName})
			err := d.value(fv)
			d.path = d.path[:len(d.path)-1]
			if err != nil {
				return err
			}
		}
		d.space()
		d.off++
		if d.data[d.off-1] == '}' {
			return nil
		}
	}
}

// lookup finds a member's field: its exact name, else the first field
// equal to it under Unicode case folding.
func lookup(fs []field, key string) *field {
	for i := range fs {
		if fs[i].name == key {
			return &fs[i]
		}
	}
	for i := range fs {
		if strings.EqualFold(fs[i].name, key) {
			return &fs[i]
		}
	}
	return nil
}

func (d *decoder) array(v reflect.Value) error {
	start := d.off
	pv, done, err := d.composite(v, start, "an array")
	if done {
		return err
	}
	v = pv
	switch v.Kind() {
	case reflect.Interface:
		if v.NumMethod() == 0 {
			v.Set(reflect.ValueOf(d.anyValue()))
			return nil
		}
		fallthrough
	default:
		d.typeError("an array", v.Type(), start)
		d.skip()
		return nil
	case reflect.Array, reflect.Slice:
	}
	d.off++
	d.space()
	i := 0
	if d.data[d.off] == ']' {
		d.off++
	} else {
		for {
			if v.Kind() == reflect.Slice {
				if i >= v.Cap() {
					v.Grow(1)
				}
				if i >= v.Len() {
					v.SetLen(i + 1)
				}
			}
			if i < v.Len() {
				d.path = append(d.path, step{index: i})
				err := d.value(v.Index(i))
				d.path = d.path[:len(d.path)-1]
				if err != nil {
					return err
				}
			} else {
				d.skip() // past the end of a Go array
			}
			i++
			d.space()
			d.off++
			if d.data[d.off-1] == ']' {
				break
			}
		}
	}
	if i < v.Len() {
		if v.Kind() == reflect.Array {
			for ; i < v.Len(); i++ {
				v.Index(i).Set(reflect.Zero(v.Type().Elem())) // (SetZero: 1.1 KB more)
			}
		} else {
			v.SetLen(i)
		}
	}
	if i == 0 && v.Kind() == reflect.Slice && v.IsNil() {
		v.Set(reflect.MakeSlice(v.Type(), 0, 0))
	}
	return nil
}

func literalKind(c byte) string {
	switch c {
	case 'n':
		return "null"
	case 't', 'f':
		return "a bool"
	case '"':
		return "a string"
	}
	return "a number"
}

func (d *decoder) literal(item []byte, v reflect.Value, off int) error {
	null := item[0] == 'n'
	h, pv := indirect(v, null)
	switch {
	case h.raw != nil:
		if err := h.raw.DecodeJSON(item); err != nil {
			return d.methodError("DecodeJSON", err, off)
		}
		return nil
	case h.time != nil:
		if null {
			return nil
		}
		if item[0] != '"' {
			return d.methodError("Time.UnmarshalJSON", errNotString, off)
		}
		// Between the quotes as they are: time.Time's UnmarshalJSON does
		// not unescape either.
		// A bad time leaves the zero time, as there.
		var err error
		if *h.time, err = parseTime(item[1 : len(item)-1]); err != nil {
			return d.methodError("Time.UnmarshalJSON", err, off)
		}
		return nil
	case h.refuse != "":
		return d.refused(h.refuse, v.Type(), off)
	case h.str != nil:
		if item[0] != '"' {
			d.typeError(literalKind(item[0]), v.Type(), off)
			return nil
		}
		if err := h.str.DecodeJSONString([]byte(unquote(item))); err != nil {
			return d.methodError("DecodeJSONString", err, off)
		}
		return nil
	}
	v = pv
	k := v.Kind()
	anyIface := k == reflect.Interface && v.NumMethod() == 0
	switch c := item[0]; {
	case c == 'n':
		switch k {
		case reflect.Interface, reflect.Pointer, reflect.Map, reflect.Slice:
			v.Set(reflect.Zero(v.Type()))
		}
	case c == 't' || c == 'f':
		switch {
		case k == reflect.Bool:
			v.SetBool(c == 't')
		case anyIface:
			v.Set(reflect.ValueOf(c == 't'))
		default:
			d.typeError("a bool", v.Type(), off)
		}
	case c == '"':
		s := unquote(item)
		switch {
		case k == reflect.String:
			v.SetString(s)
		case k == reflect.Slice && v.Type().Elem().Kind() == reflect.Uint8:
			b, ok := decodeBase64(s)
			if !ok {
				if d.saved == nil {
					d.saved = &Error{Path: d.where(), Offset: int64(off), Msg: "string is not base64 (standard, padded)"}
				}
				return nil
			}
			v.SetBytes(b)
		case anyIface:
			v.Set(reflect.ValueOf(s))
		default:
			d.typeError("a string", v.Type(), off)
		}
	default:
		s := string(item)
		switch k {
		case reflect.Interface:
			if !anyIface {
				d.typeError("a number", v.Type(), off)
				break
			}
			f, err := strconv.ParseFloat(s, 64)
			if err != nil {
				d.typeError("number "+s, reflect.TypeFor[float64](), off)
				break
			}
			v.Set(reflect.ValueOf(f))
		case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
			n, err := strconv.ParseInt(s, 10, 64)
			if err != nil || v.OverflowInt(n) {
				d.typeError("number "+s, v.Type(), off)
				break
			}
			v.SetInt(n)
		case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
			n, err := strconv.ParseUint(s, 10, 64)
			if err != nil || v.OverflowUint(n) {
				d.typeError("number "+s, v.Type(), off)
				break
			}
			v.SetUint(n)
		case reflect.Float32, reflect.Float64:
			n, err := strconv.ParseFloat(s, v.Type().Bits())
			if err != nil || v.OverflowFloat(n) {
				d.typeError("number "+s, v.Type(), off)
				break
			}
			v.SetFloat(n)
		default:
			d.typeError("a number", v.Type(), off)
		}
	}
	return nil
}

// anyValue decodes the next value as encoding/json does into an empty
// interface: map[string]any, []any, float64, string, bool or nil.
func (d *decoder) anyValue() any {
	d.space()
	switch c := d.data[d.off]; c {
	case '{':
		m := map[string]any{}
		d.off++
		d.space()
		if d.data[d.off] == '}' {
			d.off++
			return m
		}
		for {
			d.space()
			k := d.readString()
			d.space()
			d.off++ // ':'
			d.path = append(d.path, step{name: k, key: true})
			m[k] = d.anyValue()
			d.path = d.path[:len(d.path)-1]
			d.space()
			d.off++
			if d.data[d.off-1] == '}' {
				return m
			}
		}
	case '[':
		a := []any{}
		d.off++
		d.space()
		if d.data[d.off] == ']' {
			d.off++
			return a
		}
		for {
			d.path = append(d.path, step{index: len(a)})
			a = append(a, d.anyValue())
			d.path = d.path[:len(d.path)-1]
			d.space()
			d.off++
			if d.data[d.off-1] == ']' {
				return a
			}
		}
	case '"':
		return d.readString()
	case 't':
		d.off += 4
		return true
	case 'f':
		d.off += 5
		return false
	case 'n':
		d.off += 4
		return nil
	}
	start := d.off
	d.skip()
	s := string(d.data[start:d.off])
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		d.typeError("number "+s, reflect.TypeFor[float64](), start)
		return nil
	}
	return f
}

// readString reads the (valid) string at d.off.
func (d *decoder) readString() string {
	start := d.off
	d.off++
	for {
		c := d.data[d.off]
		if c == '"' {
			d.off++
			return string(d.data[start+1 : d.off-1])
		}
		if c == '\\' || c >= utf8.RuneSelf {
			break
		}
		d.off++
	}
	d.off = start
	d.skip()
	return unquote(d.data[start:d.off])
}

// unquote decodes a valid JSON string literal, quotes included. Invalid
// UTF-8 and unpaired surrogates become U+FFFD, as in encoding/json.
func unquote(s []byte) string {
	s = s[1 : len(s)-1]
	b := make([]byte, 0, len(s))
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == '\\':
			i++
			switch s[i] {
			case 'b':
				b = append(b, '\b')
			case 'f':
				b = append(b, '\f')
			case 'n':
				b = append(b, '\n')
			case 'r':
				b = append(b, '\r')
			case 't':
				b = append(b, '\t')
			case 'u':
				r := hex4(s[i+1:])
				i += 5
				if utf16.IsSurrogate(r) {
					if i+6 <= len(s) && s[i] == '\\' && s[i+1] == 'u' {
						if dec := utf16.DecodeRune(r, hex4(s[i+2:])); dec != utf8.RuneError {
							b = utf8.AppendRune(b, dec)
							i += 6
							continue
						}
					}
					r = utf8.RuneError
				}
				b = utf8.AppendRune(b, r)
				continue
			default: // " \ /
				b = append(b, s[i])
			}
			i++
		case c < utf8.RuneSelf:
			b = append(b, c)
			i++
		default:
			r, n := utf8.DecodeRune(s[i:])
			if r == utf8.RuneError && n == 1 {
				b = utf8.AppendRune(b, utf8.RuneError)
			} else {
				b = append(b, s[i:i+n]...)
			}
			i += n
		}
	}
	return string(b)
}

func hex4(s []byte) rune {
	var r rune
	for _, c := range s[:4] {
		r = r<<4 | unhex(c)
	}
	return r
}

// A Decoder reads a stream of JSON values, reading from r only as far as
// it needs to complete each one.
type Decoder struct {
	r      io.Reader
	buf    []byte
	base   int64 // stream offset of buf[0]
	err    error // from r; io.EOF at the end
	synErr error
	strict bool
}

// NewDecoder returns a Decoder reading from r.
func NewDecoder(r io.Reader) *Decoder { return &Decoder{r: r} }

// DisallowUnknownFields makes an object member that matches no field of
// the struct it is decoded into an error, as encoding/json's does, for
// inputs where a misspelt name must not pass unnoticed (the page's API).
func (dec *Decoder) DisallowUnknownFields() { dec.strict = true }

// Decode reads the next value and stores it in v as Unmarshal does.
// It returns io.EOF when the stream ends between values and
// io.ErrUnexpectedEOF when it ends inside one.
func (dec *Decoder) Decode(v any) error {
	rv := reflect.ValueOf(v)
	if rv.Kind() != reflect.Pointer || rv.IsNil() {
		return &Error{Offset: -1, Msg: "Decode needs a non-nil pointer, not " + typeName(rv)}
	}
	if dec.synErr != nil {
		return dec.synErr
	}
	for {
		s := scanner{data: dec.buf}
		s.space()
		if start := s.off; start < len(dec.buf) {
			err := s.value(0)
			if last := dec.buf[max(s.off-1, 0)]; err == nil && (s.off < len(dec.buf) || dec.err != nil || last < '0' || last > '9') {
				data := dec.buf[start:s.off]
				dec.buf = dec.buf[s.off:]
				base := dec.base + int64(start)
				dec.base += int64(s.off)
				return decodeValid(data, rv, base, dec.strict)
			}
			if pe, ok := err.(*Error); ok && !pe.short {
				pe.Offset += dec.base
				dec.synErr = pe
				return pe
			}
			if dec.err == io.EOF {
				return io.ErrUnexpectedEOF
			}
		} else {
			dec.base += int64(len(dec.buf))
			dec.buf = dec.buf[:0]
		}
		if dec.err != nil {
			return dec.err
		}
		if cap(dec.buf)-len(dec.buf) < 512 {
			nb := make([]byte, len(dec.buf), 2*cap(dec.buf)+4096)
			copy(nb, dec.buf)
			dec.buf = nb
		}
		n, err := dec.r.Read(dec.buf[len(dec.buf):cap(dec.buf)])
		dec.buf = dec.buf[:len(dec.buf)+n]
		dec.err = err
	}
}

// ErrNotObject is Members' error for a value that is not an object.
var ErrNotObject = errors.New("json: not an object")

// A Member is one name and value of an object, as it appears in the input.
type Member struct {
	Name  string
	Value RawMessage
}

// Members splits the object at the start of data into its members in
// input order, duplicates kept (Unmarshal keeps only the last), and
// returns what follows the object. It is for formats that forbid
// duplicate names, such as the RPM draft's configuration.
func Members(data []byte) ([]Member, []byte, error) {
	s := scanner{data: data}
	if err := s.value(0); err != nil {
		return nil, nil, err
	}
	d := decoder{data: data[:s.off]}
	d.space()
	if d.data[d.off] != '{' {
		return nil, data[s.off:], ErrNotObject
	}
	var ms []Member
	d.off++
	d.space()
	if d.data[d.off] == '}' {
		return ms, data[s.off:], nil
	}
	for {
		d.space()
		k := d.readString()
		d.space()
		d.off++ // ':'
		d.space()
		start := d.off
		d.skip()
		ms = append(ms, Member{k, RawMessage(d.data[start:d.off])})
		d.space()
		d.off++
		if d.data[d.off-1] == '}' {
			return ms, data[s.off:], nil
		}
	}
}
