package luci

import (
	"bytes"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"sqm/internal/config"
)

var update = flag.Bool("update", false, "rewrite dist/openwrt/recipes from the code")

// distDir holds the generated recipe files the OpenWrt package installs
// into /usr/lib/sqm (committed, like dist/sqm.8, because the SDK builds
// for the router's CPU and cannot run sqm on the build host).
const distDir = "../../dist/openwrt/recipes"

// TestDistRecipesCurrent fails when dist/openwrt/recipes differs from
// RecipeFiles: a recipe added to config.Scripts must ship its files.
func TestDistRecipesCurrent(t *testing.T) {
	if *update {
		os.RemoveAll(distDir)
		if err := WriteRecipes(distDir); err != nil {
			t.Fatal(err)
		}
	}
	ents, err := os.ReadDir(distDir)
	if err != nil {
		t.Fatal(err)
	}
	want := RecipeFiles()
	var names []string
	for _, f := range want {
		names = append(names, f.Name)
		got, err := os.ReadFile(filepath.Join(distDir, f.Name))
		if err != nil || !bytes.Equal(got, f.Data) {
			t.Errorf("%s/%s is stale or missing (go test ./internal/luci -update): %v", distDir, f.Name, err)
		}
	}
	for _, e := range ents {
		if !slices.Contains(names, e.Name()) {
			t.Errorf("%s/%s is no recipe sqm knows (go test ./internal/luci -update removes it)", distDir, e.Name())
		}
	}
}

// TestRecipeFilesAsLuCIReadsThem checks the files against what
// luci-app-sqm does with them: it lists names matching /\.qos$/ and reads
// <name>.help, which it inserts into the page as HTML.
func TestRecipeFilesAsLuCIReadsThem(t *testing.T) {
	files := map[string][]byte{}
	for _, f := range RecipeFiles() {
		files[f.Name] = f.Data
	}
	qos := regexp.MustCompile(`\.qos$`)
	var listed []string
	for name := range files {
		if qos.MatchString(name) {
			listed = append(listed, name)
		}
	}
	slices.Sort(listed)
	var want []string
	for _, s := range config.Scripts() {
		want = append(want, s+".qos")
	}
	slices.Sort(want)
	if !slices.Equal(listed, want) {
		t.Fatalf("LuCI would list %v, want every recipe %v", listed, want)
	}
	for _, name := range listed {
		h, ok := files[name+".help"]
		if !ok || len(bytes.TrimSpace(h)) == 0 {
			t.Errorf("%s.help missing or empty", name)
		}
		if bytes.ContainsAny(h, "<>&") {
			t.Errorf("%s.help has HTML metacharacters (LuCI inserts it as HTML): %q", name, h)
		}
		// The value LuCI stores is accepted by the config parser.
		f, err := config.Parse("sqm", strings.NewReader("config queue 'q'\n\toption enabled '1'\n\toption interface 'eth0'\n"+
			"\toption download '20000'\n\toption upload '5000'\n\toption script '"+name+"'\n"))
		if err != nil {
			t.Errorf("script %q from LuCI's list: %v", name, err)
		} else if got := strings.TrimSuffix(f.Queues[0].Script, ".qos"); got != strings.TrimSuffix(name, ".qos") {
			t.Errorf("script %q parsed as %q", name, f.Queues[0].Script)
		}
	}
}

// TestHelpForEveryRecipe: the generic fallback keeps a new recipe listed,
// but a recipe deserves a description.
func TestHelpForEveryRecipe(t *testing.T) {
	for _, s := range config.Scripts() {
		if _, ok := help[s]; !ok {
			t.Errorf("recipe %s has no help text in internal/luci (LuCI shows the generic one)", s)
		}
	}
}

var errMissing = errors.New("missing")

func TestRefreshQdiscs(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "available_qdiscs")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	// Stale: cake was available before, its module is gone now; sfq
	// cannot be probed this time; "foreign" is not sqm's.
	for _, n := range []string{"cake", "sfq", "foreign"} {
		os.WriteFile(filepath.Join(dir, n), nil, 0o644)
	}
	probe := func(kinds []string) []error {
		errs := make([]error, len(kinds))
		for i, k := range kinds {
			switch k {
			case "fq_codel", "pfifo", "bfifo":
			case "sfq":
				errs[i] = errors.New("permission denied")
			default:
				errs[i] = errMissing
			}
		}
		return errs
	}
	avail, err := RefreshQdiscs(dir, probe, func(err error) bool { return errors.Is(err, errMissing) })
	if err == nil || !strings.Contains(err.Error(), "probing sfq: permission denied") {
		t.Errorf("err = %v, want the inconclusive sfq probe reported", err)
	}
	if want := []string{"bfifo", "fq_codel", "pfifo"}; !slices.Equal(avail, want) {
		t.Errorf("available %v, want %v", avail, want)
	}
	ents, _ := os.ReadDir(dir)
	var got []string
	for _, e := range ents {
		got = append(got, e.Name())
	}
	if want := []string{"bfifo", "foreign", "fq_codel", "pfifo", "sfq"}; !slices.Equal(got, want) {
		t.Errorf("directory holds %v, want %v (cake removed, sfq kept as it was, foreign untouched)", got, want)
	}
}

func TestQdiscsAreThePlannersLeaves(t *testing.T) {
	q := Qdiscs()
	for _, k := range []string{"cake", "fq_codel", "pfifo"} {
		if !slices.Contains(q, k) {
			t.Errorf("Qdiscs() = %v lacks %s", q, k)
		}
	}
}
