package json

import "strconv"

// Valid reports whether data is one JSON value, white space around it
// allowed.
func Valid(data []byte) bool { return checkValid(data) == nil }

func checkValid(data []byte) error {
	s := scanner{data: data}
	if err := s.value(0); err != nil {
		return err
	}
	s.space()
	if s.off < len(s.data) {
		return s.fail("after the top-level value")
	}
	return nil
}

// scanner checks syntax by recursive descent. Unmarshal runs it over the
// whole input before storing anything, so that (as with encoding/json) a
// syntax error anywhere wins over a type error and leaves the target
// untouched, and the decoder can then trust what it reads.
type scanner struct {
	data []byte
	off  int
}

func (s *scanner) space() {
	for s.off < len(s.data) {
		switch s.data[s.off] {
		case ' ', '\t', '\n', '\r':
			s.off++
		default:
			return
		}
	}
}

// fail reports the byte at s.off, or the end of the input.
func (s *scanner) fail(context string) error {
	if s.off >= len(s.data) {
		return &Error{Offset: int64(s.off), Msg: "unexpected end of input " + context, short: true}
	}
	return &Error{Offset: int64(s.off), Msg: "unexpected " + quoteChar(s.data[s.off]) + " " + context}
}

func quoteChar(c byte) string {
	switch {
	case c == '\'':
		return `character '\''`
	case c == '"':
		return `character '"'`
	case c >= 0x20 && c < 0x7f:
		return "character '" + string(c) + "'"
	}
	return "byte 0x" + strconv.FormatUint(uint64(c), 16)
}

func (s *scanner) value(depth int) error {
	s.space()
	if s.off >= len(s.data) {
		return s.fail("looking for a value")
	}
	switch c := s.data[s.off]; c {
	case '{':
		return s.object(depth + 1)
	case '[':
		return s.array(depth + 1)
	case '"':
		return s.str()
	case 't':
		return s.literal("true")
	case 'f':
		return s.literal("false")
	case 'n':
		return s.literal("null")
	default:
		if c == '-' || c >= '0' && c <= '9' {
			return s.number()
		}
		return s.fail("looking for a value")
	}
}

func (s *scanner) tooDeep(depth int) error {
	if depth > maxDepth {
		return &Error{Offset: int64(s.off), Msg: "nested more than " + strconv.Itoa(maxDepth) + " deep"}
	}
	return nil
}

func (s *scanner) object(depth int) error {
	if err := s.tooDeep(depth); err != nil {
		return err
	}
	s.off++
	s.space()
	if s.off < len(s.data) && s.data[s.off] == '}' {
		s.off++
		return nil
	}
	for {
		s.space()
		if s.off >= len(s.data) || s.data[s.off] != '"' {
			return s.fail("looking for an object key")
		}
		if err := s.str(); err != nil {
			return err
		}
		s.space()
		if s.off >= len(s.data) || s.data[s.off] != ':' {
			return s.fail("after an object key (expecting ':')")
		}
		s.off++
		if err := s.value(depth); err != nil {
			return err
		}
		s.space()
		if s.off < len(s.data) {
			switch s.data[s.off] {
			case ',':
				s.off++
				continue
			case '}':
				s.off++
				return nil
			}
		}
		return s.fail("after an object member (expecting ',' or '}')")
	}
}

func (s *scanner) array(depth int) error {
	if err := s.tooDeep(depth); err != nil {
		return err
	}
	s.off++
	s.space()
	if s.off < len(s.data) && s.data[s.off] == ']' {
		s.off++
		return nil
	}
	for {
		if err := s.value(depth); err != nil {
			return err
		}
		s.space()
		if s.off < len(s.data) {
			switch s.data[s.off] {
			case ',':
				s.off++
				continue
			case ']':
				s.off++
				return nil
			}
		}
		return s.fail("after an array element (expecting ',' or ']')")
	}
}

func (s *scanner) literal(word string) error {
	for i := 0; i < len(word); i++ {
		if s.off >= len(s.data) || s.data[s.off] != word[i] {
			return s.fail("in literal " + word)
		}
		s.off++
	}
	return nil
}

func (s *scanner) digits() int {
	n := 0
	for s.off < len(s.data) && s.data[s.off] >= '0' && s.data[s.off] <= '9' {
		s.off++
		n++
	}
	return n
}

// number accepts -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func (s *scanner) number() error {
	if s.data[s.off] == '-' {
		s.off++
	}
	if s.off < len(s.data) && s.data[s.off] == '0' {
		s.off++
	} else if s.digits() == 0 {
		return s.fail("in a number (expecting a digit)")
	}
	if s.off < len(s.data) && s.data[s.off] == '.' {
		s.off++
		if s.digits() == 0 {
			return s.fail("after a decimal point (expecting a digit)")
		}
	}
	if s.off < len(s.data) && (s.data[s.off] == 'e' || s.data[s.off] == 'E') {
		s.off++
		if s.off < len(s.data) && (s.data[s.off] == '+' || s.data[s.off] == '-') {
			s.off++
		}
		if s.digits() == 0 {
			return s.fail("in an exponent (expecting a digit)")
		}
	}
	return nil
}

func (s *scanner) str() error {
	s.off++
	for s.off < len(s.data) {
		c := s.data[s.off]
		switch {
		case c == '"':
			s.off++
			return nil
		case c < 0x20:
			return s.fail("in a string (control characters must be escaped)")
		case c == '\\':
			s.off++
			if s.off >= len(s.data) {
				return s.fail("in a string escape")
			}
			switch s.data[s.off] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				s.off++
			case 'u':
				s.off++
				for range 4 {
					if s.off >= len(s.data) || unhex(s.data[s.off]) < 0 {
						return s.fail(`in a \u escape (expecting a hex digit)`)
					}
					s.off++
				}
			default:
				return s.fail("in a string escape")
			}
		default:
			s.off++
		}
	}
	return s.fail("in a string")
}

func unhex(c byte) rune {
	switch {
	case c >= '0' && c <= '9':
		return rune(c - '0')
	case c >= 'a' && c <= 'f':
		return rune(c - 'a' + 10)
	case c >= 'A' && c <= 'F':
		return rune(c - 'A' + 10)
	}
	return -1
}
