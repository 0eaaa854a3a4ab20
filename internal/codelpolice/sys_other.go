//go:build !linux

package codelpolice

import (
	"errors"

	"sqm/internal/plan"
)

var errNotLinux = errors.New("codel_police: eBPF needs Linux")

// Program is a loaded codel_police program (Linux only).
type Program struct{}

func (p *Program) FD() int      { return -1 }
func (p *Program) Close() error { return nil }

func Load(*plan.CodelPolice, int) (*Program, error) { return nil, errNotLinux }
func ReadCounters(uint32) (Counters, error)         { return Counters{}, errNotLinux }
func LoadedPrograms() ([]uint32, error)             { return nil, errNotLinux }
