package uci

// The two line shapes Apply edits, matched by hand rather than with
// regexp, which would add 0.13 MB to the router binary for three
// patterns. In regexp syntax (TestLineShapesMatchRegexp holds the two
// to the same answers):
//
//	value  = (?:'[^']*'|"(?:[^"\\\n]|\\.)*"|\\[^\n]|[^\s'"#;\\])+
//	option = ^([ \t]*(?:option|o)[ \t]+([A-Za-z0-9_]+)[ \t]+)(value)([ \t]*(?:#.*)?)$
//	config = ^[ \t]*(?:config|c)[ \t]+value(?:[ \t]+value)?[ \t]*(?:#.*)?$
//
// A value is pieces that concatenate ('it'\''s'); the first byte of each
// piece says which kind it is, so the longest run of pieces is the only
// one the rest of the line can follow.

// optionMatch is an option line cut in its parts: prefix (indentation,
// keyword, name, blanks), name, value and trail (blanks and comment).
type optionMatch struct {
	prefix, name, value, trail string
}

func isBlank(c byte) bool { return c == ' ' || c == '\t' }

// skipBlanks returns the index of the first byte at or after i that is
// not a space or tab.
func skipBlanks(s string, i int) int {
	for i < len(s) && isBlank(s[i]) {
		i++
	}
	return i
}

// indent is the line's leading spaces and tabs.
func indent(s string) string { return s[:skipBlanks(s, 0)] }

// keyword returns the index after long or short at i, followed by at
// least one blank, or -1.
func keyword(s string, i int, long, short string) int {
	for _, k := range []string{long, short} {
		if j := i + len(k); j < len(s) && s[i:j] == k && isBlank(s[j]) {
			return j
		}
	}
	return -1
}

// valueEnd returns the end of the value starting at i, or i if none does.
func valueEnd(s string, i int) int {
	for i < len(s) {
		switch c := s[i]; {
		case c == '\'':
			j := i + 1
			for j < len(s) && s[j] != '\'' {
				j++
			}
			if j == len(s) {
				return i
			}
			i = j + 1
		case c == '"':
			j := i + 1
			for j < len(s) && s[j] != '"' {
				switch {
				case s[j] == '\n':
					return i
				case s[j] == '\\':
					if j+1 == len(s) || s[j+1] == '\n' {
						return i
					}
					j += 2
				default:
					j++
				}
			}
			if j >= len(s) {
				return i
			}
			i = j + 1
		case c == '\\':
			if i+1 == len(s) || s[i+1] == '\n' {
				return i
			}
			i += 2
		case c == ' ' || c == '\t' || c == '\n' || c == '\f' || c == '\r' || c == '#' || c == ';':
			return i
		default:
			i++
		}
	}
	return i
}

// isTrail reports whether s[i:] is blanks and an optional comment.
func isTrail(s string, i int) bool {
	i = skipBlanks(s, i)
	if i == len(s) {
		return true
	}
	if s[i] != '#' {
		return false
	}
	for ; i < len(s); i++ {
		if s[i] == '\n' {
			return false
		}
	}
	return true
}

func matchOption(s string) (optionMatch, bool) {
	i := keyword(s, skipBlanks(s, 0), "option", "o")
	if i < 0 {
		return optionMatch{}, false
	}
	i = skipBlanks(s, i)
	n := i
	for n < len(s) && (s[n] == '_' || '0' <= s[n] && s[n] <= '9' || 'a' <= s[n] && s[n] <= 'z' || 'A' <= s[n] && s[n] <= 'Z') {
		n++
	}
	if n == i || n == len(s) || !isBlank(s[n]) {
		return optionMatch{}, false
	}
	v := skipBlanks(s, n)
	e := valueEnd(s, v)
	if e == v || !isTrail(s, e) {
		return optionMatch{}, false
	}
	return optionMatch{prefix: s[:v], name: s[i:n], value: s[v:e], trail: s[e:]}, true
}

func isOptionLine(s string) bool {
	_, ok := matchOption(s)
	return ok
}

func isConfigLine(s string) bool {
	i := keyword(s, skipBlanks(s, 0), "config", "c")
	if i < 0 {
		return false
	}
	i = skipBlanks(s, i)
	e := valueEnd(s, i)
	if e == i {
		return false
	}
	if isTrail(s, e) {
		return true
	}
	j := skipBlanks(s, e)
	if j == e {
		return false
	}
	e = valueEnd(s, j)
	return e > j && isTrail(s, e)
}
