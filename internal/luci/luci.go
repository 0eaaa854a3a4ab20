// Package luci keeps the files luci-app-sqm reads true when sqm is the
// backend instead of sqm-scripts, so the LuCI page OpenWrt users know
// works unchanged.
//
// What luci-app-sqm (view/network/sqm.js) reads, besides UCI:
//   - the names in /var/run/sqm/available_qdiscs/ for the qdisc list; an
//     empty directory makes the page say the service is disabled and
//     offer to enable it;
//   - the names matching *.qos in /usr/lib/sqm/ for the recipe list,
//     storing the chosen name (with .qos) in the script option;
//   - /usr/lib/sqm/<name>.qos.help, shown as HTML under the list.
//
// It never reads a .qos file's contents (sqm-scripts sourced them from its
// shell scripts; sqm builds the recipes itself), so those only mark that
// the recipe exists.
package luci

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"sqm/internal/config"
	"sqm/internal/plan"
)

// Default locations on OpenWrt (/var/run is a link to /tmp/run).
const (
	QdiscDir  = "/var/run/sqm/available_qdiscs"
	RecipeDir = "/usr/lib/sqm"
)

// help says what each recipe does, in the words a LuCI user choosing one
// needs. A recipe without an entry still gets its files (with a generic
// text), so a new recipe is listed as soon as config.Scripts knows it;
// TestHelpForEveryRecipe asks for a real text.
var help = map[string]string{
	"simplest": "One htb shaper per direction with a single instance of the chosen qdisc (fq_codel by default) under it; " +
		"no priority classes. The least CPU of the htb recipes. With cake as the qdisc, cake alone shapes (one tin).",
	"simple": "htb shaper with three priority classes per direction chosen by the DSCP mark " +
		"(tc filters, no iptables), each with the chosen qdisc (fq_codel by default).",
	"simplest_tbf": "Like simplest, but with a tbf shaper instead of htb: for kernels or CPUs where htb is costly.",
	"piece_of_cake": "cake shapes and queues on its own, one tin, no classification. " +
		"The recommended default: set the qdisc to cake.",
	"layer_cake": "cake with three priority tins by DSCP (diffserv3) on egress; ingress as piece_of_cake unless " +
		"DSCP on ingress is allowed. Set the qdisc to cake.",
	"police": "Egress as piece_of_cake (or simplest without cake); ingress is policed on the interface itself, " +
		"without an IFB: drops above the rate instead of queueing, for routers short of CPU. Latency under " +
		"download load is worse than with an IFB shaper. The bucket holds 20 ms at the rate; advanced " +
		"ingress option 'burst SIZE' (tc units, e.g. burst 250k) sets it.",
	"codel_police": "Egress as police; ingress policed on the interface by an eBPF program that ECN-marks and drops " +
		"like codel as the virtual queue grows, instead of a hard rate limit. No IFB; needs cls_bpf.",
}

// Help returns the help text for a recipe (without .qos).
func Help(recipe string) string {
	if h, ok := help[recipe]; ok {
		return h
	}
	return "sqm recipe " + recipe + "; 'sqm plan' shows the tree it builds."
}

// File is one file to install.
type File struct {
	Name string // relative to RecipeDir
	Data []byte
}

// RecipeFiles returns <recipe>.qos and <recipe>.qos.help for every recipe
// sqm knows, in config.Scripts order.
func RecipeFiles() []File {
	var out []File
	for _, r := range config.Scripts() {
		out = append(out,
			File{r + ".qos", []byte(fmt.Sprintf("# %s: built into sqm (/usr/sbin/sqm); luci-app-sqm lists recipes by these\n# files. 'sqm plan' prints the tc commands this recipe amounts to.\n", r))},
			File{r + ".qos.help", []byte(Help(r) + "\n")})
	}
	return out
}

// WriteRecipes writes RecipeFiles into dir.
func WriteRecipes(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for _, f := range RecipeFiles() {
		if err := os.WriteFile(filepath.Join(dir, f.Name), f.Data, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// Qdiscs are the qdiscs offered in LuCI's list: the leaf qdiscs the
// planner supports, in its order.
func Qdiscs() []string {
	var q []string
	for _, k := range plan.LeafQdiscs {
		q = append(q, k)
	}
	return q
}

// RefreshQdiscs makes dir hold one empty file per qdisc in Qdiscs that
// probe accepts, and none for those it reports missing. probe answers
// for all of them at once (features.Prober.Qdiscs), one error per kind:
// nil for available, an error matching notAvailable for missing, anything
// else for "could not tell": such a qdisc's file is left as it was, and
// the errors are returned after every other qdisc was handled. Files for
// names sqm does not offer are left alone.
//
// It returns the available qdiscs, sorted.
func RefreshQdiscs(dir string, probe func(kinds []string) []error, notAvailable func(error) bool) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("available qdiscs: %w", err)
	}
	var avail []string
	var errs []error
	kinds := Qdiscs()
	perr := probe(kinds)
	for i, k := range kinds {
		path := filepath.Join(dir, k)
		err := perr[i]
		switch {
		case err == nil:
			avail = append(avail, k)
			f, ferr := os.OpenFile(path, os.O_CREATE|os.O_WRONLY, 0o644)
			if ferr == nil {
				ferr = f.Close()
			}
			if ferr != nil {
				errs = append(errs, fmt.Errorf("available qdiscs: %w", ferr))
			}
		case notAvailable(err):
			if rerr := os.Remove(path); rerr != nil && !errors.Is(rerr, os.ErrNotExist) {
				errs = append(errs, fmt.Errorf("available qdiscs: %w", rerr))
			}
		default:
			errs = append(errs, fmt.Errorf("available qdiscs: probing %s: %w", k, err))
		}
	}
	slices.Sort(avail)
	return avail, errors.Join(errs...)
}

// Summary is a one-line account of a refresh for the daemon's log.
func Summary(avail []string) string {
	if len(avail) == 0 {
		return "none"
	}
	return strings.Join(avail, " ")
}
