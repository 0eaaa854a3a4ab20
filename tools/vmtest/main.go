// Command vmtest runs the project's TestVM* tests inside one qemu VM on
// Debian's full kernel (see internal/vm), because the host kernel lacks
// cake, fq_codel, netem, police and the other modules those tests need.
//
//	go run ./tools/vmtest [-run REGEX] [-bench REGEX] [-timeout D] [PKG...]
//
// Each package whose test files declare a TestVM (or BenchmarkVM) function
// is built as a static test binary on the host; one VM boots and runs every
// binary in its package directory (so testdata/ works) with -test.run
// '^TestVM' narrowed by -run, and with -bench also the BenchmarkVM
// benchmarks it selects. Output is `go test -v` output plus an ok/FAIL line
// per package and a count of the tests that ran, passed, failed and
// skipped. The exit status is 1 if a test fails, a binary crashes, the VM
// does not boot, or a package's selected VM tests did not really run (none
// ran, or all of them skipped: a VM test that skips inside the VM proves
// nothing); 2 for bad usage.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"

	"sqm/internal/vm"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// pkg is one package with VM tests.
type pkg struct {
	ImportPath, Dir string
	ModuleDir       string   // root of the package's module ("" if none)
	Files           []string // *_test.go files, absolute
	Tests           []string // TestVM* and BenchmarkVM* functions found in the sources
	Bin             string   // file name of the test binary in the work dir
	Pattern         string   // -test.run pattern
	BenchPattern    string   // -test.bench pattern, "" for no benchmarks
	Benches         int      // number of benchmarks BenchPattern selects
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("vmtest", flag.ContinueOnError)
	fs.SetOutput(stderr)
	runRe := fs.String("run", "", "only run TestVM tests (and subtests) matching this `regex` too")
	timeout := fs.Duration("timeout", 10*time.Minute, "per-package test timeout (-test.timeout)")
	vmTimeout := fs.Duration("vmtimeout", 60*time.Minute, "timeout for the whole VM run")
	keep := fs.Bool("keep", false, "keep the work directory with binaries and logs")
	cpuprofile := fs.Bool("cpuprofile", false, "write each test binary's CPU profile (go test -cpuprofile) to BIN.cpu.prof in the work directory, which is kept (go tool pprof BIN BIN.cpu.prof), and each sqm process it runs as itself (the lab's autorate daemon) to BIN.child.PID.cpu.prof")
	benchRe := fs.String("bench", "", "also run the BenchmarkVM benchmarks matching this `regex` (\".\" for all)")
	benchtime := fs.String("benchtime", "", "benchmark `time` or count (go test's -benchtime: 2s, 100x)")
	var env envList
	fs.Var(&env, "env", "add `KEY=VALUE` to the tests' environment in the VM (repeatable), e.g. a switch a test reads; the VM's environment is otherwise clean")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: go run ./tools/vmtest [-run REGEX] [-bench REGEX] [-timeout D] [-env KEY=VALUE] [PKG...]")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return 2
	}
	patterns := fs.Args()
	if len(patterns) == 0 {
		patterns = []string{"./..."}
	}
	topRe, subRe, err := splitRun(*runRe)
	if err != nil {
		fmt.Fprintf(stderr, "vmtest: -run %q: %v\n", *runRe, err)
		return 2
	}
	var benchSel *regexp.Regexp
	if *benchRe != "" {
		if benchSel, err = regexp.Compile(*benchRe); err != nil {
			fmt.Fprintf(stderr, "vmtest: -bench %q: %v\n", *benchRe, err)
			return 2
		}
	}
	start := time.Now()

	pkgs, err := listPackages(ctx, patterns)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	var selected []*pkg
	for _, p := range pkgs {
		if len(p.Tests) == 0 {
			continue
		}
		selected = append(selected, p)
	}
	shares := sharesFor(selected)
	if len(selected) == 0 {
		fmt.Fprintln(stdout, "vmtest: no package has TestVM tests; no VM booted")
		return 0
	}

	work, err := os.MkdirTemp("", "sqm-vmtest-")
	if err != nil {
		fmt.Fprintf(stderr, "vmtest: %v\n", err)
		return 1
	}
	if *keep || *cpuprofile {
		fmt.Fprintf(stdout, "vmtest: work directory %s\n", work)
	} else {
		defer os.RemoveAll(work)
	}

	buildStart := time.Now()
	var torun []*pkg
	failed := false
	for _, p := range selected {
		p.Bin = strings.NewReplacer("/", "_", ".", "_").Replace(p.ImportPath) + ".test"
		if err := build(ctx, p, filepath.Join(work, p.Bin), stderr); err != nil {
			fmt.Fprintf(stdout, "FAIL\t%s [build failed]\n", p.ImportPath)
			failed = true
			continue
		}
		names, err := listTests(ctx, filepath.Join(work, p.Bin))
		if err != nil {
			fmt.Fprintf(stdout, "FAIL\t%s [cannot list tests: %v]\n", p.ImportPath, err)
			failed = true
			continue
		}
		var keepNames, keepBench []string
		for _, n := range names {
			switch {
			case strings.HasPrefix(n, "TestVM") && (topRe == nil || topRe.MatchString(n)):
				keepNames = append(keepNames, regexp.QuoteMeta(n))
			case strings.HasPrefix(n, "BenchmarkVM") && benchSel != nil && benchSel.MatchString(n):
				keepBench = append(keepBench, regexp.QuoteMeta(n))
			}
		}
		if len(keepNames) == 0 && len(keepBench) == 0 {
			fmt.Fprintf(stdout, "?   \t%s\t[no TestVM tests match -run]\n", p.ImportPath)
			continue
		}
		p.Pattern = "^$" // benchmarks only
		if len(keepNames) > 0 {
			p.Pattern = "^(" + strings.Join(keepNames, "|") + ")$"
			if subRe != "" {
				p.Pattern += "/" + subRe
			}
		}
		if len(keepBench) > 0 {
			p.BenchPattern = "^(" + strings.Join(keepBench, "|") + ")$"
			p.Benches = len(keepBench)
		}
		torun = append(torun, p)
	}
	fmt.Fprintf(stdout, "vmtest: %d package(s) with TestVM tests to run, built in %s\n", len(torun), time.Since(buildStart).Round(time.Millisecond))
	if len(torun) == 0 {
		if failed {
			return 1
		}
		return 0
	}

	script := runScript(torun, *timeout, *benchtime, *cpuprofile)
	if err := os.WriteFile(filepath.Join(work, "run.sh"), []byte(script), 0o755); err != nil {
		fmt.Fprintf(stderr, "vmtest: %v\n", err)
		return 1
	}
	sum := &summarizer{w: stdout}
	res, err := vm.Boot(ctx, vm.Config{
		Command: []string{"/bin/sh", vm.GuestOutDir + "/run.sh"},
		OutDir:  work,
		Shares:  shares,
		// Kernel warnings and stacks (a soft lockup, a WARN_ON) show up
		// in the streamed console; the verdict comes from the logs.
		KernelArgs: vm.VerboseKernelArgs,
		Env:        env,
		Timeout:    *vmTimeout,
		Stdout:     sum,
	})
	sum.flush()
	if err != nil {
		fmt.Fprintf(stdout, "vmtest: %v\n", err)
		failed = true
	} else {
		fmt.Fprintf(stdout, "vmtest: VM booted to first command in %s\n", res.Boot.Round(time.Millisecond))
	}
	// The rc files are the authority on crashes: a binary that crashed
	// the VM or never ran has none. The logs say whether the tests really
	// ran: a binary whose tests all skipped exits 0 too.
	fmt.Fprintln(stdout, "vmtest: per package (top-level tests):")
	for _, p := range torun {
		b, err := os.ReadFile(filepath.Join(work, p.Bin+".rc"))
		rc, perr := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil || perr != nil {
			fmt.Fprintf(stdout, "FAIL\t%s [did not finish in the VM]\n", p.ImportPath)
			failed = true
			continue
		}
		var c counts
		if f, err := os.Open(filepath.Join(work, p.Bin+".log")); err == nil {
			c = parseLog(f)
			f.Close()
		}
		verdict := c.verdict(p.Pattern != "^$", p.Benches)
		status := "ok  "
		if rc != 0 || verdict != "" {
			status = "FAIL"
			failed = true
		}
		if rc != 0 && verdict == "" {
			verdict = fmt.Sprintf("test binary exited with status %d", rc)
		}
		fmt.Fprintf(stdout, "%s\t%s\t%s", status, p.ImportPath, c)
		if verdict != "" {
			fmt.Fprintf(stdout, " [%s]", verdict)
		}
		fmt.Fprintln(stdout)
		for _, sk := range c.Skipped {
			fmt.Fprintf(stdout, "    skipped %s\n", sk)
		}
	}
	fmt.Fprintf(stdout, "vmtest: total %s (VM %s)\n", time.Since(start).Round(time.Millisecond), res.Total.Round(time.Millisecond))
	if failed {
		fmt.Fprintln(stdout, "FAIL")
		return 1
	}
	fmt.Fprintln(stdout, "PASS")
	return 0
}

// splitRun splits a go-test style -run pattern at its first top-level
// slash: the first part selects top-level tests (checked here against the
// TestVM list, since two regexes cannot be ANDed in one RE2 pattern), the
// rest is handed to the test binary for subtests.
func splitRun(s string) (*regexp.Regexp, string, error) {
	if s == "" {
		return nil, "", nil
	}
	depth := 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++
		case '[', '(':
			depth++
		case ']', ')':
			depth--
		case '/':
			if depth == 0 {
				re, err := regexp.Compile(s[:i])
				return re, s[i+1:], err
			}
		}
	}
	re, err := regexp.Compile(s)
	return re, "", err
}

// sharesFor returns the directories to share into the VM at their own path
// so that the packages' sources (and testdata) are visible: the module
// root (tests may read ../testdata) of each package that lives under /tmp
// or /run, which the VM covers with its own tmpfs. Elsewhere the read-only
// root share already shows them.
func sharesFor(pkgs []*pkg) []string {
	var out []string
	seen := map[string]bool{}
	for _, p := range pkgs {
		if !hiddenInVM(p.Dir) {
			continue
		}
		d := p.ModuleDir
		if d == "" || !strings.HasPrefix(p.Dir, d) {
			d = p.Dir
		}
		if !seen[d] {
			seen[d] = true
			out = append(out, d)
		}
	}
	return out
}

// hiddenInVM reports whether a host path is covered by the VM's own tmpfs
// mounts.
func hiddenInVM(dir string) bool {
	for _, m := range []string{"/tmp", "/run"} {
		if dir == m || strings.HasPrefix(dir, m+"/") {
			return true
		}
	}
	return false
}

var testVMRe = regexp.MustCompile(`(?m)^func ((?:Test|Benchmark)VM[A-Za-z0-9_]*)\(`)

// listPackages asks go list for the packages and greps their test files
// for TestVM functions, so packages without any are neither built nor run.
func listPackages(ctx context.Context, patterns []string) ([]*pkg, error) {
	args := append([]string{"list", "-e", "-f", "{{.ImportPath}}\t{{.Dir}}\t{{join .TestGoFiles \" \"}} {{join .XTestGoFiles \" \"}}\t{{if .Error}}{{.Error}}{{end}}\t{{with .Module}}{{.Dir}}{{end}}"}, patterns...)
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("vmtest: go list %s: %w", strings.Join(patterns, " "), err)
	}
	var pkgs []*pkg
	for _, line := range strings.Split(strings.TrimRight(string(out), "\n"), "\n") {
		f := strings.Split(line, "\t")
		if len(f) != 5 {
			continue
		}
		if f[3] != "" {
			return nil, fmt.Errorf("vmtest: package %s: %s", f[0], f[3])
		}
		p := &pkg{ImportPath: f[0], Dir: f[1], ModuleDir: f[4]}
		for _, name := range strings.Fields(f[2]) {
			path := filepath.Join(p.Dir, name)
			src, err := os.ReadFile(path)
			if err != nil {
				return nil, fmt.Errorf("vmtest: %w", err)
			}
			p.Files = append(p.Files, path)
			for _, m := range testVMRe.FindAllSubmatch(src, -1) {
				p.Tests = append(p.Tests, string(m[1]))
			}
		}
		pkgs = append(pkgs, p)
	}
	return pkgs, nil
}

// build compiles a static test binary: the VM chroots into the host root,
// but a static binary also runs without it.
func build(ctx context.Context, p *pkg, out string, stderr io.Writer) error {
	cmd := exec.CommandContext(ctx, "go", "test", "-c", "-o", out, p.ImportPath)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	cmd.Stdout, cmd.Stderr = stderr, stderr
	return cmd.Run()
}

// listTests asks the binary which TestVM tests and BenchmarkVM benchmarks
// it really has (the grep can see functions behind build tags or in
// comments).
func listTests(ctx context.Context, bin string) ([]string, error) {
	out, err := exec.CommandContext(ctx, bin, "-test.list", "^(TestVM|BenchmarkVM)").Output()
	if err != nil {
		return nil, err
	}
	var names []string
	for _, l := range strings.Fields(string(out)) {
		if strings.HasPrefix(l, "TestVM") || strings.HasPrefix(l, "BenchmarkVM") {
			names = append(names, l)
		}
	}
	return names, nil
}

// Marker lines the in-VM script prints around each package.
const (
	markBegin = "=== vmtest begin "
	markEnd   = "=== vmtest end "
)

// runScript is the shell script the VM runs: each binary in its package
// directory, output to the console and a log, exit status to <bin>.rc.
func runScript(pkgs []*pkg, timeout time.Duration, benchtime string, cpuprofile bool) string {
	q := func(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }
	var b strings.Builder
	b.WriteString("#!/bin/sh\n# generated by tools/vmtest\nO=" + vm.GuestOutDir + "\n")
	for _, p := range pkgs {
		fmt.Fprintf(&b, "echo %s\n", q(markBegin+p.ImportPath))
		fmt.Fprintf(&b, "cd %s || { echo \"vmtest: no directory %s in the VM\"; echo 125 > $O/%s.rc; }\n", q(p.Dir), p.Dir, p.Bin)
		b.WriteString("s=$(date +%s%N)\n")
		extra := ""
		if p.BenchPattern != "" {
			extra = " -test.bench " + q(p.BenchPattern) + " -test.benchmem"
			if benchtime != "" {
				extra += " -test.benchtime " + q(benchtime)
			}
		}
		if cpuprofile {
			extra += " -test.cpuprofile $O/" + p.Bin + ".cpu.prof"
		}
		env := ""
		if cpuprofile {
			// the sqm processes the test binary runs as itself
			// (clitest.ChildProfile; the lab's autorate daemon)
			env = "SQM_TEST_CPUPROFILE=$O/" + p.Bin + ".child "
		}
		fmt.Fprintf(&b, "{ %s$O/%s -test.v -test.run %s%s -test.timeout %s 2>&1; echo $? > $O/%s.rc; } | tee $O/%s.log\n",
			env, p.Bin, q(p.Pattern), extra, timeout, p.Bin, p.Bin)
		fmt.Fprintf(&b, "echo \"%s%s $(cat $O/%s.rc) $(( ($(date +%%s%%N) - s) / 1000000 ))\"\n", markEnd, p.ImportPath, p.Bin)
	}
	return b.String()
}

// summarizer passes console output through and turns the script's end
// markers into a line with the package's exit status and time.
type summarizer struct {
	w   io.Writer
	buf []byte
}

func (s *summarizer) Write(p []byte) (int, error) {
	s.buf = append(s.buf, p...)
	for {
		i := strings.IndexByte(string(s.buf), '\n')
		if i < 0 {
			break
		}
		s.line(string(s.buf[:i]))
		s.buf = s.buf[i+1:]
	}
	return len(p), nil
}

func (s *summarizer) flush() {
	if len(s.buf) > 0 {
		s.line(string(s.buf))
		s.buf = nil
	}
}

func (s *summarizer) line(l string) {
	switch {
	case strings.HasPrefix(l, markBegin):
		return
	case strings.HasPrefix(l, markEnd):
		f := strings.Fields(strings.TrimPrefix(l, markEnd))
		if len(f) != 3 {
			fmt.Fprintln(s.w, l)
			return
		}
		// Only the exit status and time: whether the package passed is
		// decided after the VM, from its log too (all skipped is a FAIL
		// with exit status 0).
		ms, _ := strconv.Atoi(f[2])
		fmt.Fprintf(s.w, "vmtest: %s exited %s after %.3fs\n", f[0], f[1], float64(ms)/1000)
		return
	}
	fmt.Fprintln(s.w, l)
}

// envList is -env's value: the guest starts with a clean environment
// (vm.Config), so a switch a VM test reads, like SQM_AUTORATE_STEPUP, has to
// be handed in by name.
type envList []string

func (e *envList) String() string { return strings.Join(*e, " ") }

func (e *envList) Set(v string) error {
	k, _, ok := strings.Cut(v, "=")
	if !ok || k == "" || strings.ContainsAny(k, " \t\n'\"") {
		return fmt.Errorf("want KEY=VALUE, got %q", v)
	}
	*e = append(*e, v)
	return nil
}
