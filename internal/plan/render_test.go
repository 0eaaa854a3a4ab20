package plan

import "testing"

func TestOneLine(t *testing.T) {
	for in, want := range map[string]string{
		"":              "",
		"wan":           "wan",
		"a\nb\r\nc":     "a b  c",
		"bad\xffutf8\n": "bad\xffutf8 ",
	} {
		if got := oneLine(in); got != want {
			t.Errorf("oneLine(%q) = %q, want %q", in, got, want)
		}
	}
}
