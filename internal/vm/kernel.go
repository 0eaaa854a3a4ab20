package vm

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"debug/elf"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// Kernel is a bootable kernel image and the module tree built with it. The
// VM loads the 9p modules from that tree into the initramfs and, once the
// host root is mounted, modprobe finds every other module (sch_cake, ...)
// in the same tree.
type Kernel struct {
	Image   string // e.g. /boot/vmlinuz-6.1.0-57-amd64
	Release string // e.g. 6.1.0-57-amd64
	Modules string // e.g. /lib/modules/6.1.0-57-amd64
}

// FindKernel returns the newest /boot/vmlinuz-* that has a matching
// /lib/modules/<release>/modules.dep. Debian's linux-image-amd64 provides
// both; the machine's running kernel is not used because it may lack
// modules (it does on the development hosts).
func FindKernel() (Kernel, error) {
	return findKernel("/boot", "/lib/modules")
}

func findKernel(bootDir, modDir string) (Kernel, error) {
	images, _ := filepath.Glob(filepath.Join(bootDir, "vmlinuz-*"))
	var found []Kernel
	var skipped []string
	for _, img := range images {
		rel := strings.TrimPrefix(filepath.Base(img), "vmlinuz-")
		mods := filepath.Join(modDir, rel)
		dep, err := os.ReadFile(filepath.Join(mods, "modules.dep"))
		if err != nil {
			skipped = append(skipped, fmt.Sprintf("%s (no %s/modules.dep)", img, mods))
			continue
		}
		// A minimal kernel (like the CI host's own) may have a module
		// tree without the 9p chain or the qdiscs the VM exists for.
		if missing := missingModules(string(dep), "9p", "9pnet_virtio", "sch_cake"); len(missing) > 0 {
			skipped = append(skipped, fmt.Sprintf("%s (no %s modules)", img, strings.Join(missing, ", ")))
			continue
		}
		found = append(found, Kernel{Image: img, Release: rel, Modules: mods})
	}
	if len(found) == 0 {
		detail := "none found"
		if len(skipped) > 0 {
			detail = "skipped " + strings.Join(skipped, ", ")
		}
		return Kernel{}, fmt.Errorf("vm: find kernel: no %s/vmlinuz-* with a matching %s tree (%s): install one with 'apt-get install linux-image-amd64'",
			bootDir, modDir, detail)
	}
	sort.Slice(found, func(i, j int) bool { return versionLess(found[j].Release, found[i].Release) })
	k := found[0]
	f, err := os.Open(k.Image)
	if err != nil {
		return Kernel{}, fmt.Errorf("vm: find kernel: %w (Debian installs it mode 0600: run as root or 'chmod a+r %s')", err, k.Image)
	}
	f.Close()
	return k, nil
}

// missingModules returns the names that modules.dep (its text) lacks.
func missingModules(dep string, names ...string) []string {
	var missing []string
	for _, n := range names {
		if !strings.Contains(dep, "/"+n+".ko") {
			missing = append(missing, n)
		}
	}
	return missing
}

// versionLess compares kernel releases field by field, numerically where
// both fields are numbers ("6.1.0-57" > "6.1.0-9").
func versionLess(a, b string) bool {
	split := func(s string) []string {
		return strings.FieldsFunc(s, func(r rune) bool { return r == '.' || r == '-' || r == '+' || r == '~' })
	}
	fa, fb := split(a), split(b)
	for i := 0; i < len(fa) && i < len(fb); i++ {
		na, ea := strconv.Atoi(fa[i])
		nb, eb := strconv.Atoi(fb[i])
		switch {
		case ea == nil && eb == nil && na != nb:
			return na < nb
		case (ea != nil || eb != nil) && fa[i] != fb[i]:
			return fa[i] < fb[i]
		}
	}
	return len(fa) < len(fb)
}

// bootModules are the modules the initramfs needs to mount the host root
// over virtio 9p; their dependencies come from modules.dep.
var bootModules = []string{"virtio_pci", "9pnet_virtio", "9p"}

// module is one kernel module file, decompressed.
type module struct {
	Name string // file name in the initramfs, e.g. 9pnet.ko
	Data []byte
}

// moduleChain resolves names (and their dependencies, dependencies first)
// through modules.dep and returns their decompressed contents in load
// order. Modules listed in modules.builtin are skipped: they need no
// loading.
func moduleChain(modDir string, names []string) ([]module, error) {
	dep, err := os.ReadFile(filepath.Join(modDir, "modules.dep"))
	if err != nil {
		return nil, fmt.Errorf("vm: read modules.dep: %w (is the kernel's module tree complete? reinstall linux-image-amd64)", err)
	}
	norm := func(s string) string { return strings.ReplaceAll(s, "-", "_") }
	modName := func(path string) string {
		base := filepath.Base(path)
		if i := strings.Index(base, ".ko"); i >= 0 {
			base = base[:i]
		}
		return norm(base)
	}
	paths := map[string]string{}
	deps := map[string][]string{}
	sc := bufio.NewScanner(bytes.NewReader(dep))
	sc.Buffer(make([]byte, 1<<16), 1<<20)
	for sc.Scan() {
		path, rest, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		n := modName(path)
		paths[n] = path
		for _, d := range strings.Fields(rest) {
			deps[n] = append(deps[n], modName(d))
		}
	}
	builtin := map[string]bool{}
	if b, err := os.ReadFile(filepath.Join(modDir, "modules.builtin")); err == nil {
		for _, l := range strings.Fields(string(b)) {
			builtin[modName(l)] = true
		}
	}
	var order []string
	seen := map[string]bool{}
	var visit func(n string, depth int) error
	visit = func(n string, depth int) error {
		if seen[n] || builtin[n] {
			return nil
		}
		if depth > 50 {
			return fmt.Errorf("vm: modules.dep: dependency loop at %s", n)
		}
		if _, ok := paths[n]; !ok {
			return fmt.Errorf("vm: module %s is neither in %s/modules.dep nor built in: this kernel lacks it; use Debian's kernel (linux-image-amd64 for the amd64 VM)", n, modDir)
		}
		// modules.dep lists dependencies so that the last one loads first.
		ds := deps[n]
		for i := len(ds) - 1; i >= 0; i-- {
			if err := visit(ds[i], depth+1); err != nil {
				return err
			}
		}
		seen[n] = true
		order = append(order, n)
		return nil
	}
	for _, n := range names {
		if err := visit(norm(n), 0); err != nil {
			return nil, err
		}
	}
	var out []module
	for _, n := range order {
		data, err := readModule(filepath.Join(modDir, paths[n]))
		if err != nil {
			return nil, err
		}
		out = append(out, module{Name: n + ".ko", Data: data})
	}
	return out, nil
}

// readModule returns a module file's ELF bytes. Distributions compress
// modules (.ko.xz, .ko.zst, .ko.gz); busybox's insmod in the initramfs wants
// them plain, so they are decompressed here.
func readModule(path string) ([]byte, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("vm: read module: %w", err)
	}
	switch {
	case strings.HasSuffix(path, ".ko"):
		return raw, nil
	case strings.HasSuffix(path, ".ko.gz"):
		zr, err := gzip.NewReader(bytes.NewReader(raw))
		if err != nil {
			return nil, fmt.Errorf("vm: decompress module %s: %w", path, err)
		}
		return io.ReadAll(zr)
	case strings.HasSuffix(path, ".ko.xz"):
		return decompressWith(path, raw, "xz", "apt-get install xz-utils", "-dc")
	case strings.HasSuffix(path, ".ko.zst"):
		return decompressWith(path, raw, "zstd", "apt-get install zstd", "-dc")
	}
	return nil, fmt.Errorf("vm: module %s: unknown compression", path)
}

func decompressWith(path string, raw []byte, tool, install string, args ...string) ([]byte, error) {
	bin, err := exec.LookPath(tool)
	if err != nil {
		return nil, fmt.Errorf("vm: decompress module %s: %s not found: %s", path, tool, install)
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdin = bytes.NewReader(raw)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("vm: decompress module %s with %s: %w: %s", path, tool, err, strings.TrimSpace(stderr.String()))
	}
	return out, nil
}

// findBusybox returns a statically linked busybox: the initramfs has no
// libc, so a dynamic one would not start.
func findBusybox(path string) (string, error) {
	candidates := []string{path}
	if path == "" {
		candidates = []string{"/bin/busybox", "/usr/bin/busybox"}
	}
	var lastErr error
	for _, c := range candidates {
		f, err := elf.Open(c)
		if err != nil {
			lastErr = err
			continue
		}
		dynamic := false
		for _, p := range f.Progs {
			if p.Type == elf.PT_INTERP {
				dynamic = true
			}
		}
		f.Close()
		if dynamic {
			lastErr = fmt.Errorf("%s is dynamically linked", c)
			continue
		}
		return c, nil
	}
	return "", fmt.Errorf("vm: find busybox: %w: install a static one with 'apt-get install busybox-static'", lastErr)
}

// findQEMU locates the arch's qemu (qemu-system-x86_64 for AMD64), or
// path if given.
func findQEMU(path string, arch Arch) (string, error) {
	if arch.QEMU == "" {
		arch = AMD64
	}
	if path == "" {
		path = arch.QEMU
	}
	p, err := exec.LookPath(path)
	if err != nil {
		return "", fmt.Errorf("vm: find qemu: %w: install it with 'apt-get install %s'", err, arch.QEMUPackage)
	}
	return p, nil
}
