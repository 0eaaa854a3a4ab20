package lab

import (
	"fmt"
	"os"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// netNS is an anonymous network namespace held open by a file descriptor.
//
// Why here and not internal/netns: that package (named namespaces, veths,
// sysctls) had not landed when the lab was written; this is the minimum the
// lab needs, behind the namespace interface so it can be swapped. Being
// anonymous has a property the lab wants anyway: the kernel deletes the
// namespace, and every veth, IFB and qdisc in it, when the last reference
// goes, even if the process is killed with SIGKILL. Two labs never clash:
// names are labels only.
type netNS struct {
	name string
	fd   int
}

// newNetNS creates a fresh network namespace with loopback up.
func newNetNS(name string) (*netNS, error) {
	type result struct {
		fd  int
		err error
	}
	ch := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		self := fmt.Sprintf("/proc/self/task/%d/ns/net", unix.Gettid())
		orig, err := unix.Open(self, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			runtime.UnlockOSThread()
			ch <- result{-1, fmt.Errorf("lab: open current network namespace: %w", err)}
			return
		}
		defer unix.Close(orig)
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			ch <- result{-1, fmt.Errorf("lab: create network namespace %s: %w (needs root)", name, err)}
			return
		}
		fd, oerr := unix.Open(self, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		// Back to where the thread was, so the runtime can reuse it (a
		// locked goroutine ending on the main thread would wedge it in the
		// lab namespace for the life of the process).
		if err := unix.Setns(orig, unix.CLONE_NEWNET); err != nil {
			// Stay locked: the thread dies with this goroutine.
			if oerr == nil {
				unix.Close(fd)
			}
			ch <- result{-1, fmt.Errorf("lab: return from new network namespace: %w", err)}
			return
		}
		runtime.UnlockOSThread()
		if oerr != nil {
			ch <- result{-1, fmt.Errorf("lab: open network namespace %s: %w", name, oerr)}
			return
		}
		ch <- result{fd, nil}
	}()
	r := <-ch
	if r.err != nil {
		return nil, r.err
	}
	n := &netNS{name: name, fd: r.fd}
	if err := n.Do(func() error { return linkUp("lo") }); err != nil {
		n.Close()
		return nil, err
	}
	return n, nil
}

func (n *netNS) Name() string { return n.name }

// id is the namespace's identity as /proc shows it ("net:[4026532211]").
func (n *netNS) id() string {
	s, _ := os.Readlink(fmt.Sprintf("/proc/self/fd/%d", n.fd))
	return s
}

// Do runs fn on an OS thread switched into the namespace, then switches the
// thread back. Sockets fn creates stay in the namespace for good.
func (n *netNS) Do(fn func() error) error {
	runtime.LockOSThread()
	orig, err := unix.Open(fmt.Sprintf("/proc/self/task/%d/ns/net", unix.Gettid()), unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("lab: open current network namespace: %w", err)
	}
	defer unix.Close(orig)
	if err := unix.Setns(n.fd, unix.CLONE_NEWNET); err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("lab: enter network namespace %s: %w", n.name, err)
	}
	ferr := fn()
	if err := unix.Setns(orig, unix.CLONE_NEWNET); err != nil {
		// The thread is stuck in the lab namespace: keep it locked so it
		// dies with this goroutine instead of running other code there.
		return fmt.Errorf("lab: leave network namespace %s: %w", n.name, err)
	}
	runtime.UnlockOSThread()
	return ferr
}

// Close drops the lab's reference; the kernel removes the namespace once no
// socket refers to it any more.
func (n *netNS) Close() error {
	if n.fd < 0 {
		return nil
	}
	err := unix.Close(n.fd)
	n.fd = -1
	return err
}

// setSysctl writes a /proc/sys value; under /proc/sys/net it applies to the
// namespace of the calling thread, so call it inside Do.
func setSysctl(key, value string) error {
	path := "/proc/sys/" + key
	if err := os.WriteFile(path, []byte(value), 0o644); err != nil {
		return fmt.Errorf("lab: set %s: %w", key, err)
	}
	return nil
}

// Legacy ethtool offload commands (linux/ethtool.h); each takes a struct
// ethtool_value {u32 cmd; u32 data}.
const (
	ethtoolSTSO = 0x1f
	ethtoolSGSO = 0x24
	ethtoolSGRO = 0x2c
)

type ethtoolValue struct{ cmd, data uint32 }

// ifreqData is struct ifreq with its union used as ifr_data.
type ifreqData struct {
	name [unix.IFNAMSIZ]byte
	data unsafe.Pointer
	_    [16]byte
}

// offloadsOff turns TSO, GSO and GRO off on dev (in the calling thread's
// namespace). With them on, TCP hands veths 64 KB super-packets and netem
// would count each as one packet of its FIFO and pace it as one: the
// emulated modem would hold far more than --buffer full-size packets.
func offloadsOff(dev string) error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("lab: offloads off on %s: %w", dev, err)
	}
	defer unix.Close(fd)
	for _, cmd := range []uint32{ethtoolSTSO, ethtoolSGSO, ethtoolSGRO} {
		if _, err := ethtoolIoctl(fd, dev, cmd, 0); err != nil {
			return fmt.Errorf("lab: offloads off on %s (ethtool cmd %#x): %w", dev, cmd, err)
		}
	}
	return nil
}

// ethtoolIoctl runs one ethtool_value command on dev and returns the data
// the kernel left in it (for the get commands).
func ethtoolIoctl(fd int, dev string, cmd, data uint32) (uint32, error) {
	val := ethtoolValue{cmd: cmd, data: data}
	ifr := ifreqData{data: unsafe.Pointer(&val)}
	copy(ifr.name[:unix.IFNAMSIZ-1], dev)
	if _, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.SIOCETHTOOL, uintptr(unsafe.Pointer(&ifr))); errno != 0 {
		return 0, errno
	}
	return val.data, nil
}
