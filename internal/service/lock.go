package service

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// LockFile is the name of the lock in the state directory.
const LockFile = "sqm.lock"

// Lock is an exclusive flock(2) on the state directory's lock file. The
// kernel drops it when the holder dies, even by kill -9, so a crashed sqm
// never blocks the next one (unlike sqm-scripts' mkdir lock, which users
// had to remove by hand).
type Lock struct {
	f *os.File
}

// AcquireLock takes the lock in dir, waiting up to wait for another sqm to
// release it. The holder's pid is written into the file so that a waiter
// that gives up can name it.
func AcquireLock(dir string, wait time.Duration) (*Lock, error) {
	if err := ensureDir(dir); err != nil {
		return nil, err
	}
	path := filepath.Join(dir, LockFile)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("lock: open %s: %w", path, err)
	}
	deadline := time.Now().Add(wait)
	for {
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			break
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) && !errors.Is(err, syscall.EINTR) {
			f.Close()
			return nil, fmt.Errorf("lock: flock %s: %w", path, err)
		}
		if time.Now().After(deadline) {
			holder := "unknown pid"
			if b, rerr := os.ReadFile(path); rerr == nil && len(strings.TrimSpace(string(b))) > 0 {
				holder = "pid " + strings.TrimSpace(string(b))
			}
			f.Close()
			return nil, fmt.Errorf("lock: %s is held by %s after waiting %s: another sqm is still running; wait for it or stop it (kill %s)",
				path, holder, wait, strings.TrimPrefix(holder, "pid "))
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := f.Truncate(0); err == nil {
		f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return &Lock{f: f}, nil
}

// Release drops the lock. The file stays: removing it would let a waiter
// lock an unlinked inode while a third process creates a new file.
func (l *Lock) Release() error {
	if l == nil || l.f == nil {
		return nil
	}
	l.f.Truncate(0)
	err := l.f.Close() // closing the last descriptor releases the flock
	l.f = nil
	return err
}

// ensureDir creates the state directory 0700: it says what sqm changed in
// the kernel, and a writable one would let anyone make sqm remove qdiscs.
func ensureDir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("state dir: create %s: %w (set --state-dir or SQM_STATE_DIR to a writable directory)", dir, err)
	}
	fi, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("state dir: %w", err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("state dir: %s is not a directory", dir)
	}
	if fi.Mode().Perm()&0o002 != 0 {
		return fmt.Errorf("state dir: %s is world-writable (mode %v): anyone could make sqm remove qdiscs; chmod 700 it", dir, fi.Mode().Perm())
	}
	return nil
}
