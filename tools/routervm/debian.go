package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// debianArchive is where the router kernels and busyboxes come from:
// Debian 12's own archive, the release the amd64 VM's kernel is from.
var debianSources = []string{
	"http://deb.debian.org/debian bookworm main",
	"http://deb.debian.org/debian bookworm-updates main",
}

// securitySource has the kernels' security updates. The smoke only needs a
// kernel of the router's CPU that boots, which bookworm's own is, so the
// kit is fetched without this suite when its index cannot be had: on
// 2026-12-05 the archive's bookworm-security armhf Packages.xz did not
// match its Release file ("Mirror sync in progress?") on every try, and
// make test failed on the arm VM for a file the smoke does not need.
const securitySource = "http://deb.debian.org/debian-security bookworm-security main"

// sourcesList is apt's sources.list for arch, with or without the
// security suite.
func sourcesList(arch, keyring string, security bool) string {
	srcs := debianSources
	if security {
		srcs = append(srcs[:len(srcs):len(srcs)], securitySource)
	}
	var list strings.Builder
	for _, s := range srcs {
		fmt.Fprintf(&list, "deb [arch=%s signed-by=%s] %s\n", arch, keyring, s)
	}
	return list.String()
}

// guestKit is what one router VM boots: a kernel with its module tree and
// a static busybox, all of the guest's architecture.
type guestKit struct {
	Image   string // boot/vmlinuz-REL
	Release string
	Modules string // lib/modules/REL, with modules.dep
	Busybox string // bin/busybox
	Dir     string // the cache directory holding them
}

// readyFile marks a complete cache directory; it is written last, so a
// directory without it is a download that did not finish.
const readyFile = "ready"

// defaultCacheDir is /var/cache/sqm-routervm for root (make test), where
// every checkout on the machine shares one download, and the user's cache
// directory otherwise.
func defaultCacheDir() string {
	if d := os.Getenv("SQM_ROUTERVM_CACHE"); d != "" {
		return d
	}
	if os.Geteuid() == 0 {
		return "/var/cache/sqm-routervm"
	}
	if d, err := os.UserCacheDir(); err == nil {
		return filepath.Join(d, "sqm-routervm")
	}
	return filepath.Join(os.TempDir(), "sqm-routervm")
}

// loadKit returns the cached kit of t, downloading it first if the cache
// has none (or refresh is set). The download never touches the host's apt
// state: apt-get runs with a sources list, state and cache directory of
// its own under the cache directory.
func loadKit(ctx context.Context, cache string, t target, refresh bool, log func(string, ...any)) (guestKit, error) {
	dir := filepath.Join(cache, t.DebArch)
	if !refresh {
		if k, err := kitIn(dir); err == nil {
			return k, nil
		}
	}
	if err := os.MkdirAll(cache, 0o755); err != nil {
		return guestKit{}, fmt.Errorf("routervm: cache directory: %w (set SQM_ROUTERVM_CACHE to a writable one)", err)
	}
	start := time.Now()
	log("routervm: %s: downloading %s and busybox-static:%s from Debian's archive into %s", t.Arch.Name, t.KernelPkg+":"+t.DebArch, t.DebArch, dir)
	tmp, err := os.MkdirTemp(cache, "."+t.DebArch+"-fetch-")
	if err != nil {
		return guestKit{}, fmt.Errorf("routervm: cache directory: %w", err)
	}
	defer os.RemoveAll(tmp)
	root := filepath.Join(tmp, "root")
	if err := fetchInto(ctx, tmp, root, t, log); err != nil {
		return guestKit{}, err
	}
	if refresh {
		os.RemoveAll(dir)
	}
	// Another run may have finished the same download first: theirs is
	// as good, and renaming onto a non-empty directory fails.
	if err := os.Rename(root, dir); err != nil {
		if k, kerr := kitIn(dir); kerr == nil {
			return k, nil
		}
		return guestKit{}, fmt.Errorf("routervm: cache: %w", err)
	}
	k, err := kitIn(dir)
	if err == nil {
		log("routervm: %s: kernel %s cached in %s (%.0f s)", t.Arch.Name, k.Release, dir, time.Since(start).Seconds())
	}
	return k, err
}

// kitIn checks a cache directory and returns what it holds.
func kitIn(dir string) (guestKit, error) {
	if _, err := os.Stat(filepath.Join(dir, readyFile)); err != nil {
		return guestKit{}, err
	}
	images, _ := filepath.Glob(filepath.Join(dir, "boot", "vmlinuz-*"))
	if len(images) != 1 {
		return guestKit{}, fmt.Errorf("routervm: cache %s: want one boot/vmlinuz-*, found %d", dir, len(images))
	}
	rel := strings.TrimPrefix(filepath.Base(images[0]), "vmlinuz-")
	k := guestKit{Image: images[0], Release: rel, Modules: filepath.Join(dir, "lib", "modules", rel), Busybox: filepath.Join(dir, "bin", "busybox"), Dir: dir}
	for _, f := range []string{filepath.Join(k.Modules, "modules.dep"), k.Busybox} {
		if _, err := os.Stat(f); err != nil {
			return guestKit{}, fmt.Errorf("routervm: cache %s is incomplete: %w", dir, err)
		}
	}
	return k, nil
}

// fetchInto downloads t's kernel and busybox with apt-get into work and
// unpacks them into root, with modules.dep made by the host's depmod.
func fetchInto(ctx context.Context, work, root string, t target, log func(string, ...any)) error {
	for _, tool := range []string{"apt-get", "apt-cache", "dpkg", "depmod"} {
		if _, err := exec.LookPath(tool); err != nil {
			return fmt.Errorf("routervm: %s not found (a Debian host with apt, dpkg and kmod is needed to fetch the router kernels): %w", tool, err)
		}
	}
	keyring := "/usr/share/keyrings/debian-archive-keyring.gpg"
	if _, err := os.Stat(keyring); err != nil {
		return fmt.Errorf("routervm: %s is missing (apt-get install debian-archive-keyring): it verifies the archive", keyring)
	}
	apt := filepath.Join(work, "apt")
	for _, d := range []string{"etc/parts", "etc/prefs", "state/lists/partial", "cache/archives/partial", "debs"} {
		if err := os.MkdirAll(filepath.Join(apt, d), 0o755); err != nil {
			return err
		}
	}
	opts := []string{
		"-o", "Dir::Etc::SourceList=" + filepath.Join(apt, "etc", "sources.list"),
		"-o", "Dir::Etc::SourceParts=" + filepath.Join(apt, "etc", "parts"),
		"-o", "Dir::Etc::PreferencesParts=" + filepath.Join(apt, "etc", "prefs"),
		"-o", "Dir::Etc::Preferences=" + filepath.Join(apt, "etc", "prefs", "none"),
		"-o", "Dir::State=" + filepath.Join(apt, "state"),
		"-o", "Dir::State::Lists=" + filepath.Join(apt, "state", "lists"),
		"-o", "Dir::State::status=/dev/null",
		"-o", "Dir::Cache=" + filepath.Join(apt, "cache"),
		"-o", "APT::Architectures=" + t.DebArch,
		"-o", "Acquire::Languages=none",
		"-o", "Acquire::IndexTargets::deb::DEP-11::DefaultEnabled=false",
		"-o", "Acquire::IndexTargets::deb::DEP-11-icons::DefaultEnabled=false",
		"-o", "Acquire::IndexTargets::deb::DEP-11-icons-small::DefaultEnabled=false",
		"-o", "Acquire::Retries=3",
		"-o", "Debug::NoLocking=1",
		// Files in a directory _apt cannot write would be fetched
		// unsandboxed with a warning anyway; say so up front.
		"-o", "APT::Sandbox::User=root",
	}
	run := func(dir string, name string, args ...string) (string, error) {
		ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, name, args...)
		cmd.Dir = dir
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		err := cmd.Run()
		return out.String(), err
	}
	unreachable := func(step string, err error, out string) error {
		return fmt.Errorf("routervm: %s: %s failed: %v\n%s\nthe router VM smoke needs %s:%s and busybox-static:%s from Debian's archive (deb.debian.org); is it reachable? (a kit already in %s is used without the network)",
			t.Arch.Name, step, err, strings.TrimSpace(lastLines(out, 15)), t.KernelPkg, t.DebArch, t.DebArch, filepath.Dir(filepath.Dir(root)))
	}
	// Error-Mode=any: apt-get update otherwise exits 0 when an index
	// could not be fetched, and the failure would surface later as a
	// puzzling "unable to locate package".
	update := func(security bool) (string, error) {
		if err := os.WriteFile(filepath.Join(apt, "etc", "sources.list"), []byte(sourcesList(t.DebArch, keyring, security)), 0o644); err != nil {
			return "", err
		}
		return run(apt, "apt-get", append(opts, "-q", "-o", "APT::Update::Error-Mode=any", "update")...)
	}
	if out, err := update(true); err != nil {
		// Without the security suite, or not at all: the other
		// suites' failure is the archive's being out of reach.
		out2, err2 := update(false)
		if err2 != nil {
			return unreachable("apt-get update", err2, out2)
		}
		log("routervm: %s: Debian's security suite could not be updated (%v: %s); the kit comes from bookworm and bookworm-updates", t.Arch.Name, err, aptError(out))
	}
	// The kernel package is a metapackage naming the current ABI's image.
	out, err := run(apt, "apt-cache", append(opts, "depends", t.KernelPkg+":"+t.DebArch)...)
	if err != nil {
		return unreachable("apt-cache depends "+t.KernelPkg, err, out)
	}
	image := ""
	for _, l := range strings.Split(out, "\n") {
		if dep, ok := strings.CutPrefix(strings.TrimSpace(l), "Depends: "); ok && strings.HasPrefix(dep, "linux-image-") {
			image = strings.TrimSuffix(dep, ":"+t.DebArch)
			break
		}
	}
	if image == "" {
		return fmt.Errorf("routervm: %s: %s:%s names no linux-image-* package:\n%s", t.Arch.Name, t.KernelPkg, t.DebArch, out)
	}
	debs := filepath.Join(apt, "debs")
	if out, err := run(debs, "apt-get", append(opts, "-q", "download", image+":"+t.DebArch, "busybox-static:"+t.DebArch)...); err != nil {
		return unreachable("apt-get download "+image, err, out)
	}
	files, _ := filepath.Glob(filepath.Join(debs, "*.deb"))
	if len(files) != 2 {
		return fmt.Errorf("routervm: %s: apt-get download gave %d .deb files, want 2 (%s, busybox-static)", t.Arch.Name, len(files), image)
	}
	var versions strings.Builder
	for _, f := range files {
		if out, err := run(debs, "dpkg", "-x", f, root); err != nil {
			return fmt.Errorf("routervm: dpkg -x %s: %v: %s", f, err, out)
		}
		fmt.Fprintln(&versions, filepath.Base(f))
	}
	images, _ := filepath.Glob(filepath.Join(root, "boot", "vmlinuz-*"))
	if len(images) != 1 {
		return fmt.Errorf("routervm: %s: %s has %d boot/vmlinuz-* files, want 1", t.Arch.Name, image, len(images))
	}
	rel := strings.TrimPrefix(filepath.Base(images[0]), "vmlinuz-")
	if out, err := run(root, "depmod", "-b", root, rel); err != nil {
		return fmt.Errorf("routervm: depmod -b %s %s: %v: %s", root, rel, err, out)
	}
	// Only busybox's binary is needed; the kernel's docs are not.
	os.RemoveAll(filepath.Join(root, "usr", "share"))
	if _, err := os.Stat(filepath.Join(root, "bin", "busybox")); err != nil {
		return fmt.Errorf("routervm: %s: busybox-static:%s has no bin/busybox: %w", t.Arch.Name, t.DebArch, err)
	}
	return os.WriteFile(filepath.Join(root, readyFile), []byte(versions.String()), 0o644)
}

// aptError is the first of apt's "E:" lines in out (its last line if it
// has none): what went wrong, without the hashes and hints around it.
func aptError(out string) string {
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "E: ") {
			return strings.TrimSpace(l)
		}
	}
	return strings.TrimSpace(lastLines(out, 1))
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
