package kernel

import (
	"bufio"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sqm/internal/plan"
)

var updateRequests = flag.Bool("update-requests", false, "rewrite testdata/requests-*.txt from the current encoder")

// goldenPlans reads every plan of internal/plan's golden set.
func goldenPlans(t *testing.T) (names []string, plans map[string][]*plan.Plan, variants map[string][]string) {
	files, err := filepath.Glob("../plan/testdata/*.jsonl")
	if err != nil || len(files) == 0 {
		t.Fatalf("no golden plans: %v", err)
	}
	plans, variants = map[string][]*plan.Plan{}, map[string][]string{}
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".jsonl")
		fh, err := os.Open(f)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(fh)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			var line struct {
				Variant string     `json:"variant"`
				Plan    *plan.Plan `json:"plan"`
			}
			if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			if line.Plan == nil {
				continue
			}
			plans[name] = append(plans[name], line.Plan)
			variants[name] = append(variants[name], line.Variant)
		}
		fh.Close()
		if err := sc.Err(); err != nil {
			t.Fatal(err)
		}
		names = append(names, name)
	}
	return names, plans, variants
}

// planOps is every request Apply sends for p, in order (the bpf filter's
// program is loaded at run time and has no fixed bytes: left out).
func planOps(p *plan.Plan) ([]op, error) {
	res := func(dev string) (int, error) { return 7, nil }
	var ops []op
	if p.Egress != nil {
		o, err := treeOps(p.Egress, ticksPerMicrosecond, res)
		if err != nil {
			return nil, err
		}
		ops = append(ops, o...)
	}
	if in := p.Ingress; in != nil {
		if in.Shaper != nil {
			o, err := treeOps(in.Shaper, ticksPerMicrosecond, res)
			if err != nil {
				return nil, err
			}
			ops = append(ops, o...)
		}
		for i := range in.Hook {
			o, err := filterOp(p.Interface, &in.Hook[i], ticksPerMicrosecond, res)
			if err != nil {
				return nil, err
			}
			if o.bpf == nil {
				ops = append(ops, o)
			}
		}
	}
	return ops, nil
}

// requestLines renders each op's request (type, flags, data in hex) for
// ifindex 3, one line per op.
func requestLines(t *testing.T, p *plan.Plan, variant string, send func(o *op) (string, error)) []string {
	ops, err := planOps(p)
	if err != nil {
		t.Fatalf("%s: %v", variant, err)
	}
	var lines []string
	for i := range ops {
		s, err := send(&ops[i])
		if err != nil {
			t.Fatalf("%s: %s: %v", variant, ops[i].what(), err)
		}
		lines = append(lines, fmt.Sprintf("%s | %s | %s", variant, ops[i].what(), s))
	}
	return lines
}

func ownRequest(o *op) (string, error) {
	m := o.request(3)
	return fmt.Sprintf("%d %#x %s", m.Header.Type, uint16(m.Header.Flags), hex.EncodeToString(m.Data)), nil
}

func byteOrderName() string {
	if isBigEndian() {
		return "be"
	}
	return "le"
}

func isBigEndian() bool { return binary.NativeEndian.Uint16([]byte{0, 1}) == 1 }

// TestRequestsGolden: every request sqm sends for the golden plans is byte
// for byte the one in testdata/requests-<byte order>/. The little-endian
// files were written by go-tc v0.4.8 (TestCaptureGoTC, commit 230014e)
// for the ops it encoded then, and by sqm's own encoder for the rest, so
// replacing go-tc changed nothing the kernel receives. -update-requests
// rewrites them from the current encoder (for a deliberate change, or to
// create the big-endian set on a big-endian machine once its requests
// are known to be right).
func TestRequestsGolden(t *testing.T) {
	names, plans, variants := goldenPlans(t)
	dir := filepath.Join("testdata", "requests-"+byteOrderName())
	if _, err := os.Stat(dir); os.IsNotExist(err) && !*updateRequests {
		t.Skipf("no %s: no golden requests for this byte order yet (create them with -update-requests)", dir)
	}
	for _, n := range names {
		var lines []string
		for i, p := range plans[n] {
			lines = append(lines, requestLines(t, p, variants[n][i], ownRequest)...)
		}
		got := strings.Join(lines, "\n") + "\n"
		file := filepath.Join(dir, n+".txt")
		if *updateRequests {
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(file, []byte(got), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		want, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		gl, wl := strings.Split(got, "\n"), strings.Split(string(want), "\n")
		if len(gl) != len(wl) {
			t.Errorf("%s: %d requests, want %d", n, len(gl), len(wl))
			continue
		}
		for i := range gl {
			if gl[i] != wl[i] {
				t.Errorf("%s line %d:\n got %s\nwant %s", n, i+1, gl[i], wl[i])
			}
		}
	}
}
