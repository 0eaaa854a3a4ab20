package uci

import (
	"bytes"
	"fmt"
	"strings"
)

// Edit is one change to a plain option of one section.
type Edit struct {
	Section string // name or @type[i], as Lookup takes it
	Option  string
	Value   string // "" removes the option (uci delete)
}

// The line shapes Apply rewrites (lines.go). Anything else (several
// commands joined by ';', values spanning lines, backslash joins) is
// refused instead of guessed at: a wrong guess would silently change
// another option.
const errNotEdits = "edit it by hand"

// Apply returns src with the edits made the way a person would make them
// in an editor: the value on an option's own line is replaced, a new
// option gets a line after the section's last option, a removed option's
// line goes (its trailing comment stays). Every other byte, comments and
// options sqm does not know included, is kept, which `uci commit` does not
// do (it rewrites the file from its parsed form and drops comments).
//
// Each edit is checked by parsing the result and comparing it with the
// parsed original changed in memory; a file where a textual edit would
// mean anything else (the option set twice, in a list, on a line shared
// with other commands) is refused with an error naming the line.
func Apply(name string, src []byte, edits []Edit) ([]byte, error) {
	for _, e := range edits {
		var err error
		if src, err = apply1(name, src, e); err != nil {
			return nil, err
		}
	}
	return src, nil
}

func apply1(name string, src []byte, e Edit) ([]byte, error) {
	if !validName(e.Option) {
		return nil, fmt.Errorf("%s: option name %q: use letters, digits and _", name, e.Option)
	}
	if strings.ContainsAny(e.Value, "\x00\n\r") {
		return nil, fmt.Errorf("%s: option %s: a value with a line break or NUL is not written", name, e.Option)
	}
	before, err := Parse(name, bytes.NewReader(src))
	if err != nil {
		return nil, err
	}
	sec := before.Lookup(e.Section)
	if sec == nil || e.Section == "" {
		return nil, fmt.Errorf("%s: no section %q", name, e.Section)
	}
	lines := strings.SplitAfter(string(src), "\n")
	opt := sec.Option(e.Option)
	switch {
	case opt != nil && opt.IsList:
		return nil, fmt.Errorf("%s:%d: %s is a list; %s", name, opt.Line, e.Option, errNotEdits)
	case opt != nil:
		i := opt.Line - 1
		body, nl := splitNL(lines[i])
		m, ok := matchOption(body)
		if !ok || m.name != e.Option {
			return nil, fmt.Errorf("%s:%d: option %s is not alone on its line; %s", name, opt.Line, e.Option, errNotEdits)
		}
		switch {
		case e.Value != "":
			lines[i] = m.prefix + quote(e.Value) + m.trail + nl
		case strings.TrimSpace(m.trail) != "":
			// Keep the comment that explained the option.
			lines[i] = indent(body) + strings.TrimSpace(m.trail) + nl
		default:
			lines[i] = ""
		}
	case e.Value == "":
		return src, nil // removing what is not there
	default:
		at, indent, err := insertPoint(name, sec, lines)
		if err != nil {
			return nil, err
		}
		if at > 0 && !strings.HasSuffix(lines[at-1], "\n") {
			lines[at-1] += "\n"
		}
		ins := indent + "option " + e.Option + " " + quote(e.Value) + "\n"
		lines = append(lines[:at], append([]string{ins}, lines[at:]...)...)
	}
	out := []byte(strings.Join(lines, ""))
	if err := verify(name, before, out, e); err != nil {
		return nil, err
	}
	return out, nil
}

// insertPoint is the index in lines before which a new option of sec goes,
// and the indentation to give it.
func insertPoint(name string, sec *Section, lines []string) (int, string, error) {
	last := 0
	for _, o := range sec.Options {
		for _, v := range o.Values {
			last = max(last, v.Line)
		}
	}
	if last > 0 {
		body, _ := splitNL(lines[last-1])
		if !isOptionLine(body) {
			return 0, "", fmt.Errorf("%s:%d: cannot add an option after this line; %s", name, last, errNotEdits)
		}
		return last, indent(body), nil
	}
	body, _ := splitNL(lines[sec.Line-1])
	if !isConfigLine(body) {
		return 0, "", fmt.Errorf("%s:%d: cannot add an option after this config line; %s", name, sec.Line, errNotEdits)
	}
	return sec.Line, "\t", nil
}

// verify checks that out parses to before with exactly e applied.
func verify(name string, before *File, out []byte, e Edit) error {
	after, err := Parse(name, bytes.NewReader(out))
	if err != nil {
		return fmt.Errorf("%s: the edited file would not parse (%v); %s", name, err, errNotEdits)
	}
	sec := before.Lookup(e.Section)
	var opts []*Option
	found := false
	for _, o := range sec.Options {
		if o.Name != e.Option {
			opts = append(opts, o)
			continue
		}
		found = true
		if e.Value != "" {
			opts = append(opts, &Option{Name: o.Name, Values: []Value{{Text: e.Value}}})
		}
	}
	if !found && e.Value != "" {
		opts = append(opts, &Option{Name: e.Option, Values: []Value{{Text: e.Value}}})
	}
	sec.Options = opts
	var want, got bytes.Buffer
	before.Export(&want)
	after.Export(&got)
	if want.String() != got.String() {
		return fmt.Errorf("%s: setting %s.%s by editing its line would change more than that option (is it set twice?); %s", name, e.Section, e.Option, errNotEdits)
	}
	return nil
}

func splitNL(line string) (body, nl string) {
	if strings.HasSuffix(line, "\r\n") {
		return line[:len(line)-2], "\r\n"
	}
	if strings.HasSuffix(line, "\n") {
		return line[:len(line)-1], "\n"
	}
	return line, ""
}

func validName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !isAlnum(c) && c != '_' {
			return false
		}
	}
	return true
}

// AddSection returns src with a new section appended at the end, written
// as `uci add`/LuCI would (name "" makes an anonymous one), followed by
// its options in the given order. An existing section of that name is an
// error: reopening it would merge the options instead.
func AddSection(name string, src []byte, typ, secName string, opts [][2]string) ([]byte, error) {
	before, err := Parse(name, bytes.NewReader(src))
	if err != nil {
		return nil, err
	}
	if !validName(typ) {
		return nil, fmt.Errorf("%s: section type %q: use letters, digits and _", name, typ)
	}
	if secName != "" {
		if !validName(secName) {
			return nil, fmt.Errorf("%s: section name %q: use letters, digits and _", name, secName)
		}
		if s := before.Lookup(secName); s != nil {
			return nil, fmt.Errorf("%s:%d: a section named %q exists already", name, s.Line, secName)
		}
	}
	var b strings.Builder
	b.Write(src)
	if len(src) > 0 && !bytes.HasSuffix(src, []byte("\n")) {
		b.WriteString("\n")
	}
	b.WriteString("\nconfig " + typ)
	if secName != "" {
		b.WriteString(" " + quote(secName))
	}
	b.WriteString("\n")
	want := &Section{Type: typ, Name: secName}
	for _, o := range opts {
		if !validName(o[0]) || o[1] == "" || strings.ContainsAny(o[1], "\x00\n\r") {
			return nil, fmt.Errorf("%s: option %q %q cannot be written on one line", name, o[0], o[1])
		}
		b.WriteString("\toption " + o[0] + " " + quote(o[1]) + "\n")
		want.Options = append(want.Options, &Option{Name: o[0], Values: []Value{{Text: o[1]}}})
	}
	out := []byte(b.String())
	before.Sections = append(before.Sections, want)
	if err := same(name, before, out); err != nil {
		return nil, err
	}
	return out, nil
}

// DeleteSection returns src without the section ref: its `config` line
// and everything up to the next section (options, comments and blank
// lines inside it). A section that is reopened by a second `config` line,
// or has a line sqm cannot read as one option, is refused.
func DeleteSection(name string, src []byte, ref string) ([]byte, error) {
	before, err := Parse(name, bytes.NewReader(src))
	if err != nil {
		return nil, err
	}
	sec := before.Lookup(ref)
	if sec == nil || ref == "" {
		return nil, fmt.Errorf("%s: no section %q", name, ref)
	}
	lines := strings.SplitAfter(string(src), "\n")
	end := len(lines) // index of the first line after the section
	for _, s := range before.Sections {
		if s.Line > sec.Line && s.Line-1 < end {
			end = s.Line - 1
		}
	}
	// Comment lines right before the next section describe that one.
	for end > sec.Line && isCommentOrBlank(lines[end-1]) {
		end--
	}
	for i := sec.Line; i < end; i++ {
		body, _ := splitNL(lines[i])
		if !isCommentOrBlank(lines[i]) && !isOptionLine(body) {
			return nil, fmt.Errorf("%s:%d: a line of section %s is not one plain option; %s", name, i+1, ref, errNotEdits)
		}
	}
	if body, _ := splitNL(lines[sec.Line-1]); !isConfigLine(body) {
		return nil, fmt.Errorf("%s:%d: the config line of %s is not alone on its line; %s", name, sec.Line, ref, errNotEdits)
	}
	start := sec.Line - 1
	if start > 0 && strings.TrimSpace(lines[start-1]) == "" {
		start-- // the blank line that separated it from the one before
	}
	out := []byte(strings.Join(append(lines[:start:start], lines[end:]...), ""))
	var keep []*Section
	for _, s := range before.Sections {
		if s != sec {
			keep = append(keep, s)
		}
	}
	before.Sections = keep
	if err := same(name, before, out); err != nil {
		return nil, fmt.Errorf("%s: removing section %s by its lines would change more than it (is it reopened further down?); %s", name, ref, errNotEdits)
	}
	return out, nil
}

func isCommentOrBlank(line string) bool {
	t := strings.TrimSpace(line)
	return t == "" || t[0] == '#'
}

// same checks that out parses to want (compared as uci export would
// write both).
func same(name string, want *File, out []byte) error {
	after, err := Parse(name, bytes.NewReader(out))
	if err != nil {
		return fmt.Errorf("%s: the edited file would not parse (%v); %s", name, err, errNotEdits)
	}
	var w, g bytes.Buffer
	want.Export(&w)
	after.Export(&g)
	if w.String() != g.String() {
		return fmt.Errorf("%s: the edit would change more than intended; %s", name, errNotEdits)
	}
	return nil
}
