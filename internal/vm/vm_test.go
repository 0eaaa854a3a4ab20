package vm

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"sqm/internal/testutil"
)

// readCPIO parses a newc archive back into name -> (mode, data), so the
// writer is checked against the format rather than against itself.
func readCPIO(t *testing.T, b []byte) map[string]cpioMember {
	t.Helper()
	out := map[string]cpioMember{}
	off := 0
	align := func(n int) int { return (n + 3) &^ 3 }
	for {
		if off+110 > len(b) {
			t.Fatalf("truncated header at %d", off)
		}
		h := string(b[off : off+110])
		if h[:6] != "070701" {
			t.Fatalf("bad magic %q at %d", h[:6], off)
		}
		field := func(i int) int {
			v, err := strconv.ParseUint(h[6+8*i:14+8*i], 16, 32)
			if err != nil {
				t.Fatalf("field %d: %v", i, err)
			}
			return int(v)
		}
		mode, size, rmaj, rmin, namesize := field(1), field(6), field(9), field(10), field(11)
		name := string(b[off+110 : off+110+namesize-1])
		if b[off+110+namesize-1] != 0 {
			t.Fatalf("%s: name not NUL-terminated", name)
		}
		off = align(off + 110 + namesize)
		data := b[off : off+size]
		off = align(off + size)
		if name == "TRAILER!!!" {
			if off != len(b) {
				t.Fatalf("%d bytes after trailer", len(b)-off)
			}
			return out
		}
		out[name] = cpioMember{mode: uint32(mode), data: string(data), rdev: [2]int{rmaj, rmin}}
	}
}

type cpioMember struct {
	mode uint32
	data string
	rdev [2]int
}

func TestCPIORoundTrip(t *testing.T) {
	var buf bytes.Buffer
	c := &cpioWriter{w: &buf}
	c.Dir("bin")
	c.File("bin/busybox", 0o755, []byte("12345")) // odd size: needs padding
	c.Symlink("bin/sh", "busybox")
	c.CharDev("dev/console", 0o600, 5, 1)
	c.File("/init", 0o755, []byte("#!/bin/sh\n"))
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if buf.Len()%4 != 0 {
		t.Errorf("archive length %d not 4-aligned", buf.Len())
	}
	got := readCPIO(t, buf.Bytes())
	want := map[string]cpioMember{
		"bin":         {mode: modeDir | 0o755},
		"bin/busybox": {mode: modeFile | 0o755, data: "12345"},
		"bin/sh":      {mode: modeSymlink | 0o777, data: "busybox"},
		"dev/console": {mode: modeChar | 0o600, rdev: [2]int{5, 1}},
		"init":        {mode: modeFile | 0o755, data: "#!/bin/sh\n"},
	}
	if len(got) != len(want) {
		t.Errorf("got %d members, want %d: %v", len(got), len(want), got)
	}
	for name, w := range want {
		if g, ok := got[name]; !ok || g != w {
			t.Errorf("%s: got %+v (present %v), want %+v", name, g, ok, w)
		}
	}
}

func TestVersionLess(t *testing.T) {
	tests := []struct {
		a, b string
		want bool
	}{
		{"6.1.0-9-amd64", "6.1.0-57-amd64", true},
		{"6.1.0-57-amd64", "6.1.0-9-amd64", false},
		{"5.10.0-30-amd64", "6.1.0-1-amd64", true},
		{"6.1.0-57-amd64", "6.1.0-57-amd64", false},
		{"6.12.1-amd64", "6.2.0-amd64", false},
	}
	for _, tt := range tests {
		if got := versionLess(tt.a, tt.b); got != tt.want {
			t.Errorf("versionLess(%q, %q) = %v, want %v", tt.a, tt.b, got, tt.want)
		}
	}
}

func TestFindKernel(t *testing.T) {
	boot, mods := t.TempDir(), t.TempDir()
	if _, err := findKernel(boot, mods); err == nil || !strings.Contains(err.Error(), "apt-get install linux-image-amd64") {
		t.Fatalf("empty dirs: err = %v, want one naming the package", err)
	}
	for _, rel := range []string{"6.1.0-9-amd64", "6.1.0-57-amd64", "6.9.0-1-amd64", "6.18.0-cloud"} {
		os.WriteFile(filepath.Join(boot, "vmlinuz-"+rel), []byte("k"), 0o644)
	}
	// 6.9 has no module tree and 6.18 one without 9p and cake, so
	// 6.1.0-57 is the newest usable one.
	full := "kernel/fs/9p/9p.ko: x\nkernel/net/9p/9pnet_virtio.ko.xz:\nkernel/net/sched/sch_cake.ko.zst:\n"
	for rel, dep := range map[string]string{"6.1.0-9-amd64": full, "6.1.0-57-amd64": full, "6.18.0-cloud": "kernel/net/sched/sch_htb.ko:\n"} {
		os.MkdirAll(filepath.Join(mods, rel), 0o755)
		os.WriteFile(filepath.Join(mods, rel, "modules.dep"), []byte(dep), 0o644)
	}
	k, err := findKernel(boot, mods)
	if err != nil {
		t.Fatal(err)
	}
	want := Kernel{Image: filepath.Join(boot, "vmlinuz-6.1.0-57-amd64"), Release: "6.1.0-57-amd64", Modules: filepath.Join(mods, "6.1.0-57-amd64")}
	if k != want {
		t.Errorf("got %+v, want %+v", k, want)
	}
	os.Remove(filepath.Join(boot, "vmlinuz-6.1.0-57-amd64"))
	os.Remove(filepath.Join(boot, "vmlinuz-6.1.0-9-amd64"))
	if _, err := findKernel(boot, mods); err == nil || !strings.Contains(err.Error(), "no 9p, 9pnet_virtio, sch_cake modules") {
		t.Errorf("only a minimal kernel: err = %v, want one naming the missing modules", err)
	}
}

func TestModuleChain(t *testing.T) {
	dir := t.TempDir()
	dep := "kernel/fs/9p/9p.ko: kernel/fs/netfs/netfs.ko kernel/fs/fscache/fscache.ko kernel/net/9p/9pnet.ko\n" +
		"kernel/fs/fscache/fscache.ko: kernel/fs/netfs/netfs.ko\n" +
		"kernel/fs/netfs/netfs.ko:\n" +
		"kernel/net/9p/9pnet.ko:\n" +
		"kernel/net/9p/9pnet_virtio.ko.gz: kernel/drivers/virtio/virtio_ring.ko kernel/net/9p/9pnet.ko\n" +
		"kernel/drivers/virtio/virtio_ring.ko:\n"
	os.WriteFile(filepath.Join(dir, "modules.dep"), []byte(dep), 0o644)
	os.WriteFile(filepath.Join(dir, "modules.builtin"), []byte("kernel/drivers/virtio/virtio_ring.ko\n"), 0o644)
	for _, p := range []string{"kernel/fs/9p/9p.ko", "kernel/fs/netfs/netfs.ko", "kernel/fs/fscache/fscache.ko", "kernel/net/9p/9pnet.ko"} {
		os.MkdirAll(filepath.Join(dir, filepath.Dir(p)), 0o755)
		os.WriteFile(filepath.Join(dir, p), []byte("ELF "+p), 0o644)
	}
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write([]byte("ELF virtio"))
	zw.Close()
	os.WriteFile(filepath.Join(dir, "kernel/net/9p/9pnet_virtio.ko.gz"), gz.Bytes(), 0o644)

	mods, err := moduleChain(dir, []string{"9pnet-virtio", "9p"})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, m := range mods {
		names = append(names, m.Name)
	}
	// 9pnet before 9pnet_virtio, netfs before fscache before 9p;
	// virtio_ring is built in.
	want := "9pnet.ko 9pnet_virtio.ko netfs.ko fscache.ko 9p.ko"
	if got := strings.Join(names, " "); got != want {
		t.Errorf("load order %q, want %q", got, want)
	}
	if mods[1].Data[0] != 'E' || string(mods[1].Data) != "ELF virtio" {
		t.Errorf("gz module not decompressed: %q", mods[1].Data)
	}
	if _, err := moduleChain(dir, []string{"nosuch"}); err == nil || !strings.Contains(err.Error(), "nosuch") {
		t.Errorf("missing module: err = %v", err)
	}
}

func TestCommandScriptQuoting(t *testing.T) {
	s := commandScript(Config{Command: []string{"/bin/echo", "it's", "$HOME"}, Env: []string{"A=b c"}, Dir: "/work/x y"})
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh")
	}
	// Run the script on the host with /work/x y replaced by a temp dir.
	dir := filepath.Join(t.TempDir(), "x y")
	os.Mkdir(dir, 0o755)
	s = strings.ReplaceAll(s, "/work/x y", dir)
	s = strings.Replace(s, "</dev/null 2>&1", "</dev/null", 1)
	out, err := exec.Command(sh, "-c", s).CombinedOutput()
	if err != nil {
		t.Fatalf("%v: %s\nscript:\n%s", err, out, s)
	}
	if got := string(out); got != "it's $HOME\n" {
		t.Errorf("output %q, want %q", got, "it's $HOME\n")
	}
	if !strings.Contains(s, "'SQM_VM=1'") || !strings.Contains(s, "'A=b c'") {
		t.Errorf("script lacks environment:\n%s", s)
	}
}

// TestBoot boots the real VM from the host (10 to 30 s), so it needs qemu
// and the Debian kernel; it is skipped with -short, wherever those are
// missing, and without root, so that a plain `go test ./...` stays fast
// (`make test` runs as root).
func TestBoot(t *testing.T) {
	testutil.RequireRoot(t)
	if testing.Short() {
		t.Skip("boots a VM (about 10 s); skipped with -short")
	}
	if os.Getenv("SQM_VM") == "1" {
		t.Skip("already inside the VM")
	}
	k, err := FindKernel()
	if err != nil {
		t.Skipf("no bootable kernel: %v", err)
	}
	if _, err := findQEMU("", AMD64); err != nil {
		t.Skip(err)
	}
	out := t.TempDir()
	// A directory under /tmp, like a checkout cloned there, with a comma
	// in its name (qemu's option syntax): visible only through Shares.
	shared := filepath.Join(t.TempDir(), "a checkout, cloned")
	os.MkdirAll(filepath.Join(shared, "sub"), 0o755)
	os.WriteFile(filepath.Join(shared, "sub", "file"), []byte("from the host\n"), 0o644)
	var console bytes.Buffer
	script := `set -e
test "$SQM_VM" = 1
test "$FOO" = "bar baz"
pwd
test "$(cat '` + shared + `/sub/file')" = "from the host"
touch /tmp/writable
tc qdisc add dev lo root cake bandwidth 10mbit
tc qdisc show dev lo | grep -q cake
test -d /run/netns
echo written > ` + GuestOutDir + `/result
echo done
exit 7`
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	res, err := Boot(ctx, Config{
		Kernel: k, Command: []string{"/bin/sh", "-c", script}, Env: []string{"FOO=bar baz"},
		Dir: "/usr", OutDir: out, Stdout: &console, Shares: []string{shared},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("boot to command %v, total %v", res.Boot.Round(time.Millisecond), res.Total.Round(time.Millisecond))
	if res.ExitCode != 7 {
		t.Errorf("exit code %d, want 7; console:\n%s", res.ExitCode, console.String())
	}
	if got, want := console.String(), "/usr\ndone\n"; got != want {
		t.Errorf("console %q, want %q", got, want)
	}
	if b, _ := os.ReadFile(filepath.Join(out, "result")); string(b) != "written\n" {
		t.Errorf("out share: result = %q", b)
	}
}

func TestBootErrors(t *testing.T) {
	if _, err := Run(context.Background(), Config{}); err == nil {
		t.Error("no command: want error")
	}
	k := Kernel{Image: "/x", Modules: t.TempDir()}
	for _, share := range []string{"relative/dir", "/", "/tmp/../tmp", filepath.Join(t.TempDir(), "missing")} {
		_, err := Run(context.Background(), Config{Command: []string{"true"}, Kernel: k, QEMU: "/bin/true", Busybox: "/bin/true", Shares: []string{share}})
		if err == nil || !strings.Contains(err.Error(), "share") {
			t.Errorf("share %q: err = %v, want one naming the share", share, err)
		}
	}
	_, err := Run(context.Background(), Config{Command: []string{"true"}, Kernel: Kernel{Image: "/x", Modules: t.TempDir()}, QEMU: "/bin/true"})
	if err == nil || !strings.Contains(err.Error(), "modules.dep") {
		t.Errorf("bad module tree: err = %v", err)
	}
}

// TestBootBadKernel checks that a VM that cannot boot is an error that
// carries qemu's complaint, not a hang or an exit code.
func TestBootBadKernel(t *testing.T) {
	testutil.RequireRoot(t)
	k, err := FindKernel()
	if err != nil {
		t.Skipf("no bootable kernel: %v", err)
	}
	if _, err := findQEMU("", AMD64); err != nil {
		t.Skip(err)
	}
	notAKernel := filepath.Join(t.TempDir(), "vmlinuz")
	os.WriteFile(notAKernel, []byte("this is not a kernel"), 0o644)
	k.Image = notAKernel
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	code, err := Run(ctx, Config{Kernel: k, Command: []string{"true"}, Timeout: 30 * time.Second})
	if err == nil {
		t.Fatalf("booting garbage: exit code %d, want an error", code)
	}
	if !errors.Is(err, ErrNoBoot) || !strings.Contains(err.Error(), "did not boot") || !strings.Contains(err.Error(), "qemu") {
		t.Errorf("error does not explain: %v", err)
	}
	t.Logf("error: %v", err)
}

// TestBootReportsSoftLockup runs Boot against a fake qemu that prints the
// start marker of the initramfs it is given, then what a guest that locked
// up prints before softlockup_panic powers it off: the error must say that
// the guest locked up, not only that the command did not finish.
func TestBootReportsSoftLockup(t *testing.T) {
	busybox, err := findBusybox("")
	if err != nil {
		t.Skipf("no static busybox (apt-get install busybox-static): %v", err)
	}
	mods := t.TempDir()
	dep := ""
	for _, m := range []string{"virtio_pci", "9pnet_virtio", "9p"} {
		os.WriteFile(filepath.Join(mods, m+".ko"), []byte("ELF"), 0o644)
		dep += m + ".ko:\n"
	}
	os.WriteFile(filepath.Join(mods, "modules.dep"), []byte(dep), 0o644)
	fake := filepath.Join(t.TempDir(), "qemu")
	os.WriteFile(fake, []byte(`#!/bin/sh
while [ $# -gt 0 ]; do [ "$1" = -initrd ] && initrd=$2; shift; done
marker=$(gzip -dc "$initrd" | grep -a -o 'SQM-VM-START-[0-9a-f]*' | head -n 1)
echo "$marker"
echo "[   31.2] watchdog: BUG: soft lockup - CPU#0 stuck for 23s! [swapper/0:0]"
echo "[   31.3] Kernel panic - not syncing: softlockup: hung tasks"
`), 0o755)
	var console bytes.Buffer
	_, err = Boot(context.Background(), Config{
		Command: []string{"true"}, Kernel: Kernel{Image: "/vmlinuz", Modules: mods},
		QEMU: fake, Busybox: busybox, Stdout: &console, Timeout: time.Minute,
	})
	if err == nil || !errors.Is(err, ErrNoBoot) {
		t.Fatalf("err = %v, want ErrNoBoot", err)
	}
	// The first line, not the console tail appended below it.
	first, _, _ := strings.Cut(err.Error(), "\n")
	if !strings.Contains(first, "guest kernel reported a soft lockup") || !strings.Contains(first, "stuck for 23s") {
		t.Errorf("error does not name the lockup: %v", err)
	}
	if !strings.Contains(console.String(), "BUG: soft lockup") {
		t.Errorf("console output lacks the lockup line: %q", console.String())
	}
}

func TestKernelCmdlineLockupDiagnostics(t *testing.T) {
	for _, want := range []string{"softlockup_panic=1", "softlockup_all_cpu_backtrace=1", "panic=-1"} {
		if !strings.Contains(" "+kernelCmdline+" ", " "+want+" ") {
			t.Errorf("kernel command line %q lacks %s", kernelCmdline, want)
		}
	}
}

// fakeModules makes a module tree with the given (empty) modules.
func fakeModules(t *testing.T, names ...string) string {
	t.Helper()
	mods := t.TempDir()
	dep := ""
	for _, m := range names {
		os.WriteFile(filepath.Join(mods, m+".ko"), []byte("ELF "+m), 0o644)
		dep += m + ".ko:\n"
	}
	os.WriteFile(filepath.Join(mods, "modules.dep"), []byte(dep), 0o644)
	return mods
}

// argsQEMU is a fake qemu that writes its arguments, one a line, and the
// initramfs's unpacked file list to dir, then exits as a VM that did not
// boot would.
func argsQEMU(t *testing.T, dir string) string {
	t.Helper()
	fake := filepath.Join(t.TempDir(), "qemu")
	os.WriteFile(fake, []byte(`#!/bin/sh
for a in "$@"; do printf '%s\n' "$a"; done > `+dir+`/args
while [ $# -gt 0 ]; do [ "$1" = -initrd ] && initrd=$2; shift; done
mkdir `+dir+`/root && cd `+dir+`/root && gzip -dc "$initrd" | cpio -id --quiet 2>/dev/null
`), 0o755)
	return fake
}

// TestQEMUArgs pins the amd64 VM's qemu command line (the arch table must
// not change it) and checks the router machines get theirs.
func TestQEMUArgs(t *testing.T) {
	if _, err := exec.LookPath("cpio"); err != nil {
		t.Skip("needs cpio")
	}
	busybox, err := findBusybox("")
	if err != nil {
		t.Skipf("no static busybox (apt-get install busybox-static): %v", err)
	}
	mods := fakeModules(t, "virtio_pci", "9pnet_virtio", "9p", "sch_cake")
	for _, tt := range []struct {
		name string
		cfg  Config
		want []string
	}{
		{"amd64", Config{}, []string{"-accel", "tcg,thread=multi", "-cpu", "max", "-m", "1024", "-smp", "2", "-nographic", "-no-reboot", "-nic", "none",
			"-kernel", "/vmlinuz", "-initrd", "INITRD", "-append", kernelCmdline,
			"-virtfs", "local,path=/,mount_tag=host,security_model=none,readonly=on,multidevs=remap"}},
		{"mipsle", Config{Arch: MIPSLE, Standalone: true, MemoryMB: 256, Modules: []string{"sch_cake"}}, []string{"-M", "malta", "-cpu", "24Kc", "-m", "256", "-smp", "1", "-nographic", "-no-reboot", "-nic", "none",
			"-kernel", "/vmlinuz", "-initrd", "INITRD", "-append", "console=ttyS0 quiet loglevel=3 panic=-1 rdinit=/init softlockup_panic=1 softlockup_all_cpu_backtrace=1"}},
		{"arm", Config{Arch: ARMv7, Standalone: true, MemoryMB: 256}, []string{"-M", "virt", "-cpu", "cortex-a15", "-m", "256", "-smp", "1", "-nographic", "-no-reboot", "-nic", "none",
			"-kernel", "/vmlinuz", "-initrd", "INITRD", "-append", "console=ttyAMA0 quiet loglevel=3 panic=-1 rdinit=/init softlockup_panic=1 softlockup_all_cpu_backtrace=1"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv(KernelArgsEnv, "")
			dir := t.TempDir()
			cfg := tt.cfg
			cfg.Command = []string{"/bin/sqm", "version"}
			cfg.Kernel = Kernel{Image: "/vmlinuz", Modules: mods}
			cfg.QEMU = argsQEMU(t, dir)
			cfg.Busybox = busybox
			cfg.Timeout = time.Minute
			if cfg.Standalone {
				cfg.Files = []File{{Path: "/bin/sqm", Mode: 0o755, Data: []byte("a router binary")}, {Path: "/usr/lib/sqm/recipe", Mode: 0o644, Data: []byte("nested")}}
			}
			if _, err := Boot(context.Background(), cfg); !errors.Is(err, ErrNoBoot) {
				t.Fatalf("err = %v, want ErrNoBoot from the fake qemu", err)
			}
			b, err := os.ReadFile(filepath.Join(dir, "args"))
			if err != nil {
				t.Fatal(err)
			}
			got := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
			for i := range got {
				if i > 0 && got[i-1] == "-initrd" {
					got[i] = "INITRD"
				}
			}
			if strings.Join(got, "\n") != strings.Join(tt.want, "\n") {
				t.Errorf("qemu args:\n%q\nwant\n%q", got, tt.want)
			}
			initScript, _ := os.ReadFile(filepath.Join(dir, "root", "init"))
			cmd, _ := os.ReadFile(filepath.Join(dir, "root", "cmd.sh"))
			sqm, sqmErr := os.ReadFile(filepath.Join(dir, "root", "bin", "sqm"))
			if !cfg.Standalone {
				if !strings.Contains(string(initScript), "mount -t 9p") || !strings.Contains(string(initScript), "chroot /host") {
					t.Errorf("amd64 init does not mount and chroot into the host root:\n%s", initScript)
				}
				return
			}
			if strings.Contains(string(initScript), "9p") || strings.Contains(string(initScript), "chroot") {
				t.Errorf("standalone init uses the host share:\n%s", initScript)
			}
			for _, m := range cfg.Modules {
				if !strings.Contains(string(initScript), "insmod /lib/modules/"+m+".ko") {
					t.Errorf("standalone init does not load %s:\n%s", m, initScript)
				}
			}
			if sqmErr != nil || string(sqm) != "a router binary" {
				t.Errorf("/bin/sqm in the initramfs: %q, %v", sqm, sqmErr)
			}
			if b, err := os.ReadFile(filepath.Join(dir, "root", "usr", "lib", "sqm", "recipe")); err != nil || string(b) != "nested" {
				t.Errorf("/usr/lib/sqm/recipe in the initramfs: %q, %v", b, err)
			}
			if _, err := os.Stat(filepath.Join(dir, "root", "sbin", "modprobe")); err == nil {
				t.Error("standalone initramfs has the host modprobe wrapper")
			}
			if !strings.Contains(string(cmd), "'/bin/sqm' 'version'") || !strings.Contains(string(cmd), "SQM_VM=1") {
				t.Errorf("cmd.sh does not run the command:\n%s", cmd)
			}
		})
	}
}

func TestStandaloneErrors(t *testing.T) {
	k := Kernel{Image: "/x", Modules: t.TempDir()}
	for _, tt := range []struct {
		cfg  Config
		want string
	}{
		{Config{Standalone: true, Arch: MIPSLE, Busybox: "/bin/true", OutDir: "/tmp"}, "no host share"},
		{Config{Standalone: true, Arch: MIPSLE, Busybox: "/bin/true", Shares: []string{"/usr"}}, "no host share"},
		{Config{Standalone: true, Arch: MIPSLE}, "needs Config.Busybox"},
		{Config{Files: []File{{Path: "/x"}}}, "for a standalone guest"},
		{Config{Standalone: true, Arch: MIPSLE, QEMU: "/bin/true", Busybox: "/bin/busybox", Modules: []string{"sch_cake"}}, "modules.dep"},
	} {
		tt.cfg.Command = []string{"true"}
		tt.cfg.Kernel = k
		_, err := Boot(context.Background(), tt.cfg)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%+v: err = %v, want one with %q", tt.cfg, err, tt.want)
		}
	}
	mods := fakeModules(t, "sch_cake")
	for _, p := range []string{"relative", "/init", "/bin/busybox", "/cmd.sh", "/"} {
		var buf bytes.Buffer
		err := writeInitramfs(&buf, Config{Standalone: true, Kernel: Kernel{Modules: mods}, Files: []File{{Path: p}}}, "/bin/busybox", "n")
		if err == nil || !strings.Contains(err.Error(), "initramfs file") {
			t.Errorf("file %q: err = %v", p, err)
		}
	}
}
