//go:build linux

package netlink

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// getsockname and recvfrom are the two system calls with only the
// netlink address read back. unix.Getsockname and unix.Recvfrom decode
// every address family into a unix.Sockaddr, which links that decoder and
// every family's address type with its methods: about 10 KB of the router
// build's code for a port id. They call getsockname(2) and recvfrom(2)
// directly, which 386 and s390x have only since Linux 4.3 (x/sys goes
// through socketcall there).

// getsockname returns the address a netlink socket is bound to (the
// caller checks its family).
func getsockname(fd int) (unix.RawSockaddrNetlink, error) {
	var sa unix.RawSockaddrNetlink
	n := uint32(unix.SizeofSockaddrNetlink)
	_, _, e := unix.RawSyscall(unix.SYS_GETSOCKNAME, uintptr(fd), uintptr(unsafe.Pointer(&sa)), uintptr(unsafe.Pointer(&n)))
	if e != 0 {
		return sa, e
	}
	return sa, nil
}

// Both calls on the socket's data path are raw system calls: the socket
// is non-blocking, so they return at once (EAGAIN sends the caller to the
// poller), and rtnetlink answers a request within sendto itself. Through
// syscall.Syscall each marks the goroutine as in a system call, and on a
// slow core one that outlasts the runtime monitor's 20 us check has its
// processor handed to another thread, after which the monitor polls every
// 20 us for a while. In the lab's VM (strace of the autorate daemon on
// the step trace) this and recv's peek made up most of the daemon's
// system calls: with raw calls and no peek, nanosleep fell from 4344 to
// 2052, clock_gettime from 16189 to 11040, futex from 1203 to 416 and
// recvfrom from 1488 to 734 (docs/autorate.md, "The idle link's cost,
// the runtime around each system call"); the daemon's CPU did not move
// measurably.

// sendto sends b to the kernel (port 0).
func sendto(fd int, b []byte) error {
	sa := unix.RawSockaddrNetlink{Family: unix.AF_NETLINK}
	var p unsafe.Pointer
	if len(b) > 0 {
		p = unsafe.Pointer(&b[0])
	}
	_, _, e := unix.RawSyscall6(unix.SYS_SENDTO, uintptr(fd), uintptr(p), uintptr(len(b)), 0,
		uintptr(unsafe.Pointer(&sa)), unix.SizeofSockaddrNetlink)
	if e != 0 {
		return e
	}
	return nil
}

// recvfrom reads a datagram into p and returns its length (with
// MSG_TRUNC the datagram's, which may exceed len(p)) and the sender's port
// id, 0 (the kernel) when the sender is not a netlink socket.
func recvfrom(fd int, p []byte, flags int) (int, uint32, error) {
	var sa unix.RawSockaddrNetlink
	n := uint32(unix.SizeofSockaddrNetlink)
	var buf unsafe.Pointer
	if len(p) > 0 {
		buf = unsafe.Pointer(&p[0])
	}
	r, _, e := unix.RawSyscall6(unix.SYS_RECVFROM, uintptr(fd), uintptr(buf), uintptr(len(p)), uintptr(flags),
		uintptr(unsafe.Pointer(&sa)), uintptr(unsafe.Pointer(&n)))
	if e != 0 {
		return 0, 0, e
	}
	if sa.Family != unix.AF_NETLINK {
		return int(r), 0, nil
	}
	return int(r), sa.Pid, nil
}
