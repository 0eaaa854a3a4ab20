package uci

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestApply(t *testing.T) {
	const base = "# head comment\nconfig queue 'wan'\n\toption download '85000'  # kbit/s\n\toption custom 'kept'\n\n# between\nconfig queue\n\toption interface eth2\n"
	tests := []struct {
		name  string
		src   string
		edits []Edit
		want  string
		err   string
	}{
		{"replace keeps comment", base, []Edit{{"wan", "download", "90000"}},
			strings.Replace(base, "'85000'", "'90000'", 1), ""},
		{"add after last option", base, []Edit{{"wan", "overhead", "44"}},
			strings.Replace(base, "\toption custom 'kept'\n", "\toption custom 'kept'\n\toption overhead '44'\n", 1), ""},
		{"anonymous section by ref", base, []Edit{{"@queue[1]", "interface", "eth3"}},
			strings.Replace(base, "option interface eth2", "option interface 'eth3'", 1), ""},
		{"remove keeps its comment", base, []Edit{{"wan", "download", ""}},
			strings.Replace(base, "\toption download '85000'  # kbit/s\n", "\t# kbit/s\n", 1), ""},
		{"remove line without comment", base, []Edit{{"wan", "custom", ""}},
			strings.Replace(base, "\toption custom 'kept'\n", "", 1), ""},
		{"remove absent is no change", base, []Edit{{"wan", "nope", ""}}, base, ""},
		{"quote in value", base, []Edit{{"wan", "custom", "it's"}},
			strings.Replace(base, "'kept'", `'it'\''s'`, 1), ""},
		{"empty section", "config queue 'a'\n", []Edit{{"a", "enabled", "1"}},
			"config queue 'a'\n\toption enabled '1'\n", ""},
		{"no final newline", "config queue 'a'\n\toption x '1'", []Edit{{"a", "y", "2"}},
			"config queue 'a'\n\toption x '1'\n\toption y '2'\n", ""},
		{"short keyword", "c queue 'a'\n  o x 1\n", []Edit{{"a", "x", "2"}}, "c queue 'a'\n  o x '2'\n", ""},
		{"several edits", base, []Edit{{"wan", "download", "1"}, {"wan", "upload", "2"}},
			strings.Replace(base, "\toption download '85000'  # kbit/s\n\toption custom 'kept'\n", "\toption download '1'  # kbit/s\n\toption custom 'kept'\n\toption upload '2'\n", 1), ""},
		{"empty ref", base, []Edit{{"", "x", "1"}}, "", `no section ""`},
		{"no section", base, []Edit{{"lan", "x", "1"}}, "", `no section "lan"`},
		{"bad option name", base, []Edit{{"wan", "a-b", "1"}}, "", `option name "a-b"`},
		{"line break in value", base, []Edit{{"wan", "x", "a\nb"}}, "", "line break"},
		{"list refused", "config queue 'a'\n\tlist x '1'\n", []Edit{{"a", "x", "2"}}, "", "test:2: x is a list"},
		{"shared line refused", "config queue 'a'\n\toption x '1'; option y '2'\n", []Edit{{"a", "x", "3"}}, "", "test:2: option x is not alone"},
		{"multi-line value refused", "config queue 'a'\n\toption x 'a\nb'\n", []Edit{{"a", "x", "3"}}, "", "not alone"},
		{"set twice refused on remove", "config queue 'a'\n\toption x '1'\n\toption x '2'\n", []Edit{{"a", "x", ""}}, "", "change more than that option"},
		{"syntax error", "config queue 'a\n", []Edit{{"a", "x", "1"}}, "", "test:"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Apply("test", []byte(tt.src), tt.edits)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("err = %v; want %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tt.want {
				t.Errorf("got:\n%s\nwant:\n%s", got, tt.want)
			}
		})
	}
}

// TestApplyGolden edits the commented sample config the way the web page
// does and compares with a reviewed file: every comment stays.
func TestApplyGolden(t *testing.T) {
	src, err := os.ReadFile("../../dist/openwrt/sqm.config")
	if err != nil {
		t.Fatal(err)
	}
	got, err := Apply("sqm.config", src, []Edit{
		{"wan", "download", "50000"}, {"wan", "overhead", "18"},
		{"wan", "eqdisc_opts", "nat dual-srchost ack-filter"}, {"wan", "linklayer_advanced", ""},
	})
	if err != nil {
		t.Fatal(err)
	}
	golden := filepath.Join("testdata", "edit", "sample.golden")
	if *update {
		if err := os.WriteFile(golden, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("edited sample differs from %s (go test -run TestApplyGolden -update to accept)", golden)
	}
	if n, m := bytes.Count(src, []byte("#")), bytes.Count(got, []byte("#")); n != m {
		t.Errorf("comment marks %d -> %d", n, m)
	}
}

// FuzzApply checks that a successful edit parses to the intended value and
// leaves every other line of the file as it was.
func FuzzApply(f *testing.F) {
	f.Add("config queue 'wan'\n\toption download '85000' # c\n", "wan", "download", "1")
	f.Add("config queue\n\toption x y\nconfig queue b\n", "@queue[0]", "z", "")
	f.Add("c q 'a'\n o x \"a\\\"b\"\n", "a", "x", "it's")
	f.Add("config queue 'a'\n\toption x '1'; option y '2'\n", "a", "y", "3")
	f.Fuzz(func(t *testing.T, src, sec, opt, val string) {
		out, err := Apply("f", []byte(src), []Edit{{sec, opt, val}})
		if err != nil {
			return
		}
		f2, err := Parse("f", bytes.NewReader(out))
		if err != nil {
			t.Fatalf("edit produced an unparsable file: %v\n%q", err, out)
		}
		s := f2.Lookup(sec)
		if s == nil {
			t.Fatalf("section %q gone", sec)
		}
		if got, _ := s.Get(opt); got != val {
			t.Fatalf("%s = %q; want %q", opt, got, val)
		}
		// At most one line differs: the input's lines minus one, plus one.
		if !strings.HasSuffix(src, "\n") {
			src += "\n" // Apply ends the last line before adding one
		}
		a := strings.SplitAfter(src, "\n")
		b := strings.SplitAfter(string(out), "\n")
		i := 0
		for i < len(a) && i < len(b) && a[i] == b[i] {
			i++
		}
		j := 0
		for j < len(a)-i && j < len(b)-i && a[len(a)-1-j] == b[len(b)-1-j] {
			j++
		}
		if len(a)-i-j > 2 || len(b)-i-j > 2 {
			t.Fatalf("edit changed more than one place:\n%q\n->\n%q", src, out)
		}
	})
}
