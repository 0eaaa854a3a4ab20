//go:build !linux

package reflector

import (
	"errors"
	"time"
)

// Prober probes reflectors; only on Linux (autorate runs on routers).
type Prober struct{}

var errNotLinux = errors.New("reflector: probing needs Linux")

// New fails: the sockets are Linux system calls.
func New(cfg Config) (*Prober, error) {
	if _, err := cfg.withDefaults(); err != nil {
		return nil, err
	}
	return nil, errNotLinux
}

func (p *Prober) Poll(emit func(*Sample)) error { return errNotLinux }
func (p *Prober) Close() error                  { return nil }
func (p *Prober) Replace(i int, t Target) error { return errNotLinux }
func (p *Prober) SetInterval(time.Duration)     {}
func (p *Prober) Waiting(func(int, time.Time))  {}
