package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestParseLogVerdict(t *testing.T) {
	tests := []struct {
		name      string
		log       string
		wantTests bool
		benches   int
		want      counts
		verdict   string // substring; "" means the run counts as real
	}{
		{
			name:      "passed",
			log:       "=== RUN   TestVMA\n    a_test.go:3: hello\n--- PASS: TestVMA (0.00s)\nPASS\n",
			wantTests: true,
			want:      counts{Passed: 1},
		},
		{
			name: "all skipped",
			log: "=== RUN   TestVMA\n    a_test.go:9: not in the VM (SQM_VM=1 is set only inside it)\n--- SKIP: TestVMA (0.00s)\n" +
				"=== RUN   TestVMB\n    b_test.go:4: no cake\n--- SKIP: TestVMB (0.00s)\nPASS\n",
			wantTests: true,
			want:      counts{Skipped: []string{"TestVMA: a_test.go:9: not in the VM (SQM_VM=1 is set only inside it)", "TestVMB: b_test.go:4: no cake"}},
			verdict:   "all 2 VM tests skipped",
		},
		{
			name:      "none ran",
			log:       "testing: warning: no tests to run\nPASS\n",
			wantTests: true,
			verdict:   "no VM test ran",
		},
		{
			// Subtest results are indented and do not count; a skipped
			// subtest's log must not become the parent's reason.
			name: "one passes, one skips, subtests",
			log: "=== RUN   TestVMC\n=== RUN   TestVMC/s\n    c_test.go:5: sub skip\n=== RUN   TestVMC/p\n--- PASS: TestVMC (0.00s)\n" +
				"    --- SKIP: TestVMC/s (0.00s)\n    --- PASS: TestVMC/p (0.00s)\n=== RUN   TestVMD\n--- SKIP: TestVMD (0.00s)\n",
			wantTests: true,
			want:      counts{Passed: 1, Skipped: []string{"TestVMD"}},
		},
		{
			name:      "failed",
			log:       "=== RUN   TestVMA\n    a_test.go:3: boom\n--- FAIL: TestVMA (0.10s)\nFAIL\n",
			wantTests: true,
			want:      counts{Failed: 1},
		},
		{
			name: "benchmarks only, one skipped",
			log: "goos: linux\nBenchmarkVMX\nBenchmarkVMX-2   \t      10\t        13.00 ns/op\t     532 B/op\t       0 allocs/op\n" +
				"BenchmarkVMY\n    x_test.go:7: no vm\n--- SKIP: BenchmarkVMY\nPASS\n",
			benches: 2,
			want:    counts{BenchRan: 1, BenchSkipped: 1},
			verdict: "1 of 2 selected benchmarks ran",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := parseLog(strings.NewReader(tt.log))
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("counts %+v, want %+v", got, tt.want)
			}
			v := got.verdict(tt.wantTests, tt.benches)
			if (tt.verdict == "") != (v == "") || !strings.Contains(v, tt.verdict) {
				t.Errorf("verdict %q, want %q", v, tt.verdict)
			}
		})
	}
}

// TestParseLogRealBinary runs a real test binary built from a throwaway
// module, so the parser is checked against the format of the Go toolchain
// in use rather than against strings written by hand. The binary's tests
// skip unless SQM_VM=1, like the project's VM tests.
func TestParseLogRealBinary(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a test binary; skipped with -short")
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command on PATH")
	}
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module x\n\ngo 1.21\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "x_test.go"), []byte(`package x

import (
	"os"
	"testing"
)

func need(t testing.TB) {
	if os.Getenv("SQM_VM") != "1" {
		t.Skip("needs the VM")
	}
}

func TestVMOne(t *testing.T) { need(t) }
func TestVMTwo(t *testing.T) { need(t); t.Run("sub", func(t *testing.T) {}) }
func BenchmarkVMThree(b *testing.B) {
	need(b)
	for i := 0; i < b.N; i++ {
	}
}
`), 0o644)
	bin := filepath.Join(dir, "x.test")
	cmd := exec.Command(goBin, "test", "-c", "-o", bin, ".")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOWORK=off")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go test -c: %v\n%s", err, out)
	}
	for _, tt := range []struct {
		vm      string
		want    string
		verdict string
	}{
		{"0", "2 ran: 0 passed, 0 failed, 2 skipped; 0 benchmarks ran, 1 skipped", "all 2 VM tests skipped"},
		{"1", "2 ran: 2 passed, 0 failed, 0 skipped; 1 benchmarks ran, 0 skipped", ""},
	} {
		run := exec.Command(bin, "-test.v", "-test.run", "^TestVM", "-test.bench", "^BenchmarkVM", "-test.benchtime", "5x")
		run.Env = append(os.Environ(), "SQM_VM="+tt.vm)
		out, err := run.CombinedOutput()
		if err != nil {
			t.Fatalf("SQM_VM=%s: %v\n%s", tt.vm, err, out)
		}
		c := parseLog(strings.NewReader(string(out)))
		if c.String() != tt.want {
			t.Errorf("SQM_VM=%s: %s, want %s\noutput:\n%s", tt.vm, c, tt.want, out)
		}
		if v := c.verdict(true, 1); (v == "") != (tt.verdict == "") || !strings.Contains(v, tt.verdict) {
			t.Errorf("SQM_VM=%s: verdict %q, want %q", tt.vm, v, tt.verdict)
		}
	}
}
