package service

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"sqm/internal/testutil"
)

// victim is a file outside the state directory that a planted link points
// at; it must come through every refusal unchanged.
func victim(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "victim")
	if err := os.WriteFile(p, []byte("precious\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func checkVictim(t *testing.T, p string) {
	t.Helper()
	if b, err := os.ReadFile(p); err != nil || string(b) != "precious\n" {
		t.Errorf("the file a link pointed at now holds %q (%v)", b, err)
	}
}

// TestLockRefusesPlantedFiles plants, where the lock goes, what someone
// who could write the directory would: a symbolic link to another file,
// a hard link to it, a FIFO. The lock must refuse each (without hanging
// on the FIFO) and leave the file pointed at as it was. Before the lock
// was opened with O_NOFOLLOW and checked, the link's target was truncated
// and got sqm's pid.
func TestLockRefusesPlantedFiles(t *testing.T) {
	for _, tt := range []struct {
		name, want string
		plant      func(lock, victim string) error
	}{
		{"symlink", "symbolic link", func(l, v string) error { return os.Symlink(v, l) }},
		{"dangling symlink", "symbolic link", func(l, v string) error { return os.Symlink(v+".new", l) }},
		{"hard link", "hard links", func(l, v string) error { return os.Link(v, l) }},
		{"fifo", "not a regular file", func(l, v string) error { return syscall.Mkfifo(l, 0o600) }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			v := victim(t)
			if err := tt.plant(filepath.Join(dir, LockFile), v); err != nil {
				t.Skipf("cannot plant a %s here: %v", tt.name, err)
			}
			l, err := AcquireLock(dir, time.Second)
			if err == nil {
				l.Release()
				t.Fatalf("lock taken through a %s", tt.name)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q does not say %q", err, tt.want)
			}
			checkVictim(t, v)
			if _, err := os.Stat(v + ".new"); err == nil {
				t.Error("the lock created the dangling link's target")
			}
		})
	}
}

// TestStateDirRules: a state directory another user owns, or one that
// others can write to (sticky or not), is refused with a reason; one of
// our own, or root's, mode 0700 or 0755, is taken.
func TestStateDirRules(t *testing.T) {
	for _, tt := range []struct {
		mode os.FileMode
		want string // "" for accepted
	}{
		{0o700, ""},
		{0o755, ""},
		{0o770, "writable by group"},
		{0o777, "writable by every user"},
		{0o1777, "writable by every user"},
	} {
		dir := filepath.Join(t.TempDir(), "state")
		if err := os.Mkdir(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(dir, tt.mode); err != nil {
			t.Fatal(err)
		}
		err := EnsureStateDir(dir)
		if tt.want == "" && err != nil {
			t.Errorf("mode %v: %v", tt.mode, err)
		}
		if tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)) {
			t.Errorf("mode %v: %v; want refusal saying %q", tt.mode, err, tt.want)
		}
	}
}

// TestStateDirOfAnotherUser: root given a state directory that another
// user owns (as one under /tmp would be) refuses it before opening
// anything in it, so the owner's planted link to a file root can write
// is never followed.
func TestStateDirOfAnotherUser(t *testing.T) {
	testutil.RequireRoot(t)
	dir := filepath.Join(t.TempDir(), "state")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	v := victim(t)
	if err := os.Symlink(v, filepath.Join(dir, LockFile)); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(dir, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	_, err := AcquireLock(dir, time.Second)
	if err == nil || !strings.Contains(err.Error(), "belongs to uid 65534") {
		t.Errorf("lock in a directory uid 65534 owns: %v; want refusal", err)
	}
	s := &Store{Dir: dir}
	if err := s.Save(&State{Interface: "eth0"}); err == nil || !strings.Contains(err.Error(), "belongs to uid 65534") {
		t.Errorf("state saved into a directory uid 65534 owns: %v; want refusal", err)
	}
	checkVictim(t, v)
}

// TestOpenStateFile: a plain file is opened, truncated only when asked
// and after the checks, not inherited by children; a link to a directory
// as the state directory itself is followed (OpenWrt's /var/run is one).
func TestOpenStateFile(t *testing.T) {
	real := t.TempDir()
	dir := filepath.Join(t.TempDir(), "link")
	if err := os.Symlink(real, dir); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "x.log")
	if err := os.WriteFile(p, []byte("old"), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := OpenStateFile(p, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("+new")
	fl, err := unixFcntlFlags(f)
	f.Close()
	if err != nil || fl&syscall.FD_CLOEXEC == 0 {
		t.Errorf("descriptor flags %#x (%v): no FD_CLOEXEC", fl, err)
	}
	if b, _ := os.ReadFile(p); string(b) != "old+new" {
		t.Errorf("appended: %q", b)
	}
	f, err = OpenStateFile(p, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	if b, _ := os.ReadFile(p); len(b) != 0 {
		t.Errorf("truncated: %q", b)
	}
}

func unixFcntlFlags(f *os.File) (int, error) {
	r, _, e := syscall.Syscall(syscall.SYS_FCNTL, f.Fd(), syscall.F_GETFD, 0)
	if e != 0 {
		return 0, e
	}
	return int(r), nil
}
