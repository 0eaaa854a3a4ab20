// Package netns creates named network namespaces from Go, the way iproute2
// does (a bind mount under /run/netns/NAME, so `ip netns exec NAME` works
// on them too), and configures what the lab and the tests need inside:
// veth pairs, addresses, routes, sysctls, offloads, and commands.
//
// Nothing here forks `ip`: links, addresses and routes go over rtnetlink
// with a socket opened in the namespace, and code that must run inside
// (sysctls, ioctls, starting commands) runs on a locked OS thread that is
// moved into the namespace and discarded afterwards, so no other goroutine
// ever runs in the wrong namespace.
package netns

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"

	"github.com/jsimonetti/rtnetlink/v2"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// Dir is where iproute2 keeps named namespaces.
const Dir = "/run/netns"

// NS is a named network namespace. Close deletes it.
type NS struct {
	name string
	path string
	fd   int
}

// seq makes Unique names distinct within the process; the pid makes them
// distinct between processes (parallel `go test` binaries, two labs). It
// is the package's only state and only ever increases.
var seq atomic.Uint64

// Unique returns "prefix-PID-N", a name no other namespace made by this
// process or another one running now has.
func Unique(prefix string) string {
	return fmt.Sprintf("%s-%d-%d", prefix, os.Getpid(), seq.Add(1))
}

// NewUnique creates a namespace named Unique(prefix).
func NewUnique(prefix string) (*NS, error) { return New(Unique(prefix)) }

// New creates the network namespace /run/netns/name. It fails if the name
// is taken.
func New(name string) (*NS, error) {
	if name == "" || strings.ContainsAny(name, "/\x00") || name == "." || name == ".." {
		return nil, fmt.Errorf("netns: create %q: invalid name: use letters, digits, '-' and '_'", name)
	}
	if err := prepareDir(); err != nil {
		return nil, err
	}
	path := filepath.Join(Dir, name)
	f, err := os.OpenFile(path, os.O_RDONLY|os.O_CREATE|os.O_EXCL, 0)
	if err != nil {
		if errors.Is(err, os.ErrExist) {
			return nil, fmt.Errorf("netns: create %s: already exists: pick another name or remove it with 'ip netns del %s'", name, name)
		}
		return nil, fmt.Errorf("netns: create %s: %w", name, hint(err))
	}
	f.Close()
	if err := onFreshThread(func() error {
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			return fmt.Errorf("unshare: %w", hint(err))
		}
		self := fmt.Sprintf("/proc/self/task/%d/ns/net", unix.Gettid())
		if err := unix.Mount(self, path, "none", unix.MS_BIND, ""); err != nil {
			return fmt.Errorf("bind mount %s: %w", path, hint(err))
		}
		return nil
	}); err != nil {
		os.Remove(path)
		return nil, fmt.Errorf("netns: create %s: %w", name, err)
	}
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		unix.Unmount(path, unix.MNT_DETACH)
		os.Remove(path)
		return nil, fmt.Errorf("netns: open %s: %w", path, err)
	}
	return &NS{name: name, path: path, fd: fd}, nil
}

// prepareDir makes /run/netns a shared mount point as iproute2 does, so
// namespaces mounted there propagate to other mount namespaces (and their
// unmounting does too).
func prepareDir() error {
	if err := os.MkdirAll(Dir, 0o755); err != nil {
		return fmt.Errorf("netns: create %s: %w", Dir, hint(err))
	}
	err := unix.Mount("", Dir, "none", unix.MS_SHARED|unix.MS_REC, "")
	if errors.Is(err, unix.EINVAL) {
		// Not a mount point yet: bind it onto itself first.
		if err = unix.Mount(Dir, Dir, "none", unix.MS_BIND|unix.MS_REC, ""); err == nil {
			err = unix.Mount("", Dir, "none", unix.MS_SHARED|unix.MS_REC, "")
		}
	}
	if err != nil {
		return fmt.Errorf("netns: make %s a shared mount: %w", Dir, hint(err))
	}
	return nil
}

// hint adds the usual fix to permission errors.
func hint(err error) error {
	if errors.Is(err, unix.EPERM) || errors.Is(err, unix.EACCES) {
		return fmt.Errorf("%w: needs CAP_SYS_ADMIN and CAP_NET_ADMIN: run as root", err)
	}
	return err
}

// Name is the namespace's name (as `ip netns` shows it).
func (n *NS) Name() string { return n.name }

// Path is /run/netns/NAME.
func (n *NS) Path() string { return n.path }

// FD is an open descriptor of the namespace, valid until Close; pass it as
// NetNS to netlink.Config or go-tc's tc.Config.
func (n *NS) FD() int { return n.fd }

// Close deletes the namespace: it disappears once no process, socket or
// descriptor uses it any more.
func (n *NS) Close() error {
	if n == nil || n.fd < 0 {
		return nil
	}
	unix.Close(n.fd)
	n.fd = -1
	var errs []error
	if err := unix.Unmount(n.path, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
		errs = append(errs, fmt.Errorf("unmount %s: %w", n.path, err))
	}
	if err := os.Remove(n.path); err != nil && !errors.Is(err, os.ErrNotExist) {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		return fmt.Errorf("netns: delete %s: %w", n.name, errors.Join(errs...))
	}
	return nil
}

// Do runs fn on an OS thread that is inside the namespace. The thread is
// thrown away afterwards. Goroutines that fn starts do not run inside;
// processes that fn starts (exec.Cmd.Start) do, as do sockets it opens.
func (n *NS) Do(fn func() error) error {
	if n.fd < 0 {
		return fmt.Errorf("netns: %s is closed", n.name)
	}
	return onFreshThread(func() error {
		if err := unix.Setns(n.fd, unix.CLONE_NEWNET); err != nil {
			return fmt.Errorf("netns: enter %s: %w", n.name, hint(err))
		}
		return fn()
	})
}

// onFreshThread runs fn on a locked OS thread that exits with the
// goroutine (it is never unlocked), so a namespace change cannot leak into
// other goroutines.
func onFreshThread(fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		errc <- fn()
	}()
	return <-errc
}

// Dial opens an rtnetlink connection inside the namespace.
func (n *NS) Dial() (*rtnetlink.Conn, error) {
	c, err := rtnetlink.Dial(&netlink.Config{NetNS: n.fd})
	if err != nil {
		return nil, fmt.Errorf("netns: rtnetlink in %s: %w", n.name, err)
	}
	return c, nil
}

// TB is the part of testing.TB that NewT needs (so this package does not
// import testing into product binaries).
type TB interface {
	Helper()
	Fatalf(format string, args ...any)
	Errorf(format string, args ...any)
	Cleanup(func())
}

// NewT creates a uniquely named namespace for a test and deletes it when
// the test ends. The test must run as root (testutil.RequireRoot).
func NewT(t TB, prefix string) *NS {
	t.Helper()
	n, err := NewUnique(prefix)
	if err != nil {
		t.Fatalf("%v", err)
	}
	t.Cleanup(func() {
		if err := n.Close(); err != nil {
			t.Errorf("%v", err)
		}
	})
	return n
}
