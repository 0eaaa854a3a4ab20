package metrics

import (
	"errors"
	"fmt"
	"strings"

	"sqm/internal/kernel"
	"sqm/internal/plan"
	"sqm/internal/service"
)

// StatusReader is the part of *kernel.Conn the metrics need.
type StatusReader interface {
	Status(devices ...string) ([]kernel.DeviceStatus, error)
}

// KernelSource reads what sqm shapes from the state store and the
// counters from the kernel on every scrape, so the numbers are the
// kernel's at scrape time and a queue sqm stopped shaping disappears.
type KernelSource struct {
	Store  *service.Store
	Kernel StatusReader
	Build  BuildInfo
	// LastTest returns the last bufferbloat test the service ran (nil:
	// none); nil when the service keeps no tests.
	LastTest func() *TestResult
}

// Snapshot implements Source. A device the kernel cannot report (it is
// gone) is shown with sqm_queue_shaping 0, not as an error; unreadable
// state files and other kernel errors are returned with the snapshot.
func (s *KernelSource) Snapshot() (*Snapshot, error) {
	states, err := s.Store.All()
	snap, kerr := FromStates(s.Kernel, states)
	aerr := AddAutorate(snap, s.Store, states)
	snap.Build = s.Build
	if s.LastTest != nil {
		snap.LastTest = s.LastTest()
	}
	return snap, errors.Join(err, kerr, aerr)
}

// AddAutorate adds to snap's queues the autorate status the daemon keeps
// in store for each of states with autorate on.
func AddAutorate(snap *Snapshot, store *service.Store, states []*service.State) error {
	var errs []error
	on := map[string]bool{}
	for _, st := range states {
		if st != nil && st.Queue.Autorate.Enabled {
			on[st.Interface] = true
		}
	}
	for i := range snap.Queues {
		q := &snap.Queues[i]
		if !on[q.Interface] {
			continue
		}
		a, err := store.Autorate(q.Interface)
		if err != nil {
			errs = append(errs, err)
		}
		q.Autorate = a
	}
	return errors.Join(errs...)
}

// FromStates builds a snapshot of the interfaces in states; the error
// joins what the kernel failed to report other than missing devices.
func FromStates(k StatusReader, states []*service.State) (*Snapshot, error) {
	snap := &Snapshot{}
	var errs []error
	read := func(dev string) *kernel.DeviceStatus {
		ds, err := k.Status(dev)
		switch {
		case errors.Is(err, kernel.ErrNoLink):
			return nil
		case err != nil:
			errs = append(errs, err)
			return nil
		case len(ds) != 1:
			errs = append(errs, fmt.Errorf("status of %s: %d devices returned", dev, len(ds)))
			return nil
		}
		return &ds[0]
	}
	for _, st := range states {
		if st == nil {
			continue
		}
		q := Queue{
			Interface: st.Interface,
			Section:   st.Section,
			Recipe:    strings.TrimSuffix(st.Queue.Script, ".qos"),
			Qdisc:     st.Queue.Qdisc,
			AppliedAt: st.AppliedAt,
		}
		dev := read(st.Interface)
		if st.Queue.Upload > 0 {
			q.Directions = append(q.Directions, direction("egress", st.Interface, st.Queue.Upload, dev, plan.HandleRoot))
		}
		if st.Queue.Download > 0 {
			switch {
			case st.Owned.IFB != "":
				q.Directions = append(q.Directions, direction("ingress", st.Owned.IFB, st.Queue.Download, read(st.Owned.IFB), plan.HandleRoot))
			default:
				// Policed in place: the ingress qdisc carries the
				// policer's traffic.
				q.Directions = append(q.Directions, direction("ingress", st.Interface, st.Queue.Download, dev, plan.HandleIngress))
			}
		}
		snap.Queues = append(snap.Queues, q)
	}
	return snap, errors.Join(errs...)
}

// direction finds the qdisc attached at parent on dev (nil dev: gone).
func direction(name, device string, kbit uint64, dev *kernel.DeviceStatus, parent plan.Handle) Direction {
	d := Direction{Name: name, Device: device, RateKbit: kbit}
	if dev == nil {
		return d
	}
	d.Ifindex = dev.Ifindex
	for i := range dev.Qdiscs {
		if dev.Qdiscs[i].Parent == parent {
			q := dev.Qdiscs[i]
			d.Root = &q
			break
		}
	}
	if d.Root == nil || parent != plan.HandleRoot {
		return d
	}
	for _, q := range dev.Qdiscs {
		if q.Parent != plan.HandleRoot && q.Parent != plan.HandleIngress {
			d.Leaves = append(d.Leaves, q)
		}
	}
	return d
}
