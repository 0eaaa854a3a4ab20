package trafficwake

import (
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"syscall"

	"golang.org/x/sys/unix"
)

// Waker watches one interface. Arm and C may be called from any
// goroutine; a Waker is closed once.
type Waker struct {
	f       *os.File
	rc      syscall.RawConn
	ifindex int
	armed   atomic.Bool
	c       chan struct{}
	mu      sync.Mutex // serialises binds
	done    chan struct{}
}

// Open watches the interface ifindex for packets of at least minLen
// bytes. It needs CAP_NET_RAW. The Waker starts disarmed.
func Open(ifindex, minLen int) (*Waker, error) {
	if ifindex <= 0 || minLen <= 0 || minLen > 65535 {
		return nil, fmt.Errorf("trafficwake: ifindex %d, minimum length %d: want both positive, the length at most 65535", ifindex, minLen)
	}
	// Protocol 0: the socket sees nothing until Arm binds it.
	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("trafficwake: packet socket: %w", err)
	}
	// ld len; jge minLen ? accept 1 byte : drop. A packet is copied to
	// the socket only when it wakes.
	prog := []unix.SockFilter{
		{Code: unix.BPF_LD | unix.BPF_W | unix.BPF_LEN},
		{Code: unix.BPF_JMP | unix.BPF_JGE | unix.BPF_K, Jt: 0, Jf: 1, K: uint32(minLen)},
		{Code: unix.BPF_RET | unix.BPF_K, K: 1},
		{Code: unix.BPF_RET | unix.BPF_K, K: 0},
	}
	if err := unix.SetsockoptSockFprog(fd, unix.SOL_SOCKET, unix.SO_ATTACH_FILTER, &unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("trafficwake: attach filter: %w", err)
	}
	// One packet is all a wake needs; the rest may be dropped.
	_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUF, 4096)
	f := os.NewFile(uintptr(fd), "trafficwake")
	rc, err := f.SyscallConn()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("trafficwake: %w", err)
	}
	w := &Waker{f: f, rc: rc, ifindex: ifindex, c: make(chan struct{}, 1), done: make(chan struct{})}
	go w.read()
	return w, nil
}

// C receives (at most one pending) when an armed Waker saw a packet.
func (w *Waker) C() <-chan struct{} { return w.c }

// Arm puts the tap on the interface: the next packet of load size sends
// on C and disarms it. Arming an armed Waker does nothing.
func (w *Waker) Arm() error {
	if w.armed.Swap(true) {
		return nil
	}
	if err := w.bind(unix.ETH_P_ALL); err != nil {
		w.armed.Store(false)
		return err
	}
	return nil
}

// Disarm takes the tap off the interface without a wake.
func (w *Waker) Disarm() error {
	if !w.armed.Swap(false) {
		return nil
	}
	return w.bind(0)
}

// bind binds the socket to the interface for proto (host order): 0
// takes the packet tap off the interface.
func (w *Waker) bind(proto uint16) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	sa := &unix.SockaddrLinklayer{Protocol: htons(proto), Ifindex: w.ifindex}
	var err error
	if cerr := w.rc.Control(func(fd uintptr) { err = unix.Bind(int(fd), sa) }); cerr != nil {
		return fmt.Errorf("trafficwake: %w", cerr)
	}
	if err != nil {
		return fmt.Errorf("trafficwake: bind to ifindex %d: %w", w.ifindex, err)
	}
	return nil
}

// read waits in the runtime's poller (no thread) for a packet; an armed
// Waker sends on C and takes the tap off. Packets read while disarmed
// (queued before the tap came off) are dropped.
func (w *Waker) read() {
	defer close(w.done)
	var b [1]byte
	for {
		// A packet longer than b is read, truncated, without error. On
		// any error (closed, or the interface gone) the Waker stops: the
		// loop's idle tick still sees a load, later.
		if _, err := w.f.Read(b[:]); err != nil {
			return
		}
		if w.armed.CompareAndSwap(true, false) {
			_ = w.bind(0)
			select {
			case w.c <- struct{}{}:
			default:
			}
		}
	}
}

// Close takes the tap off and closes the socket. A nil Waker's Close
// does nothing.
func (w *Waker) Close() error {
	if w == nil {
		return nil
	}
	err := w.f.Close()
	<-w.done
	return err
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }
