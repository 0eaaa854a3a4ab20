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
	if err := EnsureStateDir(dir); err != nil {
		return nil, err
	}
	path := filepath.Join(dir, LockFile)
	f, err := OpenStateFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("lock: %w", err)
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
			// From the descriptor checked above, not the name: and
			// only a pid's worth.
			b := make([]byte, 20)
			if n, _ := f.ReadAt(b, 0); len(strings.TrimSpace(string(b[:n]))) > 0 {
				holder = "pid " + strings.TrimSpace(string(b[:n]))
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
