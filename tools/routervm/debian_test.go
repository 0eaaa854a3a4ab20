package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestKitCache checks that a complete cached kit is used without apt (the
// second make test must not download) and that an incomplete one is not
// taken for a kit.
func TestKitCache(t *testing.T) {
	cache := t.TempDir()
	dir := filepath.Join(cache, "mipsel")
	rel := "6.1.0-50-4kc-malta"
	for _, f := range []string{"boot/vmlinuz-" + rel, "lib/modules/" + rel + "/modules.dep", "bin/busybox"} {
		os.MkdirAll(filepath.Dir(filepath.Join(dir, f)), 0o755)
		os.WriteFile(filepath.Join(dir, f), []byte("x"), 0o644)
	}
	if _, err := kitIn(dir); err == nil {
		t.Fatal("a directory without its ready file was taken for a complete kit")
	}
	os.WriteFile(filepath.Join(dir, readyFile), nil, 0o644)
	// No apt-get on PATH: a download attempt would fail.
	t.Setenv("PATH", t.TempDir())
	k, err := loadKit(context.Background(), cache, targets[0], false, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	if k.Release != rel || k.Image != filepath.Join(dir, "boot", "vmlinuz-"+rel) || k.Busybox != filepath.Join(dir, "bin", "busybox") {
		t.Errorf("kit %+v", k)
	}
	os.Remove(filepath.Join(dir, "bin", "busybox"))
	if _, err := kitIn(dir); err == nil || !strings.Contains(err.Error(), "incomplete") {
		t.Errorf("kit without busybox: err = %v", err)
	}
	// Asked to download with no apt-get: a clear error, nothing left over.
	_, err = loadKit(context.Background(), cache, targets[0], true, t.Logf)
	if err == nil || !strings.Contains(err.Error(), "apt-get not found") {
		t.Errorf("refresh without apt-get: err = %v", err)
	}
	left, _ := filepath.Glob(filepath.Join(cache, ".mipsel-fetch-*"))
	if len(left) > 0 {
		t.Errorf("a failed download left %v behind", left)
	}
}

// TestAncestorHolds runs this test binary under flock(1): the child must
// see that its parent holds the lock (else routervm under `flock
// /tmp/sqm-vm.lock make test` would wait for itself), and without flock
// that nobody above it does.
func TestAncestorHolds(t *testing.T) {
	if f := os.Getenv("ROUTERVM_LOCK_HELPER"); f != "" {
		fh, err := os.Open(f)
		if err != nil {
			t.Fatal(err)
		}
		defer fh.Close()
		if pid := ancestorHolds(fh); pid > 0 {
			os.Stdout.WriteString("HELD\n")
		} else {
			os.Stdout.WriteString("FREE\n")
		}
		return
	}
	flock, err := exec.LookPath("flock")
	if err != nil {
		t.Skip("needs flock(1) (util-linux)")
	}
	lock := filepath.Join(t.TempDir(), "lock")
	os.WriteFile(lock, nil, 0o644)
	for _, tt := range []struct {
		argv []string
		want string
	}{
		{[]string{flock, lock, os.Args[0], "-test.run=^TestAncestorHolds$"}, "HELD"},
		{[]string{os.Args[0], "-test.run=^TestAncestorHolds$"}, "FREE"},
	} {
		cmd := exec.Command(tt.argv[0], tt.argv[1:]...)
		cmd.Env = append(os.Environ(), "ROUTERVM_LOCK_HELPER="+lock)
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(out), tt.want) {
			t.Errorf("%v: %v, output %q, want %s", tt.argv, err, out, tt.want)
		}
	}
}

// TestSourcesList: the security suite is in the list only when asked for,
// and the required suites are always there, for the guest's architecture.
func TestSourcesList(t *testing.T) {
	for _, sec := range []bool{true, false} {
		l := sourcesList("armhf", "/k.gpg", sec)
		for _, s := range debianSources {
			if !strings.Contains(l, "deb [arch=armhf signed-by=/k.gpg] "+s+"\n") {
				t.Errorf("security %v: %q lacks %s", sec, l, s)
			}
		}
		if got := strings.Contains(l, securitySource); got != sec {
			t.Errorf("security %v: list has the security suite: %v\n%s", sec, got, l)
		}
	}
	if len(debianSources) != 2 {
		t.Errorf("sourcesList changed debianSources: %v", debianSources)
	}
}

func TestAptError(t *testing.T) {
	out := "Get:6 http://x/debian-security bookworm-security/main armhf Packages [357 kB]\nErr:6 http://x bookworm-security/main armhf Packages\n  File has unexpected size (356624 != 356976). Mirror sync in progress? [IP: 203.0.113.80 80]\nE: Failed to fetch http://x/Packages.xz  File has unexpected size (356624 != 356976). Mirror sync in progress?\nE: Some index files failed to download.\n"
	if got, want := aptError(out), "E: Failed to fetch http://x/Packages.xz  File has unexpected size (356624 != 356976). Mirror sync in progress?"; got != want {
		t.Errorf("aptError = %q, want %q", got, want)
	}
	if got := aptError("no errors here\nlast\n"); got != "last" {
		t.Errorf("aptError without E: lines = %q, want the last line", got)
	}
}
