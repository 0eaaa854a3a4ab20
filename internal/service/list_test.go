package service

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestListLikeGlob holds Store.list to the filepath.Glob it replaces: the
// same paths in the same order, and nothing for a missing directory or a
// file where the directory should be.
func TestListLikeGlob(t *testing.T) {
	dir := t.TempDir()
	for _, n := range []string{"eth0.state.json", ".state.json", "wan.pending.json", "b.state.json.tmp", "a.state.jsonx",
		"eth0.pending.json", "x.STATE.json", "lan.state.json"} {
		if err := os.WriteFile(filepath.Join(dir, n), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(dir, "d.state.json"), 0o700); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "eth0.state.json")
	wd, _ := os.Getwd()
	rel, _ := filepath.Rel(wd, dir)
	for _, d := range []string{dir, dir + "/", rel, filepath.Join(dir, "missing"), file} {
		for _, suffix := range []string{".state.json", ".pending.json"} {
			want, err := filepath.Glob(filepath.Join(d, "*"+suffix))
			if err != nil {
				t.Fatal(err)
			}
			if got := (&Store{Dir: d}).list(suffix); !slices.Equal(got, want) {
				t.Errorf("list(%q) in %q = %q, filepath.Glob gives %q", suffix, d, got, want)
			}
		}
	}
}
