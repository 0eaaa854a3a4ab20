//go:build linux

package netlink

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Conn is a NETLINK_ROUTE socket. Requests (Execute) and Receive are not
// safe for concurrent use; Close and the deadline setters may be called
// from any goroutine.
type Conn struct {
	f      *os.File
	rc     syscall.RawConn
	port   uint32 // our port id, which the kernel puts in its replies
	seq    uint32
	closed atomic.Bool
	// wbuf is send's, reused: a request is written out whole before send
	// returns, and a daemon changing shaper rates several times a second
	// should not allocate it each time.
	wbuf []byte
	// rbuf is recv's: every datagram is read into it (one system call,
	// no peek for its size first) and copied out at its length.
	rbuf []byte
}

// Config says where the socket lives. The zero value is the calling
// thread's network namespace.
type Config struct {
	// NetNS is a descriptor of the network namespace to open the socket
	// in (an open /proc/<pid>/ns/net or /run/netns/<name>); 0 is the
	// caller's. A socket stays in the namespace it was made in.
	NetNS int
}

// ErrClosed: the Conn was closed, possibly while a call waited on it.
var ErrClosed = fmt.Errorf("netlink: connection closed: %w", os.ErrClosed)

// Dial opens a NETLINK_ROUTE socket, bound to a port id the kernel picks,
// with extended acks on where the kernel has them (4.12 and later), so
// that errors carry the kernel's explanation.
func Dial(cfg Config) (*Conn, error) {
	fd, err := socketIn(cfg.NetNS)
	if err != nil {
		return nil, err
	}
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		unix.Close(fd)
		return nil, os.NewSyscallError("netlink: bind", err)
	}
	nsa, err := getsockname(fd)
	if err != nil {
		unix.Close(fd)
		return nil, os.NewSyscallError("netlink: getsockname", err)
	}
	if nsa.Family != unix.AF_NETLINK {
		unix.Close(fd)
		return nil, fmt.Errorf("netlink: getsockname gave an address of family %d, not a netlink address", nsa.Family)
	}
	// ENOPROTOOPT on old kernels: errors are then the bare errno.
	_ = unix.SetsockoptInt(fd, unix.SOL_NETLINK, unix.NETLINK_EXT_ACK, 1)
	// The request need not come back in an error: we have it.
	_ = unix.SetsockoptInt(fd, unix.SOL_NETLINK, unix.NETLINK_CAP_ACK, 1)
	// os.NewFile sees the non-blocking descriptor and hands it to the
	// poller; from here on the File owns fd.
	f := os.NewFile(uintptr(fd), "netlink")
	rc, err := f.SyscallConn()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("netlink: %w", err)
	}
	return &Conn{f: f, rc: rc, port: nsa.Pid}, nil
}

func newSocket() (int, error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK, unix.NETLINK_ROUTE)
	if err != nil {
		return -1, os.NewSyscallError("netlink: socket", err)
	}
	return fd, nil
}

// socketIn creates the socket in namespace ns (0: here). A socket belongs
// to the namespace of the thread that creates it, so a goroutine locked
// to its thread moves there, creates it and moves back. If moving back
// fails the goroutine exits still locked, and the runtime discards the
// thread rather than run other goroutines in the wrong namespace.
func socketIn(ns int) (int, error) {
	if ns == 0 {
		return newSocket()
	}
	type result struct {
		fd  int
		err error
	}
	ch := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		self, err := unix.Open(fmt.Sprintf("/proc/self/task/%d/ns/net", unix.Gettid()), unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			runtime.UnlockOSThread()
			ch <- result{-1, fmt.Errorf("netlink: open this thread's network namespace: %w", err)}
			return
		}
		defer unix.Close(self)
		if err := unix.Setns(ns, unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread() // still where it was
			ch <- result{-1, os.NewSyscallError("netlink: setns to the target namespace", err)}
			return
		}
		fd, err := newSocket()
		if rerr := unix.Setns(self, unix.CLONE_NEWNET); rerr != nil {
			if err == nil {
				unix.Close(fd)
			}
			ch <- result{-1, os.NewSyscallError("netlink: setns back to the thread's namespace", rerr)}
			return // locked: the thread dies with the goroutine
		}
		runtime.UnlockOSThread()
		ch <- result{fd, err}
	}()
	r := <-ch
	return r.fd, r.err
}

// Close closes the socket; a Receive or Execute blocked on it returns
// ErrClosed.
func (c *Conn) Close() error {
	if c.closed.Swap(true) {
		return ErrClosed
	}
	return c.f.Close()
}

// SetDeadline bounds every read and write until changed; the zero time
// removes the bound. A call past it fails with os.ErrDeadlineExceeded.
func (c *Conn) SetDeadline(t time.Time) error { return c.f.SetDeadline(t) }

// SetReadDeadline is SetDeadline for reads only (Receive, and waiting for
// Execute's replies).
func (c *Conn) SetReadDeadline(t time.Time) error { return c.f.SetReadDeadline(t) }

// JoinGroup subscribes to a multicast group (RTNLGRP_*, a number, not the
// RTMGRP_* bit), whose messages Receive then returns.
func (c *Conn) JoinGroup(group uint32) error {
	var serr error
	err := c.rc.Control(func(fd uintptr) {
		serr = unix.SetsockoptInt(int(fd), unix.SOL_NETLINK, unix.NETLINK_ADD_MEMBERSHIP, int(group))
	})
	if err == nil {
		err = serr
	}
	if err != nil {
		return fmt.Errorf("netlink: join multicast group %d: %w", group, c.wrap(err))
	}
	return nil
}

// wrap maps the poller's "use of closed file" to ErrClosed.
func (c *Conn) wrap(err error) error {
	if c.closed.Load() && !errors.Is(err, os.ErrClosed) {
		return ErrClosed
	}
	return err
}

// send sends one request with a fresh sequence number and returns it.
func (c *Conn) send(m Message) (uint32, error) {
	c.seq++
	if c.seq == 0 { // 0 is what notifications carry
		c.seq = 1
	}
	m.Header.Sequence = c.seq
	m.Header.PID = c.port
	m.Header.Flags |= Request
	b := appendMessage(c.wbuf[:0], m)
	c.wbuf = b
	var serr error
	err := c.rc.Write(func(fd uintptr) bool {
		for {
			serr = sendto(int(fd), b)
			if serr != unix.EINTR {
				return serr != unix.EAGAIN
			}
		}
	})
	if err == nil {
		err = serr
	}
	if err != nil {
		return 0, fmt.Errorf("netlink: send request type %d: %w", m.Header.Type, c.wrap(os.NewSyscallError("sendto", err)))
	}
	return c.seq, nil
}

// recvBufSize is what recv reads a datagram into. The kernel builds a
// dump's datagrams to the reader's buffer but never over 32 KiB
// (netlink_recvmsg's max_recvmsg_len), and rtnetlink's single replies
// (a link, a qdisc, an ack carrying the request back) are a few KiB, so
// one read gets a whole datagram without peeking at its size first: a
// system call fewer for every datagram, which on a router's slow core and
// an autorate loop dumping the qdiscs ten times a second is most of the
// saving.
const recvBufSize = 64 << 10

// recv reads one datagram whole and the port id of its sender (0: the
// kernel). A datagram larger than the buffer is lost (the kernel drops
// what did not fit) and is an error saying so; the buffer grows for the
// next one.
func (c *Conn) recv() ([]byte, uint32, error) {
	if c.rbuf == nil {
		c.rbuf = make([]byte, recvBufSize)
	}
	var (
		n    int
		pid  uint32
		rerr error
	)
	err := c.rc.Read(func(fd uintptr) bool {
		for {
			// MSG_TRUNC: n is the datagram's length, even past the buffer.
			n, pid, rerr = recvfrom(int(fd), c.rbuf, unix.MSG_TRUNC)
			if rerr != unix.EINTR {
				return rerr != unix.EAGAIN
			}
		}
	})
	if err == nil {
		err = rerr
	}
	if err == nil && n > len(c.rbuf) {
		err = fmt.Errorf("netlink: a datagram of %d bytes did not fit the %d-byte buffer and was lost", n, len(c.rbuf))
		c.rbuf = make([]byte, n)
	}
	if err != nil {
		if _, ok := As[unix.Errno](err); ok {
			err = os.NewSyscallError("recvfrom", err)
		}
		return nil, 0, fmt.Errorf("netlink: receive: %w", c.wrap(err))
	}
	return append([]byte(nil), c.rbuf[:n]...), pid, nil
}

// Receive waits for the next datagram from the kernel (multicast
// notifications, after JoinGroup) and returns its messages. ENOBUFS
// (errors.Is) means the socket's buffer overflowed and messages were
// lost. Datagrams from other sockets are dropped.
func (c *Conn) Receive() ([]Message, error) {
	for {
		b, from, err := c.recv()
		if err != nil {
			return nil, err
		}
		if from != 0 {
			continue
		}
		return parseMessages(b)
	}
}

// Execute sends m (Request is added) and returns its replies: every
// message of a dump (Dump set) up to NLMSG_DONE, or for Acknowledge the
// messages before the ack, or else the one reply. A refusal is an *Error;
// a dump the kernel marked inconsistent is ErrDumpInterrupted.
func (c *Conn) Execute(m Message) ([]Message, error) {
	seq, err := c.send(m)
	if err != nil {
		return nil, err
	}
	x := exchange{seq: seq, port: c.port, dump: isDump(m.Header), ack: m.Header.Flags&Acknowledge != 0}
	for {
		b, from, err := c.recv()
		if err != nil {
			return nil, err
		}
		if from != 0 {
			continue
		}
		msgs, err := parseMessages(b)
		if err != nil {
			return nil, err
		}
		done, err := x.take(msgs)
		if done {
			if err != nil {
				return nil, err
			}
			return x.out, nil
		}
	}
}

// isDump is the kernel's own test (rtnetlink_rcv_msg): a GET request (the
// low two bits of an RTM_* type are 2) with NLM_F_ROOT or NLM_F_MATCH.
// Those bits mean NLM_F_REPLACE and NLM_F_EXCL on NEW requests.
func isDump(h Header) bool { return h.Type&3 == 2 && h.Flags&Dump != 0 }
