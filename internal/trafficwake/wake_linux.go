//go:build linux

package trafficwake

import (
	"fmt"
	"os"
	"sync"

	"golang.org/x/sys/unix"
)

// Waker watches one interface. Its methods may be called from any
// goroutine.
type Waker struct {
	ifindex, minLen int
	enter           func(func() error) error
	c               chan struct{}
	mu              sync.Mutex
	tap             *os.File // the armed socket; nil while disarmed
	readers         sync.WaitGroup
}

// Open watches the interface ifindex for packets of at least minLen
// bytes. It needs CAP_NET_RAW, which it checks by opening a socket. The
// Waker starts disarmed. enter, if not nil, wraps each socket's creation
// (reflector.Config's Enter: a test's namespace); the sockets then live
// in the namespace it enters, and ifindex is that namespace's.
func Open(ifindex, minLen int, enter func(func() error) error) (*Waker, error) {
	if ifindex <= 0 || minLen <= 0 || minLen > 65535 {
		return nil, fmt.Errorf("trafficwake: ifindex %d, minimum length %d: want both positive, the length at most 65535", ifindex, minLen)
	}
	if enter == nil {
		enter = func(f func() error) error { return f() }
	}
	w := &Waker{ifindex: ifindex, minLen: minLen, enter: enter, c: make(chan struct{}, 1)}
	if err := enter(func() error {
		fd, err := w.socket()
		if err == nil {
			unix.Close(fd)
		}
		return err
	}); err != nil {
		return nil, err
	}
	return w, nil
}

// socket opens a packet socket with the filter attached, not yet bound:
// protocol 0, it sees nothing until bound.
func (w *Waker) socket() (int, error) {
	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("trafficwake: packet socket: %w", err)
	}
	// ld len; jge minLen ? accept 1 byte : drop. A packet is copied to
	// the socket only when it wakes.
	prog := []unix.SockFilter{
		{Code: unix.BPF_LD | unix.BPF_W | unix.BPF_LEN},
		{Code: unix.BPF_JMP | unix.BPF_JGE | unix.BPF_K, Jt: 0, Jf: 1, K: uint32(w.minLen)},
		{Code: unix.BPF_RET | unix.BPF_K, K: 1},
		{Code: unix.BPF_RET | unix.BPF_K, K: 0},
	}
	if err := unix.SetsockoptSockFprog(fd, unix.SOL_SOCKET, unix.SO_ATTACH_FILTER, &unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}); err != nil {
		unix.Close(fd)
		return -1, fmt.Errorf("trafficwake: attach filter: %w", err)
	}
	// One packet is all a wake needs; the rest may be dropped.
	_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUF, 4096)
	return fd, nil
}

// C receives (at most one pending) when an armed Waker saw a packet.
func (w *Waker) C() <-chan struct{} { return w.c }

// Arm puts a tap on the interface: the next packet of load size sends on
// C and disarms. Arming an armed Waker does nothing.
//
// Disarmed, the socket is closed: a packet socket once bound to every
// protocol cannot be unbound (a bind to protocol 0 keeps the last one),
// and a tap left on the interface costs each packet a clone and the
// filter, which a loaded link should not pay.
func (w *Waker) Arm() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.tap != nil {
		return nil
	}
	var fd int
	if err := w.enter(func() (err error) { fd, err = w.socket(); return err }); err != nil {
		return err
	}
	if err := unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_ALL), Ifindex: w.ifindex}); err != nil {
		unix.Close(fd)
		return fmt.Errorf("trafficwake: bind to ifindex %d: %w", w.ifindex, err)
	}
	w.tap = os.NewFile(uintptr(fd), "trafficwake")
	w.readers.Add(1)
	go w.read(w.tap)
	return nil
}

// Disarm takes the tap off the interface without a wake.
func (w *Waker) Disarm() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.untap()
}

func (w *Waker) untap() error {
	if w.tap == nil {
		return nil
	}
	err := w.tap.Close()
	w.tap = nil
	return err
}

// read waits in the runtime's poller (no thread) for a packet on tap; if
// tap is still the armed one, the Waker disarms and sends on C.
func (w *Waker) read(tap *os.File) {
	defer w.readers.Done()
	var b [1]byte
	// A packet longer than b is read, truncated, without error. An
	// error is the socket closed (disarmed), or the interface gone: the
	// loop's idle tick still sees a load, later.
	_, err := tap.Read(b[:])
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.tap != tap {
		return // disarmed meanwhile
	}
	w.untap()
	if err != nil {
		return
	}
	select {
	case w.c <- struct{}{}:
	default:
	}
}

// Close disarms. A nil Waker's Close does nothing.
func (w *Waker) Close() error {
	if w == nil {
		return nil
	}
	err := w.Disarm()
	w.readers.Wait()
	return err
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }
