// Package linkwatch reports network interfaces appearing, disappearing and
// changing state, from the kernel's rtnetlink link multicast group
// (RTNLGRP_LINK). The daemon uses it to shape interfaces that come late
// (PPPoE, Wi-Fi, VLANs) without polling.
//
// The watcher only reports; debouncing and deciding what to do are the
// caller's business, so this package stays a thin, testable seam.
package linkwatch

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"golang.org/x/sys/unix"

	"sqm/internal/netlink"
	"sqm/internal/rtlink"
)

// Event is one change of one interface.
type Event struct {
	_ [0]func() // not comparable: no equality code (docs/testing.md, "Package sizes")

	Name  string
	Index int
	// Up is true when the interface is administratively up (IFF_UP) and
	// the lower layer is running (IFF_RUNNING).
	Up bool
	// Deleted is true for RTM_DELLINK: the interface is gone.
	Deleted bool
	// Resync is true when the kernel dropped events (socket buffer
	// overflow): the receiver must assume anything may have changed.
	// Name is empty then.
	Resync bool
}

func (e Event) String() string {
	switch {
	case e.Resync:
		return "link events lost: resync"
	case e.Deleted:
		return fmt.Sprintf("link %s (index %d) deleted", e.Name, e.Index)
	case e.Up:
		return fmt.Sprintf("link %s (index %d) up", e.Name, e.Index)
	}
	return fmt.Sprintf("link %s (index %d) down", e.Name, e.Index)
}

// Watcher receives link events from the kernel of the network namespace it
// was opened in.
type Watcher struct {
	conn      *netlink.Conn
	closeOnce sync.Once
}

// Open subscribes to link events. It needs no privileges.
func Open() (*Watcher, error) {
	c, err := netlink.Dial(netlink.Config{})
	if err != nil {
		return nil, fmt.Errorf("linkwatch: subscribe to rtnetlink link events: %w", err)
	}
	if err := c.JoinGroup(unix.RTNLGRP_LINK); err != nil {
		c.Close()
		return nil, fmt.Errorf("linkwatch: subscribe to rtnetlink link events: %w", err)
	}
	return &Watcher{conn: c}, nil
}

// Close stops the watcher; a blocked Run returns.
func (w *Watcher) Close() error {
	var err error
	w.closeOnce.Do(func() { err = w.conn.Close() })
	return err
}

// Run sends events to out until ctx is cancelled (then it returns nil) or the
// socket fails. It blocks in the kernel between events: no polling.
func (w *Watcher) Run(ctx context.Context, out chan<- Event) error {
	stop := context.AfterFunc(ctx, func() { w.Close() })
	defer stop()
	for {
		msgs, err := w.conn.Receive()
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			if errors.Is(err, unix.ENOBUFS) {
				if !send(ctx, out, Event{Resync: true}) {
					return nil
				}
				continue
			}
			return fmt.Errorf("linkwatch: receive link events: %w", err)
		}
		for _, m := range msgs {
			if m.Header.Type != unix.RTM_NEWLINK && m.Header.Type != unix.RTM_DELLINK {
				continue
			}
			l, err := rtlink.Decode(m.Data)
			if err != nil || l.Name == "" {
				continue
			}
			ev := Event{
				Name:    l.Name,
				Index:   l.Index,
				Up:      l.Flags&unix.IFF_UP != 0 && l.Flags&unix.IFF_RUNNING != 0,
				Deleted: m.Header.Type == unix.RTM_DELLINK,
			}
			if !send(ctx, out, ev) {
				return nil
			}
		}
	}
}

func send(ctx context.Context, out chan<- Event, ev Event) bool {
	select {
	case out <- ev:
		return true
	case <-ctx.Done():
		return false
	}
}

// Exists reports whether an interface of that name exists now. It exists
// here so that the daemon can check a name without a tc connection.
func Exists(name string) bool {
	_, err := rtlink.Lookup(name)
	return err == nil
}
