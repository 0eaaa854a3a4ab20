package service

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// sqm runs as root and writes its lock, state and debug logs into a
// directory a user may point elsewhere (--state-dir, SQM_STATE_DIR). If
// another user could create names in that directory, they could plant a
// symbolic link (or a hard link, or a FIFO) where sqm is about to open a
// file, and root would truncate or append to whatever it points to. So a
// state directory must be one only root or the user running sqm can
// change, and every file in it is opened relative to the directory that
// was checked, never following a link, and only if it is a plain file.
//
// Group- or world-writable directories are refused even with the sticky
// bit (/tmp): sticky stops others from removing sqm's files, not from
// creating a name before sqm does.

// EnsureStateDir creates dir (mode 0700, parents as needed) if it does not
// exist and checks that nobody but root or the running user can change
// it. The error says which rule dir breaks and how to fix it.
func EnsureStateDir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("state dir: create %s: %w (set --state-dir or SQM_STATE_DIR to a writable directory)", dir, err)
	}
	fd, err := openDir(dir)
	if err != nil {
		return err
	}
	unix.Close(fd)
	return nil
}

// openDir opens dir and checks the directory it got, not the name, which
// could be made to point elsewhere after the check: files are then opened
// relative to the descriptor. A link to a directory (OpenWrt's /var/run)
// is fine, since what is checked is where it leads.
func openDir(dir string) (int, error) {
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		if err == unix.ENOTDIR {
			return -1, fmt.Errorf("state dir: %s is not a directory", dir)
		}
		return -1, fmt.Errorf("state dir: open %s: %w", dir, err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return -1, fmt.Errorf("state dir: %s: %w", dir, err)
	}
	if err := dirSafe(dir, st.Uid, os.FileMode(st.Mode&0o7777)); err != nil {
		unix.Close(fd)
		return -1, err
	}
	return fd, nil
}

// dirSafe applies the rules to a directory's owner and mode.
func dirSafe(dir string, uid uint32, mode os.FileMode) error {
	me := uint32(os.Geteuid())
	if uid != 0 && uid != me {
		return fmt.Errorf("state dir: %s belongs to uid %d, not to root or to this user (uid %d): its owner could make sqm overwrite any file through a link; use a directory of your own (chown or --state-dir)", dir, uid, me)
	}
	if mode&0o022 != 0 {
		who := "group"
		if mode&0o002 != 0 {
			who = "every user"
		}
		return fmt.Errorf("state dir: %s is writable by %s (mode %04o): another user could plant links there that sqm would write through; chmod 700 it", dir, who, mode&0o7777)
	}
	return nil
}

// OpenStateFile opens path (a file directly in a state directory) with
// flag and perm as os.OpenFile would, but safely: the directory must pass
// EnsureStateDir's rules, a symbolic link at the name is refused rather
// than followed, as is anything but a regular file with a single link;
// O_TRUNC is applied only after those checks. The descriptor does not
// leak into children (O_CLOEXEC).
//
// Use it for every file sqm writes in the state directory (the lock, the
// debug logs, start logs).
func OpenStateFile(path string, flag int, perm os.FileMode) (*os.File, error) {
	dir, name := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	if name == "" || strings.Contains(name, "/") {
		return nil, fmt.Errorf("open %s: not a file name", path)
	}
	dfd, err := openDir(filepath.Clean(dir))
	if err != nil {
		return nil, err
	}
	defer unix.Close(dfd)
	trunc := flag&os.O_TRUNC != 0
	// O_NONBLOCK: opening a FIFO for writing would otherwise wait for a
	// reader; it is refused below anyway.
	fd, err := unix.Openat(dfd, name, (flag&^os.O_TRUNC)|unix.O_NOFOLLOW|unix.O_CLOEXEC|unix.O_NONBLOCK, uint32(perm.Perm()))
	if err != nil {
		if err == unix.ELOOP {
			return nil, fmt.Errorf("open %s: it is a symbolic link; sqm does not write through links in its state directory (remove it)", path)
		}
		return nil, &os.PathError{Op: "open", Path: path, Err: err}
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return nil, &os.PathError{Op: "stat", Path: path, Err: err}
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		unix.Close(fd)
		return nil, fmt.Errorf("open %s: not a regular file (mode %o); remove it", path, st.Mode)
	}
	if st.Nlink != 1 {
		unix.Close(fd)
		return nil, fmt.Errorf("open %s: it has %d hard links; sqm does not write to a file linked elsewhere (remove it)", path, st.Nlink)
	}
	// Back to blocking mode, as os.OpenFile leaves a regular file.
	if err := unix.SetNonblock(fd, false); err != nil {
		unix.Close(fd)
		return nil, &os.PathError{Op: "open", Path: path, Err: err}
	}
	f := os.NewFile(uintptr(fd), path)
	if trunc {
		if err := f.Truncate(0); err != nil {
			f.Close()
			return nil, err
		}
	}
	return f, nil
}
