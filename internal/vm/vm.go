// Package vm boots Debian's full kernel under qemu and runs one command
// inside it, with the host's root file system shared read-only over 9p.
//
// It exists because the development and CI machines run a minimal kernel
// without cake, fq_codel, netem, police and friends (see
// /work/shared/lab/README.md): tests and `sqm lab --vm` need a kernel that
// has them. KVM does not work on these machines, so qemu emulates (TCG);
// booting to the first command takes a few seconds.
//
// Inside the VM the command runs as root in a chroot of the host root, with
// fresh proc, sys, devtmpfs, and tmpfs on /tmp and /run (so /run/netns is
// writable). Host binaries run as they are. The environment is clean except
// for PATH, HOME=/root, TMPDIR=/tmp, SQM_VM=1 and Config.Env.
package vm

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// GuestOutDir is where Config.OutDir appears inside the VM.
const GuestOutDir = "/run/sqm-out"

// Config describes one VM run. Only Command is required.
type Config struct {
	// Kernel to boot; the zero value means FindKernel().
	Kernel Kernel
	// Command and its arguments, resolved inside the VM (host paths work,
	// except under /tmp and /run, which are fresh tmpfs inside, unless
	// they are in Shares).
	Command []string
	// Env adds KEY=VALUE entries to the command's environment.
	Env []string
	// Dir is the command's working directory inside the VM ("/" if empty).
	Dir string
	// Timeout bounds the whole run including boot; 0 means 10 minutes.
	Timeout time.Duration
	// Stdout receives the command's stdout and stderr (the serial console,
	// without the harness's marker lines); nil discards them.
	Stdout io.Writer
	// OutDir is a host directory shared writable at GuestOutDir, for
	// results and for binaries the command should run (host /tmp is not
	// visible inside). Empty means no writable share.
	OutDir string
	// MemoryMB and CPUs default to 1024 and 2.
	MemoryMB, CPUs int
	// QEMU and Busybox override the binaries found on PATH or in /bin.
	QEMU, Busybox string
	// KernelArgs are appended to the kernel command line (e.g.
	// "loglevel=7" to see boot messages in errors).
	KernelArgs []string
	// Shares are host directories shared read-only into the VM at their
	// own path, mounted after the fresh tmpfs on /tmp and /run. They make
	// a checkout under /tmp (where people clone) visible inside, which the
	// root share alone cannot: the VM's own /tmp hides the host's.
	Shares []string

	// Arch is the guest machine; the zero value is AMD64.
	Arch Arch
	// Standalone boots a guest that does not share the host's root: its
	// whole userland is the initramfs (Busybox, which must then be given
	// and be a static busybox of the guest's architecture, and Files), and
	// Command runs there under busybox sh, not in a chroot of the host.
	// This is how a guest of another CPU (a router's MIPS or ARM) runs:
	// the host's binaries are of no use to it. Modules (names, resolved
	// with their dependencies through Kernel.Modules' modules.dep) are
	// loaded at boot. OutDir and Shares need the host share and are
	// refused; results come back on the console.
	Standalone bool
	Files      []File
	Modules    []string
}

// File is one file put into a standalone guest's initramfs.
type File struct {
	Path string // absolute path in the guest, e.g. /bin/sqm
	Mode uint32 // permission bits, e.g. 0o755
	Data []byte
}

// Arch is a guest machine as qemu emulates it.
type Arch struct {
	Name        string   // for messages: amd64, mipsle, arm
	QEMU        string   // qemu binary looked up on PATH
	QEMUPackage string   // the Debian package that has it
	Args        []string // machine and CPU selection
	Cmdline     string   // the kernel command line before Config.KernelArgs
	CPUs        int      // the default number of CPUs
}

// AMD64 is the guest make test's VM tests and sqm lab --vm run in.
var AMD64 = Arch{
	Name: "amd64", QEMU: "qemu-system-x86_64", QEMUPackage: "qemu-system-x86",
	Args: []string{"-accel", "tcg,thread=multi", "-cpu", "max"}, Cmdline: kernelCmdline, CPUs: 2,
}

// routerCmdline is kernelCmdline without what only x86 has (the IO-APIC
// timer check) and with the console the machine's serial port has.
const routerCmdline = "quiet loglevel=3 panic=-1 rdinit=/init softlockup_panic=1 softlockup_all_cpu_backtrace=1"

// MIPSLE is the router class most OpenWrt devices are (ramips mt7621,
// mipsel_24kc): a MIPS Malta board with a 24Kc, the CPU Debian's
// 4kc-malta kernel runs on. Malta has one CPU.
var MIPSLE = Arch{
	Name: "mipsle", QEMU: "qemu-system-mipsel", QEMUPackage: "qemu-system-mips",
	Args: []string{"-M", "malta", "-cpu", "24Kc"}, Cmdline: "console=ttyS0 " + routerCmdline, CPUs: 1,
}

// ARMv7 is the 32-bit ARM router class (ipq40xx, mvebu): qemu's virt
// board with a Cortex-A15, which Debian's armmp kernel boots on; its
// console is the PL011 UART.
var ARMv7 = Arch{
	Name: "arm", QEMU: "qemu-system-arm", QEMUPackage: "qemu-system-arm",
	Args: []string{"-M", "virt", "-cpu", "cortex-a15"}, Cmdline: "console=ttyAMA0 " + routerCmdline, CPUs: 1,
}

// kernelCmdline is the guest's base command line. no_timer_check: under
// pure emulation on a busy host the kernel's IO-APIC timer check can see
// too few ticks and panic ("IO-APIC + timer doesn't work"); seen here once
// in a loaded run. The check guards real hardware, not TCG.
//
// softlockup_panic=1 softlockup_all_cpu_backtrace=1: a guest CPU stuck for
// more than 20 s (seen in `sqm lab --vm` right after shaping was applied,
// issue 9) otherwise leaves the VM hanging until the run's timeout, minutes
// later, with nothing but the "BUG: soft lockup" line to go on. Now every
// CPU's stack is printed (on the console with loglevel=5 or higher, which
// lab --vm and vmtest ask for) and the panic ends the run at once (panic=-1
// reboots, -no-reboot makes qemu exit), so the run fails in seconds with
// the evidence in its output.
const kernelCmdline = "console=ttyS0 quiet loglevel=3 panic=-1 rdinit=/init no_timer_check softlockup_panic=1 softlockup_all_cpu_backtrace=1"

// VerboseKernelArgs raise the guest console's log level to show kernel
// warnings and stack traces (soft lockups, WARN_ON) among the command's
// output, but not the informational boot and link messages.
var VerboseKernelArgs = []string{"loglevel=5"}

// KernelArgsEnv names an environment variable whose words are appended to
// the guest kernel's command line after Config.KernelArgs, so that any
// command using the VM (vmtest, sqm lab --vm) can be rerun with diagnostics
// such as "ignore_loglevel softlockup_all_cpu_backtrace=1" without a rebuild.
const KernelArgsEnv = "SQM_VM_KERNEL_ARGS"

// Result is what one run measured.
type Result struct {
	ExitCode int
	// Boot is the time from starting qemu to the command starting.
	Boot time.Duration
	// Total is the time from starting qemu to qemu exiting.
	Total time.Duration
}

// Run boots the VM, runs cfg.Command and returns its exit status. err is
// non-nil only if the command could not be run to completion (no kernel,
// VM did not boot, timeout); a failing command is a non-zero exit code.
func Run(ctx context.Context, cfg Config) (int, error) {
	res, err := Boot(ctx, cfg)
	if err != nil {
		return -1, err
	}
	return res.ExitCode, nil
}

// Boot is Run with timings.
func Boot(ctx context.Context, cfg Config) (Result, error) {
	if len(cfg.Command) == 0 {
		return Result{}, errors.New("vm: run: no command given")
	}
	if cfg.Arch.QEMU == "" {
		cfg.Arch = AMD64
	}
	if cfg.Standalone && (cfg.OutDir != "" || len(cfg.Shares) > 0) {
		return Result{}, errors.New("vm: a standalone guest has no host share: OutDir and Shares cannot be used")
	}
	if cfg.Standalone && cfg.Busybox == "" {
		return Result{}, fmt.Errorf("vm: a standalone %s guest needs Config.Busybox: a static busybox for its CPU", cfg.Arch.Name)
	}
	if !cfg.Standalone && (len(cfg.Files) > 0 || len(cfg.Modules) > 0) {
		return Result{}, errors.New("vm: Files and Modules are for a standalone guest (Config.Standalone)")
	}
	for _, d := range cfg.Shares {
		if err := checkShare(d); err != nil {
			return Result{}, err
		}
	}
	if cfg.Kernel.Image == "" {
		k, err := FindKernel()
		if err != nil {
			return Result{}, err
		}
		cfg.Kernel = k
	}
	qemu, err := findQEMU(cfg.QEMU, cfg.Arch)
	if err != nil {
		return Result{}, err
	}
	busybox, err := findBusybox(cfg.Busybox)
	if err != nil {
		return Result{}, err
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = 10 * time.Minute
	}
	if cfg.MemoryMB == 0 {
		cfg.MemoryMB = 1024
	}
	if cfg.CPUs == 0 {
		cfg.CPUs = cfg.Arch.CPUs
	}
	if cfg.OutDir != "" {
		if fi, err := os.Stat(cfg.OutDir); err != nil || !fi.IsDir() {
			return Result{}, fmt.Errorf("vm: out dir %q is not a directory: create it first", cfg.OutDir)
		}
	}
	var nb [8]byte
	rand.Read(nb[:])
	nonce := hex.EncodeToString(nb[:])

	initrd, err := os.CreateTemp("", "sqm-vm-initrd-*.cpio.gz")
	if err != nil {
		return Result{}, fmt.Errorf("vm: initramfs: %w", err)
	}
	defer os.Remove(initrd.Name())
	if err := writeInitramfs(initrd, cfg, busybox, nonce); err != nil {
		initrd.Close()
		return Result{}, err
	}
	if err := initrd.Close(); err != nil {
		return Result{}, fmt.Errorf("vm: initramfs: %w", err)
	}

	ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	args := append(append([]string(nil), cfg.Arch.Args...),
		"-m", strconv.Itoa(cfg.MemoryMB), "-smp", strconv.Itoa(cfg.CPUs),
		"-nographic", "-no-reboot", "-nic", "none",
		"-kernel", cfg.Kernel.Image, "-initrd", initrd.Name(),
		"-append", strings.Join(append(append([]string{cfg.Arch.Cmdline}, cfg.KernelArgs...), strings.Fields(os.Getenv(KernelArgsEnv))...), " "),
	)
	if !cfg.Standalone {
		args = append(args, "-virtfs", "local,path=/,mount_tag=host,security_model=none,readonly=on,multidevs=remap")
	}
	if cfg.OutDir != "" {
		args = append(args, "-virtfs", "local,path="+qemuOptQuote(cfg.OutDir)+",mount_tag=out,security_model=none,multidevs=remap")
	}
	for i, d := range cfg.Shares {
		args = append(args, "-virtfs", "local,path="+qemuOptQuote(d)+",mount_tag="+shareTag(i)+",security_model=none,readonly=on,multidevs=remap")
	}
	cmd := exec.CommandContext(ctx, qemu, args...)
	cmd.WaitDelay = 2 * time.Second
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return Result{}, fmt.Errorf("vm: qemu: %w", err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return Result{}, fmt.Errorf("vm: start qemu: %w", err)
	}

	out := cfg.Stdout
	if out == nil {
		out = io.Discard
	}
	var (
		res      = Result{ExitCode: -1}
		started  bool
		blank    int
		exited   bool
		failMsg  string
		lockup   string
		tail     = newTail(40)
		startTag = "SQM-VM-START-" + nonce
		exitTag  = "SQM-VM-EXIT-" + nonce + "="
		failTag  = "SQM-VM-FAIL-" + nonce + ": "
	)
	r := bufio.NewReaderSize(stdout, 64<<10)
	for {
		line, err := r.ReadString('\n')
		if len(line) > 0 {
			text := strings.TrimRight(line, "\r\n")
			// The marker may share a line with output that had no newline.
			switch {
			case strings.Contains(text, startTag):
				started = true
				res.Boot = time.Since(start)
			case strings.Contains(text, exitTag):
				i := strings.Index(text, exitTag)
				if blank > 1 {
					fmt.Fprint(out, strings.Repeat("\n", blank-1))
				}
				if i > 0 {
					fmt.Fprintln(out, text[:i])
				}
				if n, err := strconv.Atoi(strings.TrimSpace(text[i+len(exitTag):])); err == nil {
					res.ExitCode, exited = n, true
				}
			case strings.Contains(text, failTag):
				failMsg = text[strings.Index(text, failTag)+len(failTag):]
			default:
				if lockup == "" && strings.Contains(text, "BUG: soft lockup") {
					lockup = strings.TrimSpace(text)
				}
				tail.add(text)
				if started && !exited {
					// init prints an empty line before the exit marker so
					// that it starts a line; hold empty lines back until
					// we know they are output.
					if text == "" {
						blank++
						break
					}
					for ; blank > 0; blank-- {
						fmt.Fprintln(out)
					}
					fmt.Fprintln(out, text)
				}
			}
		}
		if err != nil {
			break
		}
	}
	waitErr := cmd.Wait()
	res.Total = time.Since(start)
	if exited {
		return res, nil
	}
	what := "did not boot"
	switch {
	case failMsg != "":
		what = "could not set up: " + failMsg
	case started:
		what = "stopped before the command finished"
	}
	if lockup != "" {
		what += " (the guest kernel reported a soft lockup and panicked: " + lockup + "; with vm.VerboseKernelArgs the console output above has every CPU's stack)"
	}
	if ctx.Err() != nil {
		what += fmt.Sprintf(" (timed out after %s)", cfg.Timeout.Round(time.Second))
	} else if waitErr != nil {
		what += fmt.Sprintf(" (qemu: %v)", waitErr)
	}
	msg := fmt.Sprintf("vm: %s: kernel %s", what, cfg.Kernel.Image)
	if s := strings.TrimSpace(stderr.String()); s != "" {
		msg += "\nqemu stderr:\n" + s
	}
	if t := tail.String(); strings.TrimSpace(t) != "" {
		msg += "\nlast console lines:\n" + t
	} else {
		msg += "\n(the console stayed empty)"
	}
	return res, &bootError{msg}
}

// ErrNoBoot matches (errors.Is) the errors of runs where the VM did not
// boot or the command did not run to completion.
var ErrNoBoot = errors.New("vm did not boot or the command did not finish")

type bootError struct{ msg string }

func (e *bootError) Error() string        { return e.msg }
func (e *bootError) Is(target error) bool { return target == ErrNoBoot }

// tail keeps the last n console lines for error messages.
type tail struct {
	n     int
	lines []string
}

func newTail(n int) *tail { return &tail{n: n} }
func (t *tail) add(s string) {
	t.lines = append(t.lines, s)
	if len(t.lines) > t.n {
		t.lines = t.lines[1:]
	}
}
func (t *tail) String() string { return strings.Join(t.lines, "\n") }

// checkShare accepts an absolute, clean path of an existing directory
// that is not the root (already shared) and contains no newline (the init
// script is line based).
func checkShare(d string) error {
	if !filepath.IsAbs(d) || filepath.Clean(d) != d || d == "/" || strings.ContainsAny(d, "\n\x00") {
		return fmt.Errorf("vm: share %q: give a clean absolute directory path other than /", d)
	}
	if fi, err := os.Stat(d); err != nil || !fi.IsDir() {
		return fmt.Errorf("vm: share %q is not a directory", d)
	}
	return nil
}

// shareTag is the 9p mount tag of Config.Shares[i].
func shareTag(i int) string { return "share" + strconv.Itoa(i) }

// qemuOptQuote escapes a value inside a qemu -option list, where a comma
// separates options and ",," stands for a literal comma.
func qemuOptQuote(s string) string { return strings.ReplaceAll(s, ",", ",,") }

// shellQuote quotes s for sh.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

const guestPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// commandScript is run by the host's /bin/sh inside the chroot.
func commandScript(cfg Config) string {
	return runScript(cfg, guestPath, "/usr/bin/env")
}

// runScript changes to cfg.Dir and execs cfg.Command with only the
// guest's environment (PATH path, cfg.Env, SQM_VM=1), through the env
// binary at envBin, its output on the console.
func runScript(cfg Config, path, envBin string) string {
	dir := cfg.Dir
	if dir == "" {
		dir = "/"
	}
	env := []string{"PATH=" + path, "HOME=/root", "TMPDIR=/tmp", "TERM=dumb"}
	env = append(env, cfg.Env...)
	env = append(env, "SQM_VM=1")
	var b strings.Builder
	b.WriteString("cd " + shellQuote(dir) + " || { echo 'vm: cannot cd to " + strings.ReplaceAll(dir, "'", "") + " inside the VM'; exit 125; }\n")
	b.WriteString("exec " + envBin + " -i")
	for _, e := range env {
		b.WriteString(" " + shellQuote(e))
	}
	for _, a := range cfg.Command {
		b.WriteString(" " + shellQuote(a))
	}
	b.WriteString(" </dev/null 2>&1\n")
	return b.String()
}

// initScript is the initramfs's /init (busybox sh, PID 1).
func initScript(mods []module, withOut bool, shares []string, nonce string) string {
	var b strings.Builder
	fail := func(what string) string {
		return fmt.Sprintf(" || fail %s", shellQuote(what))
	}
	b.WriteString("#!/bin/busybox sh\nB=/bin/busybox\n")
	fmt.Fprintf(&b, "fail() { echo \"SQM-VM-FAIL-%s: $1\"; $B sync; $B sleep 0.3; $B poweroff -f; }\n", nonce)
	b.WriteString("$B mount -t proc proc /proc\n")
	b.WriteString("$B mount -t devtmpfs dev /dev\n")
	for _, m := range mods {
		fmt.Fprintf(&b, "$B insmod /lib/modules/%s%s\n", m.Name, fail("insmod "+m.Name))
	}
	b.WriteString("$B mount -t 9p -o trans=virtio,version=9p2000.L,ro,msize=512000,cache=loose host /host" + fail("mount host root over 9p") + "\n")
	for _, m := range []struct{ fs, dir string }{
		{"proc", "proc"}, {"sysfs", "sys"}, {"devtmpfs", "dev"}, {"tmpfs", "tmp"}, {"tmpfs", "run"},
	} {
		fmt.Fprintf(&b, "$B mount -t %s %s /host/%s%s\n", m.fs, m.fs, m.dir, fail("mount /"+m.dir))
	}
	b.WriteString("$B mkdir -p /host/dev/pts /host/dev/shm /host/run/netns /host/run/lock\n")
	b.WriteString("$B mount -t devpts devpts /host/dev/pts\n$B mount -t tmpfs shm /host/dev/shm\n")
	b.WriteString("$B chmod 1777 /host/tmp /host/dev/shm\n")
	// What udev or systemd links on a machine: bash's process substitution
	// (<(...), which cake-autorate opens its pipes with) needs /dev/fd.
	b.WriteString("$B ln -s /proc/self/fd /host/dev/fd && $B ln -s /proc/self/fd/0 /host/dev/stdin && " +
		"$B ln -s /proc/self/fd/1 /host/dev/stdout && $B ln -s /proc/self/fd/2 /host/dev/stderr" + fail("link /dev/fd") + "\n")
	if withOut {
		fmt.Fprintf(&b, "$B mkdir -p /host%s && $B mount -t 9p -o trans=virtio,version=9p2000.L,msize=512000 out /host%s%s\n",
			GuestOutDir, GuestOutDir, fail("mount out share"))
	}
	for i, d := range shares {
		fmt.Fprintf(&b, "$B mkdir -p %s && $B mount -t 9p -o trans=virtio,version=9p2000.L,ro,msize=512000,cache=loose %s %s%s\n",
			shellQuote("/host"+d), shareTag(i), shellQuote("/host"+d), fail("mount share "+d))
	}
	// The kernel runs /sbin/modprobe (to autoload sch_cake etc.) relative
	// to the initramfs root, where the wrapper hands over to the host's.
	b.WriteString("echo /sbin/modprobe > /proc/sys/kernel/modprobe\n")
	b.WriteString("$B ip link set lo up\n")
	// Pin the kernel's ingress and egress static keys on before any
	// traffic: a clsact qdisc on the root namespace's lo holds both, so no
	// later qdisc add or delete (sqm's IFB redirect, a test's ingress
	// qdisc) patches __netif_receive_skb_core's code while packets run
	// through it. Under qemu's multi-threaded TCG that live patch can leave
	// both vCPUs stuck at the patched jump for good (docs/testing.md, "Guest
	// soft lockups"); on real hardware and KVM it is harmless, so the pin
	// changes nothing a test measures.
	b.WriteString("$B chroot /host /usr/sbin/tc qdisc add dev lo clsact" + fail("pin the ingress static key: tc qdisc add dev lo clsact (is iproute2 installed?)") + "\n")
	b.WriteString("$B cp /cmd.sh /host/run/sqm-cmd.sh\n")
	fmt.Fprintf(&b, "echo SQM-VM-START-%s\n", nonce)
	b.WriteString("$B chroot /host /bin/sh /run/sqm-cmd.sh\nrc=$?\n")
	fmt.Fprintf(&b, "echo\necho SQM-VM-EXIT-%s=$rc\n", nonce)
	// Give the serial port time to drain before the power goes.
	b.WriteString("$B sync\n$B sleep 0.3\n$B poweroff -f\n")
	return b.String()
}

func writeInitramfs(w io.Writer, cfg Config, busybox, nonce string) error {
	want := bootModules
	if cfg.Standalone {
		want = cfg.Modules
	}
	mods, err := moduleChain(cfg.Kernel.Modules, want)
	if err != nil {
		return err
	}
	bb, err := os.ReadFile(busybox)
	if err != nil {
		return fmt.Errorf("vm: initramfs: %w", err)
	}
	zw, err := gzip.NewWriterLevel(w, gzip.BestSpeed)
	if err != nil {
		return err
	}
	c := &cpioWriter{w: zw}
	for _, d := range []string{"bin", "sbin", "dev", "proc", "host", "lib", "lib/modules"} {
		c.Dir(d)
	}
	c.CharDev("dev/console", 0o600, 5, 1)
	c.File("bin/busybox", 0o755, bb)
	c.Symlink("bin/sh", "busybox")
	// The wrapper also logs each on-demand load to the kernel log (at
	// info level: on the console only with loglevel=7 or ignore_loglevel),
	// so a console capture shows which module the kernel asked for when.
	// A standalone guest has no host to hand over to: what it needs is
	// loaded at boot (Config.Modules).
	if !cfg.Standalone {
		c.File("sbin/modprobe", 0o755, []byte("#!/bin/busybox sh\necho \"<6>sqm-vm: modprobe $*\" > /dev/kmsg\nexec /bin/busybox chroot /host /sbin/modprobe \"$@\"\n"))
	}
	for _, m := range mods {
		c.File("lib/modules/"+m.Name, 0o644, m.Data)
	}
	if cfg.Standalone {
		dirs := map[string]bool{"bin": true, "sbin": true, "dev": true, "proc": true, "host": true, "lib": true, "lib/modules": true}
		for _, f := range cfg.Files {
			p := strings.TrimPrefix(filepath.Clean(f.Path), "/")
			if !filepath.IsAbs(f.Path) || p == "" || p == "init" || p == "cmd.sh" || p == "bin/busybox" {
				return fmt.Errorf("vm: initramfs file %q: give an absolute path other than /init, /cmd.sh and /bin/busybox", f.Path)
			}
			// The missing parent directories, outermost first: the
			// kernel's unpacker does not create them.
			var chain []string
			for d := filepath.Dir(p); d != "." && !dirs[d]; d = filepath.Dir(d) {
				chain = append([]string{d}, chain...)
			}
			for _, d := range chain {
				c.Dir(d)
				dirs[d] = true
			}
			c.File(p, f.Mode&0o7777, f.Data)
		}
		c.File("cmd.sh", 0o755, []byte(standaloneCommandScript(cfg)))
		c.File("init", 0o755, []byte(standaloneInitScript(mods, nonce)))
	} else {
		c.File("cmd.sh", 0o755, []byte(commandScript(cfg)))
		c.File("init", 0o755, []byte(initScript(mods, cfg.OutDir != "", cfg.Shares, nonce)))
	}
	if err := c.Close(); err != nil {
		return fmt.Errorf("vm: initramfs: %w", err)
	}
	if err := zw.Close(); err != nil {
		return fmt.Errorf("vm: initramfs: %w", err)
	}
	return nil
}

// standaloneCommandScript is run by the initramfs's busybox sh.
func standaloneCommandScript(cfg Config) string {
	return runScript(cfg, "/bin:/sbin", "/bin/busybox env")
}

// standaloneInitScript is a standalone guest's /init: the initramfs is
// the root, busybox's applets are installed as links in /bin, and the
// modules are loaded before the command runs.
func standaloneInitScript(mods []module, nonce string) string {
	var b strings.Builder
	fail := func(what string) string {
		return fmt.Sprintf(" || fail %s", shellQuote(what))
	}
	b.WriteString("#!/bin/busybox sh\nB=/bin/busybox\n")
	fmt.Fprintf(&b, "fail() { echo \"SQM-VM-FAIL-%s: $1\"; $B sync; $B sleep 0.3; $B poweroff -f; }\n", nonce)
	b.WriteString("$B mkdir -p /proc /sys /dev /tmp /run /root /etc\n")
	b.WriteString("$B mount -t proc proc /proc" + fail("mount /proc") + "\n")
	b.WriteString("$B mount -t sysfs sysfs /sys" + fail("mount /sys") + "\n")
	b.WriteString("$B mount -t devtmpfs dev /dev" + fail("mount /dev") + "\n")
	b.WriteString("$B mount -t tmpfs tmpfs /tmp && $B mount -t tmpfs tmpfs /run" + fail("mount tmpfs on /tmp and /run") + "\n")
	b.WriteString("$B chmod 1777 /tmp && $B mkdir -p /run/netns /run/lock /sys/fs/bpf\n")
	// eBPF programs and maps are pinned here (codel_police); a kernel
	// without bpffs fails the command that needs it, not the boot.
	b.WriteString("$B mount -t bpf bpf /sys/fs/bpf 2>/dev/null\n")
	b.WriteString("$B --install -s /bin" + fail("busybox --install") + "\n")
	for _, m := range mods {
		fmt.Fprintf(&b, "$B insmod /lib/modules/%s%s\n", m.Name, fail("insmod "+m.Name))
	}
	b.WriteString("$B ip link set lo up\n")
	fmt.Fprintf(&b, "echo SQM-VM-START-%s\n", nonce)
	b.WriteString("$B sh /cmd.sh\nrc=$?\n")
	fmt.Fprintf(&b, "echo\necho SQM-VM-EXIT-%s=$rc\n", nonce)
	b.WriteString("$B sync\n$B sleep 0.3\n$B poweroff -f\n")
	return b.String()
}
