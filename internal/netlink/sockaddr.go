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

// recvfrom reads a datagram into p (nil: none, with MSG_PEEK) and returns
// its length (with MSG_TRUNC the datagram's, which may exceed len(p)) and
// the sender's port id, 0 (the kernel) when the sender is not a netlink
// socket.
func recvfrom(fd int, p []byte, flags int) (int, uint32, error) {
	var sa unix.RawSockaddrNetlink
	n := uint32(unix.SizeofSockaddrNetlink)
	var buf unsafe.Pointer
	if len(p) > 0 {
		buf = unsafe.Pointer(&p[0])
	}
	r, _, e := unix.Syscall6(unix.SYS_RECVFROM, uintptr(fd), uintptr(buf), uintptr(len(p)), uintptr(flags),
		uintptr(unsafe.Pointer(&sa)), uintptr(unsafe.Pointer(&n)))
	if e != 0 {
		return 0, 0, e
	}
	if sa.Family != unix.AF_NETLINK {
		return int(r), 0, nil
	}
	return int(r), sa.Pid, nil
}
