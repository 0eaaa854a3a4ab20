// Package uci reads OpenWrt UCI configuration files (/etc/config/*) the way
// libuci's file.c does, so that a file uci accepts means the same thing to
// sqm, and a file uci rejects is rejected here with the file, the line and
// what is wrong. It keeps the line of every section, option and list value
// so that callers can point users at the place a bad value was written.
//
// # Grammar (libuci file.c, strict mode as used by uci_load)
//
// One command per line; `;` separates several commands on one line.
//
//	package NAME            (p)  ignored when loading one file, like uci_load
//	config TYPE [NAME]      (c)  opens a section; no NAME = anonymous section
//	option NAME [VALUE]     (o)  sets an option; an empty VALUE is a no-op
//	list NAME VALUE         (l)  appends to a list option
//
// Arguments are separated by white space. A `'…'` argument is literal; a
// `"…"` argument takes the character after a backslash literally (there are
// no escape sequences such as \n); both may span lines, keeping the line
// breaks. Outside single quotes a backslash before the end of the line joins
// the next line. Adjacent pieces concatenate: 'a'"b"c is abc. `#` outside
// quotes starts a comment that runs to the end of the line. NAMEs (section
// and option names) are [A-Za-z0-9_]+, package names may also contain '-',
// and TYPEs are any printable ASCII without spaces.
//
// A `config` naming an existing section of the same type reopens it, so its
// options merge (a different type is an error, as in strict libuci). A
// repeated `option` replaces the earlier value (or list) in place, as in
// libuci; a `list` on a plain option turns it into a list that starts with
// the old value. Anonymous sections are addressed as @type[i], counting every
// section of that type in file order (negative i counts from the end), as
// `uci get` does.
//
// # Verification
//
// libuci_test.go compares Parse with a real `uci` binary built from
// openwrt/uci on the fixtures, a table of corner cases and random inputs
// built from UCI's special characters: accept or reject, and every section,
// option and value, agree. Every `go test` checks against libuci's recorded
// answers in testdata/differential; with SQM_LIBUCI set it also asks the
// live binary (and fails if the recording is stale). libuci reports the
// line before the real one when the last line has no newline; we do not.
//
// # Deliberate differences from libuci
//
//   - NUL bytes are an error instead of silently ending the line.
//   - Anonymous sections get no cfgXXXXXX name; use [Section.Ref].
package uci

import (
	"bytes"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// File is one parsed UCI file.
type File struct {
	Name     string     // as given to Parse; used in positions and errors
	Package  string     // from a `package` line, or ""
	Sections []*Section // in file order
}

// Section is one `config` section after merging.
type Section struct {
	Type    string
	Name    string    // "" for an anonymous section
	Line    int       // line of the `config` command that opened it
	Index   int       // position among the file's sections of the same Type
	Options []*Option // in libuci's order
}

// Option is an option or a list.
type Option struct {
	Name   string
	Line   int     // line of the (last) `option` command, or of the first list value
	IsList bool    // set by `list`
	Values []Value // exactly one for an option, one or more for a list
}

// Value is one option value or list element and where it was written.
type Value struct {
	_ [0]func() // not comparable: no equality code (docs/testing.md, "Package sizes")

	Text string
	Line int
}

// Error is a syntax error in a UCI file.
type Error struct {
	_ [0]func() // not comparable: no equality code (docs/testing.md, "Package sizes")

	File string
	Line int
	Msg  string
}

func (e *Error) Error() string { return fmt.Sprintf("%s:%d: %s", e.File, e.Line, e.Msg) }

// Anonymous reports whether the section was written without a name.
func (s *Section) Anonymous() bool { return s.Name == "" }

// Ref is how uci addresses the section: its name, or @type[index] for an
// anonymous one.
func (s *Section) Ref() string {
	if s.Name != "" {
		return s.Name
	}
	return fmt.Sprintf("@%s[%d]", s.Type, s.Index)
}

// Option returns the named option or list, or nil.
func (s *Section) Option(name string) *Option {
	for _, o := range s.Options {
		if o.Name == name {
			return o
		}
	}
	return nil
}

// Get returns the value of a plain option and whether it is set. For a
// list it returns the elements joined by spaces, as `config_get` in
// OpenWrt's shell library does.
func (s *Section) Get(name string) (string, bool) {
	o := s.Option(name)
	if o == nil {
		return "", false
	}
	return o.Value(), true
}

// Value is the option's value; for a list, the elements joined by spaces.
func (o *Option) Value() string {
	if len(o.Values) == 1 {
		return o.Values[0].Text
	}
	parts := make([]string, len(o.Values))
	for i, v := range o.Values {
		parts[i] = v.Text
	}
	return strings.Join(parts, " ")
}

// SectionsOfType returns the sections of type t in file order.
func (f *File) SectionsOfType(t string) []*Section {
	var out []*Section
	for _, s := range f.Sections {
		if s.Type == t {
			out = append(out, s)
		}
	}
	return out
}

// Lookup finds a section by name or by @type[index] (a negative index
// counts from the end), or returns nil.
func (f *File) Lookup(ref string) *Section {
	if !strings.HasPrefix(ref, "@") {
		for _, s := range f.Sections {
			if s.Name == ref {
				return s
			}
		}
		return nil
	}
	open := strings.IndexByte(ref, '[')
	if open < 0 || !strings.HasSuffix(ref, "]") {
		return nil
	}
	i, err := strconv.Atoi(ref[open+1 : len(ref)-1])
	if err != nil {
		return nil
	}
	of := f.SectionsOfType(ref[1:open])
	if i < 0 {
		i += len(of)
	}
	if i < 0 || i >= len(of) {
		return nil
	}
	return of[i]
}

// Parse reads a UCI file. name is used in errors and positions.
func Parse(name string, r io.Reader) (*File, error) {
	// io.ReadAll's loop, without its 1.6 KB of code (its only user in
	// the router build).
	src := make([]byte, 0, 4096)
	for {
		n, err := r.Read(src[len(src):cap(src)])
		src = src[:len(src)+n]
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", name, err)
		}
		if len(src) == cap(src) {
			src = append(src, 0)[:len(src)]
		}
	}
	p := &parser{src: src, f: &File{Name: name}, byName: map[string]*Section{}, types: map[string]int{}}
	if i := bytes.IndexByte(src, 0); i >= 0 {
		line := 1
		for _, c := range src[:i] { // (bytes.Count links bytes.Index: 2 KB on mipsle)
			if c == '\n' {
				line++
			}
		}
		return nil, &Error{File: name, Line: line, Msg: "NUL byte in file; UCI files are text"}
	}
	if err := p.run(); err != nil {
		return nil, err
	}
	return p.f, nil
}

// parser mirrors libuci's parse context: the current logical line is
// src[pos:end]; quotes and backslashes extend it with getln.
type parser struct {
	src    []byte
	pos    int
	end    int
	line   int
	f      *File
	cur    *Section
	byName map[string]*Section
	types  map[string]int // sections per type so far, for Index
}

// fail is panicked with by the parser and recovered in run, as libuci
// longjmps out of uci_parse_error.
type fail struct{ err *Error }

func (p *parser) errorf(format string, args ...any) {
	panic(fail{&Error{File: p.f.Name, Line: p.line, Msg: fmt.Sprintf(format, args...)}})
}

func (p *parser) run() (err error) {
	defer func() {
		if r := recover(); r != nil {
			f, ok := r.(fail)
			if !ok {
				panic(r)
			}
			err = f.err
		}
	}()
	for p.end < len(p.src) {
		p.pos = p.end
		p.getln()
		p.parseLine()
	}
	return nil
}

// getln appends the next physical line to the current buffer.
func (p *parser) getln() {
	if p.end >= len(p.src) {
		return
	}
	i := bytes.IndexByte(p.src[p.end:], '\n')
	if i < 0 {
		p.end = len(p.src)
	} else {
		p.end += i + 1
	}
	p.line++
}

// c is the current character, 0 at the end of the buffer.
func (p *parser) c() byte {
	if p.pos < p.end {
		return p.src[p.pos]
	}
	return 0
}

func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r'
}

func (p *parser) skipSpace() {
	for p.c() != 0 && isSpace(p.c()) {
		p.pos++
	}
}

// parseLine parses the commands of one line (uci_parse_line).
func (p *parser) parseLine() {
	p.skipSpace()
	for {
		// strtok(" \t"): the command word.
		for p.c() == ' ' || p.c() == '\t' {
			p.pos++
		}
		if p.c() == 0 {
			return
		}
		start := p.pos
		for c := p.c(); c != 0 && c != ' ' && c != '\t'; c = p.c() {
			p.pos++
		}
		word := string(p.src[start:p.pos])
		if word[0] == '#' {
			p.pos = p.end
			return
		}
		var cmd string
		switch word {
		case "p", "package":
			cmd = "package"
		case "c", "config":
			cmd = "config"
		case "o", "option":
			cmd = "option"
		case "l", "list":
			cmd = "list"
		default:
			if w := strings.TrimRight(word, "\r\n"); w != word && strings.Contains(" p package c config o option l list ", " "+w+" ") {
				p.errorf("%s without arguments", w)
			}
			if w := strings.TrimRight(word, "\r\n"); w == "" {
				p.errorf("invalid command: nothing follows the ';' (remove it, or the space after it)")
			}
			p.errorf("invalid command %q; expected package, config, option or list", strings.TrimRight(word, "\r\n"))
		}
		if p.c() == 0 {
			p.errorf("%s without name", cmd)
		}
		p.pos++ // the space or tab after the command word
		switch cmd {
		case "package":
			p.parsePackage()
		case "config":
			p.parseConfig()
		default:
			p.parseOption(cmd == "list")
		}
		// Only a `;` leaves anything on the line. libuci then reads the
		// next command word up to a space or tab, so white space up to the
		// newline (`option v 1 ; `) is an invalid command, as there.
	}
}

func (p *parser) parsePackage() {
	name := p.nextArg("insufficient arguments: package needs a name", "package")
	p.assertEOL()
	if p.f.Package == "" {
		p.f.Package = name
	}
}

func (p *parser) parseConfig() {
	line := p.line
	typ := p.nextArg("insufficient arguments: config needs a section type, e.g. config queue 'wan'", "")
	for i := 0; i < len(typ); i++ {
		if typ[i] < 33 || typ[i] > 126 {
			p.errorf("invalid character in section type %q; types are printable ASCII without spaces", typ)
		}
	}
	name := p.nextArg("", "name")
	p.assertEOL()
	if name != "" {
		if s, ok := p.byName[name]; ok {
			if s.Type != typ {
				p.errorf("section %q of type %q is redefined with type %q (first defined at line %d)", name, s.Type, typ, s.Line)
			}
			p.cur = s
			return
		}
	}
	s := &Section{Type: typ, Name: name, Line: line, Index: p.types[typ]}
	p.types[typ]++
	p.f.Sections = append(p.f.Sections, s)
	if name != "" {
		p.byName[name] = s
	}
	p.cur = s
}

func (p *parser) parseOption(list bool) {
	line := p.line
	if p.cur == nil {
		p.errorf("option/list command found before the first section; add a `config TYPE [NAME]` line first")
	}
	name := p.nextArg("insufficient arguments: option and list need a name, e.g. option download '85000'", "name")
	value := p.nextArg("", "")
	p.assertEOL()
	s := p.cur
	idx := -1
	for i, o := range s.Options {
		if o.Name == name {
			idx = i
			break
		}
	}
	v := Value{Text: value, Line: line}
	if !list {
		if value == "" {
			return // uci_set with an empty value during import does nothing
		}
		o := &Option{Name: name, Line: line, Values: []Value{v}}
		if idx >= 0 {
			s.Options[idx] = o // libuci replaces the option in place
		} else {
			s.Options = append(s.Options, o)
		}
		return
	}
	if idx < 0 {
		s.Options = append(s.Options, &Option{Name: name, Line: line, IsList: true, Values: []Value{v}})
		return
	}
	o := s.Options[idx]
	o.IsList = true // a plain option becomes a list starting with its value
	o.Values = append(o.Values, v)
}

// nextArg reads one argument (next_arg). If it is missing and missing is
// not "", that is the error. kind "name" and "package" check the
// characters allowed in section/option and package names.
func (p *parser) nextArg(missing, kind string) string {
	p.skipSpace()
	var val string
	if p.c() == ';' {
		p.pos++
	} else {
		val = p.parseStr()
	}
	if val == "" {
		if missing != "" {
			p.errorf("%s", missing)
		}
		return ""
	}
	if kind != "" {
		for i := 0; i < len(val); i++ {
			c := val[i]
			if isAlnum(c) || c == '_' || (c == '-' && kind == "package") {
				continue
			}
			allowed := "letters, digits and _"
			if kind == "package" {
				allowed = "letters, digits, _ and -"
			}
			p.errorf("invalid character %q in name %q; names may contain only %s", c, val, allowed)
		}
	}
	return val
}

func isAlnum(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z'
}

// assertEOL rejects anything but a comment or `;` after a command.
func (p *parser) assertEOL() {
	p.skipSpace()
	if extra := p.nextArg("", ""); extra != "" {
		p.errorf("too many arguments (unexpected %q); quote values that contain spaces", extra)
	}
}

// parseStr reads one possibly quoted, possibly concatenated word.
//
// libuci unquotes in place and writes the terminating NUL where the output
// ends. If the word ends at a `;` and nothing was unquoted (the output is
// as long as the input), that NUL lands on the `;` itself and libuci drops
// the rest of the line: `config q a; option v 1` has no option v, while
// `config q 'a'; option v 1` and `config q a ; option v 1` have. We
// reproduce that, since uci (and so LuCI and sqm-scripts) reads the file so.
func (p *parser) parseStr() string {
	var b []byte
	next := true
	shrunk := false // output shorter than input: a quote or backslash was consumed
loop:
	for {
		switch c := p.c(); c {
		case '\'':
			b = p.parseSingle(b)
			shrunk = true
		case '"':
			b = p.parseDouble(b)
			shrunk = true
		case '#':
			p.pos = p.end // the comment runs to the end of the line
			break loop
		case 0:
			break loop
		case ';':
			next = false
			if !shrunk {
				p.pos = p.end // libuci's NUL overwrites the ';': the line ends here
			}
			break loop
		case '\\':
			shrunk = true
			if p.backslash() {
				b = append(b, p.c())
				p.pos++
			}
		default:
			b = append(b, c)
			p.pos++
		}
		if c := p.c(); c == 0 || isSpace(c) {
			break
		}
	}
	if p.c() != 0 && next {
		p.pos++
	}
	return string(b)
}

func (p *parser) parseSingle(b []byte) []byte {
	start := p.line
	p.pos++
	for {
		switch c := p.c(); c {
		case '\'':
			p.pos++
			return b
		case 0:
			p.getln()
			if p.c() == 0 {
				p.errorf("unterminated ' quote opened at line %d (end of file reached)", start)
			}
		default:
			b = append(b, c)
			p.pos++
		}
	}
}

func (p *parser) parseDouble(b []byte) []byte {
	start := p.line
	p.pos++
	for {
		switch c := p.c(); c {
		case '"':
			p.pos++
			return b
		case 0:
			p.getln()
			if p.c() == 0 {
				p.errorf("unterminated \" quote opened at line %d (end of file reached)", start)
			}
		case '\\':
			if p.backslash() {
				b = append(b, p.c())
				p.pos++
			}
		default:
			b = append(b, c)
			p.pos++
		}
	}
}

// backslash skips a backslash. At the end of a line it joins the next line
// and returns false; otherwise the next character is to be taken literally.
func (p *parser) backslash() bool {
	p.pos++
	c := p.c()
	if c == 0 || c == '\n' || (c == '\r' && p.pos+2 == p.end && p.src[p.pos+1] == '\n') {
		p.pos = p.end
		p.getln()
		return false
	}
	return true
}

// Export writes the file in the format `uci export` uses, so that it parses
// back to the same sections and values (line numbers aside).
func (f *File) Export(w io.Writer) error {
	var b strings.Builder
	if f.Package != "" {
		fmt.Fprintf(&b, "package %s\n", f.Package)
	}
	for _, s := range f.Sections {
		b.WriteString("\nconfig " + exportType(s.Type))
		if s.Name != "" {
			b.WriteString(" " + quote(s.Name))
		}
		b.WriteString("\n")
		for _, o := range s.Options {
			for _, v := range o.Values {
				kw := "option"
				if o.IsList {
					kw = "list"
				}
				fmt.Fprintf(&b, "\t%s %s %s\n", kw, o.Name, quote(v.Text))
			}
		}
	}
	b.WriteString("\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// quote single-quotes s, writing ' as '\” (uci_escape).
func quote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// exportType writes a section type bare, as uci does, unless it contains
// characters that would not read back that way.
func exportType(t string) string {
	for i := 0; i < len(t); i++ {
		if c := t[i]; !isAlnum(c) && c != '_' && c != '-' && c != '.' {
			return quote(t)
		}
	}
	return t
}
