//go:build !linux

package trafficwake

import "errors"

// Waker watches an interface; only on Linux.
type Waker struct{}

// Open fails: packet sockets are Linux's.
func Open(ifindex, minLen int, enter func(func() error) error) (*Waker, error) {
	return nil, errors.New("trafficwake: needs Linux")
}

func (w *Waker) C() <-chan struct{} { return nil }
func (w *Waker) Arm() error         { return nil }
func (w *Waker) Disarm() error      { return nil }
func (w *Waker) Close() error       { return nil }
