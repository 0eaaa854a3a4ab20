// Command routervm boots the router CPUs make test covers, one VM each,
// and runs sqm's router build through a smoke on a real interface there:
// a 32-bit little-endian MIPS (Debian's 4kc-malta kernel on qemu's Malta
// board with a 24Kc, the ramips/mt7621 class) and an ARMv7 (Debian's armmp
// kernel on qemu's virt board with a Cortex-A15, the ipq40xx/mvebu class).
//
//	go run ./tools/routervm [-arch mipsle,arm] [-keep] [-refresh] [-v]
//
// For each CPU it builds sqm as the router package is built (static,
// stripped, -tags sqm_nolab,sqm_notest,sqm_noweb,sqm_noautorate; -tags measures another
// build), puts it with that
// architecture's busybox-static and the qdisc modules into an initramfs
// (internal/vm's standalone mode: no host share, the host's binaries are
// of no use to the guest), boots it and runs smoke.sh: piece_of_cake with
// ATM framing, simple/fq_codel and codel_police started, checked and
// stopped on a veth, sqm status --json/--prom, the daemon shaping an
// interface that appears after it started, and the daemon's peak RSS.
// The guest prints a PASS or FAIL line per step and sends the JSON and
// Prometheus text back over the console; this side parses them and fails
// the run on a FAIL, a missing step, data that does not check out, a
// daemon over its RSS budget on a CPU that has one, or a timeout.
//
// The kernels and busyboxes come from Debian's archive with apt-get
// download (a private apt state: the host's is not touched) into a cache
// directory, $SQM_ROUTERVM_CACHE or /var/cache/sqm-routervm (root) or the
// user's cache directory; later runs use the cache without the network.
// The VMs run one after the other under /tmp/sqm-vm.lock, the lock every
// VM user on a shared machine takes. Exit status 1 on a failure, 2 for
// bad usage.
package main

import (
	"bytes"
	"context"
	_ "embed"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"sqm/internal/vm"
)

// DaemonRSSBudgetMIPSLE is the most the daemon's peak resident set
// (VmHWM) may be on the mipsel VM with one interface shaped (issue 24:
// routers with 128 MB of RAM run it beside everything else). A run over
// it fails.
const DaemonRSSBudgetMIPSLE = 8 << 20

// target is one router CPU.
type target struct {
	Arch      vm.Arch
	DebArch   string   // Debian's name for the architecture
	KernelPkg string   // the kernel metapackage
	GoEnv     []string // GOARCH and its variant
	// RSSBudget is the daemon's VmHWM limit in bytes; 0: measured and
	// reported only.
	RSSBudget int64
}

var targets = []target{
	{Arch: vm.MIPSLE, DebArch: "mipsel", KernelPkg: "linux-image-4kc-malta", GoEnv: []string{"GOARCH=mipsle", "GOMIPS=softfloat"}, RSSBudget: DaemonRSSBudgetMIPSLE},
	{Arch: vm.ARMv7, DebArch: "armhf", KernelPkg: "linux-image-armmp", GoEnv: []string{"GOARCH=arm", "GOARM=7"}},
}

// routerTags is the router package's build (dist/openwrt, make sizes'
// "minimal" column).
const routerTags = "sqm_nolab,sqm_notest,sqm_noweb,sqm_noautorate"

// guestModules are loaded at boot, with what they depend on; fq_codel is
// built into Debian's kernels. The smoke's recipes need the rest: cake,
// htb, the ingress/clsact hook, u32 and matchall filters, the mirred
// redirect to the IFB, bpf for codel_police, and the veth, dummy and IFB
// devices.
var guestModules = []string{"sch_cake", "sch_htb", "sch_ingress", "cls_u32", "cls_matchall", "cls_bpf", "act_mirred", "act_bpf", "act_police", "act_gact", "ifb", "dummy", "veth"}

//go:embed smoke.sh
var smokeScript []byte

// vmLock is the lock every VM user on a shared machine takes (vmtest's
// callers, sqm lab --vm's benches), so that two emulated CPUs do not
// share the host's two cores.
const vmLock = "/tmp/sqm-vm.lock"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("routervm", flag.ContinueOnError)
	fs.SetOutput(stderr)
	archs := fs.String("arch", "mipsle,arm", "comma-separated `list` of router CPUs to boot: mipsle, arm")
	keep := fs.Bool("keep", false, "keep the work directory (binaries, initramfs inputs, console logs)")
	refresh := fs.Bool("refresh", false, "download the kernels and busyboxes again even if cached")
	verbose := fs.Bool("v", false, "print each VM's console as it runs")
	timeout := fs.Duration("timeout", 8*time.Minute, "timeout for one VM, boot included")
	cache := fs.String("cache", defaultCacheDir(), "`dir` the Debian kernels and busyboxes are cached in")
	tags := fs.String("tags", routerTags, "build `tags` of the sqm under test (to measure another build, e.g. sqm_nolab)")
	gcflags := fs.String("gcflags", "", "the -gcflags `argument` of the sqm under test (make passes dist/build.mk's, e.g. all=-l)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "routervm: unexpected arguments %q\n", fs.Args())
		return 2
	}
	var sel []target
	for _, a := range strings.Split(*archs, ",") {
		found := false
		for _, t := range targets {
			if t.Arch.Name == a {
				sel = append(sel, t)
				found = true
			}
		}
		if !found {
			fmt.Fprintf(stderr, "routervm: -arch: unknown CPU %q (known: mipsle, arm)\n", a)
			return 2
		}
	}
	logf := func(f string, a ...any) { fmt.Fprintf(stdout, f+"\n", a...) }

	work, err := os.MkdirTemp("", "sqm-routervm-")
	if err != nil {
		fmt.Fprintf(stderr, "routervm: %v\n", err)
		return 1
	}
	if *keep {
		logf("routervm: work directory %s", work)
	} else {
		defer os.RemoveAll(work)
	}

	// Downloads and builds first, outside the VM lock: they need the
	// network and the compiler, not the emulator.
	type prepared struct {
		t   target
		kit guestKit
		sqm []byte
	}
	var ready []prepared
	failed := false
	for _, t := range sel {
		kit, err := loadKit(ctx, *cache, t, *refresh, logf)
		if err != nil {
			fmt.Fprintln(stdout, err)
			fmt.Fprintf(stdout, "FAIL\trouter VM %s [no kernel]\n", t.Arch.Name)
			failed = true
			continue
		}
		bin := filepath.Join(work, "sqm-"+t.Arch.Name)
		if err := buildSQM(ctx, t, *tags, *gcflags, bin, stdout); err != nil {
			fmt.Fprintf(stdout, "routervm: %s: %v\nFAIL\trouter VM %s [build failed]\n", t.Arch.Name, err, t.Arch.Name)
			failed = true
			continue
		}
		data, err := os.ReadFile(bin)
		if err != nil {
			fmt.Fprintln(stdout, err)
			failed = true
			continue
		}
		ready = append(ready, prepared{t, kit, data})
	}
	if len(ready) > 0 {
		unlock, err := lockVMs(stdout)
		if err != nil {
			fmt.Fprintf(stderr, "routervm: %v\n", err)
			return 1
		}
		defer unlock()
	}
	for _, p := range ready {
		if !smoke(ctx, p.t, p.kit, p.sqm, work, *timeout, *verbose, stdout) {
			failed = true
		}
	}
	if failed {
		return 1
	}
	return 0
}

// buildSQM builds the router package's sqm for t.
func buildSQM(ctx context.Context, t target, tags, gcflags, out string, stdout io.Writer) error {
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-tags", tags, "-gcflags", gcflags, "-ldflags", "-s -w", "-o", out, "./cmd/sqm")
	cmd.Env = append(append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux"), t.GoEnv...)
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = stdout, &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go build (%s, -tags %s): %v\n%s", strings.Join(t.GoEnv, " "), tags, err, stderr.String())
	}
	return nil
}

// lockVMs takes vmLock, saying so if it has to wait. If a process this
// one runs under already holds it (flock /tmp/sqm-vm.lock make test),
// waiting would deadlock: that lock is ours already.
func lockVMs(stdout io.Writer) (func(), error) {
	f, err := os.OpenFile(vmLock, os.O_CREATE|os.O_RDWR, 0o666)
	if err != nil {
		return nil, fmt.Errorf("VM lock: %w", err)
	}
	if pid := ancestorHolds(f); pid > 0 {
		fmt.Fprintf(stdout, "routervm: %s is held by process %d, which this run is part of\n", vmLock, pid)
		return func() { f.Close() }, nil
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		fmt.Fprintf(stdout, "routervm: waiting for %s (another VM is running)\n", vmLock)
		start := time.Now()
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
			f.Close()
			return nil, fmt.Errorf("VM lock: %w", err)
		}
		fmt.Fprintf(stdout, "routervm: got %s after %.0f s\n", vmLock, time.Since(start).Seconds())
	}
	return func() { f.Close() }, nil
}

// ancestorHolds returns the PID of a parent (or further ancestor) of this
// process that holds a flock on f's file, from /proc/locks, or 0.
func ancestorHolds(f *os.File) int {
	var st syscall.Stat_t
	if err := syscall.Fstat(int(f.Fd()), &st); err != nil {
		return 0
	}
	locks, err := os.ReadFile("/proc/locks")
	if err != nil {
		return 0
	}
	holders := map[int]bool{}
	for _, l := range strings.Split(string(locks), "\n") {
		// 1: FLOCK  ADVISORY  WRITE 1234 fd:01:5678 0 EOF
		fl := strings.Fields(l)
		if len(fl) < 6 || fl[1] != "FLOCK" {
			continue
		}
		dev := strings.Split(fl[5], ":")
		if len(dev) != 3 || dev[2] != strconv.FormatUint(st.Ino, 10) {
			continue
		}
		if pid, err := strconv.Atoi(fl[4]); err == nil {
			holders[pid] = true
		}
	}
	for pid, depth := os.Getppid(), 0; pid > 1 && depth < 64; depth++ {
		if holders[pid] {
			return pid
		}
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			return 0
		}
		// pid (comm) state ppid ...: comm may hold spaces and parens.
		rest := string(stat[strings.LastIndexByte(string(stat), ')')+1:])
		f := strings.Fields(rest)
		if len(f) < 2 {
			return 0
		}
		if pid, err = strconv.Atoi(f[1]); err != nil {
			return 0
		}
	}
	return 0
}

// smoke boots t's VM with sqm inside, runs smoke.sh and checks what comes
// back. It prints an ok or FAIL line and returns whether the run passed.
func smoke(ctx context.Context, t target, kit guestKit, sqm []byte, work string, timeout time.Duration, verbose bool, stdout io.Writer) bool {
	var console bytes.Buffer
	var w io.Writer = &console
	if verbose {
		w = io.MultiWriter(&console, stdout)
	}
	res, err := vm.Boot(ctx, vm.Config{
		Arch:       t.Arch,
		Kernel:     vm.Kernel{Image: kit.Image, Release: kit.Release, Modules: kit.Modules},
		Standalone: true,
		Busybox:    kit.Busybox,
		Modules:    guestModules,
		Files: []vm.File{
			{Path: "/bin/sqm", Mode: 0o755, Data: sqm},
			{Path: "/smoke.sh", Mode: 0o644, Data: smokeScript},
		},
		Command:  []string{"/bin/sh", "/smoke.sh"},
		MemoryMB: 256,
		Timeout:  timeout,
		// The kernel's console log level stays at errors (3): warnings
		// printed in the middle of a data block's line would break it.
		// A soft lockup still shows (and panics the guest).
		Stdout: w,
	})
	log := filepath.Join(work, t.Arch.Name+".console.log")
	os.WriteFile(log, console.Bytes(), 0o644)
	name := fmt.Sprintf("router VM %s (%s, kernel %s)", t.Arch.Name, strings.Join(t.Arch.Args, " "), kit.Release)
	if err != nil {
		fmt.Fprintf(stdout, "%s\nFAIL\t%s [%v]\n", console.String(), name, err)
		return false
	}
	rep := parseConsole(console.String())
	problems := rep.check(t)
	if res.ExitCode != 0 {
		problems = append(problems, fmt.Sprintf("the smoke script exited %d", res.ExitCode))
	}
	fmt.Fprintf(stdout, "routervm: %s: %d steps passed; daemon VmHWM %s, VmRSS %s%s; boot %.1f s, total %.1f s\n",
		t.Arch.Name, len(rep.Pass), kb(rep.HWM), kb(rep.RSS), budgetNote(t), res.Boot.Seconds(), res.Total.Seconds())
	if len(problems) > 0 {
		if !verbose {
			fmt.Fprintf(stdout, "console:\n%s\n", console.String())
		}
		for _, p := range problems {
			fmt.Fprintf(stdout, "routervm: %s: %s\n", t.Arch.Name, p)
		}
		fmt.Fprintf(stdout, "FAIL\t%s\t%.1fs\n", name, res.Total.Seconds())
		return false
	}
	fmt.Fprintf(stdout, "ok  \t%s\t%.1fs\n", name, res.Total.Seconds())
	return true
}

func kb(b int64) string {
	if b < 0 {
		return "?"
	}
	return fmt.Sprintf("%.1f MB", float64(b)/(1<<20))
}

func budgetNote(t target) string {
	if t.RSSBudget == 0 {
		return " (no budget on this CPU)"
	}
	return fmt.Sprintf(" (budget %s)", kb(t.RSSBudget))
}
