package lab

import (
	"context"
	"fmt"
	"net"
	"time"

	"sqm/internal/bloat"
	"sqm/internal/config"
	"sqm/internal/kernel"
	"sqm/internal/netns"
	"sqm/internal/plan"
)

// server is the tester's server running in the server namespace.
type server struct {
	cancel context.CancelFunc
	done   chan error
}

func (s *server) stop() {
	s.cancel()
	<-s.done
}

// startServer listens in the server namespace (sockets keep their
// namespace, so serving from any goroutine afterwards is fine).
func (t *topology) startServer(ctx context.Context) (*server, error) {
	var ln net.Listener
	var pc net.PacketConn
	addr := fmt.Sprintf("%s:%d", serverIP, bloat.DefaultPort)
	err := t.server.Do(func() error {
		var err error
		if ln, err = net.Listen("tcp4", addr); err != nil {
			return err
		}
		if pc, err = net.ListenPacket("udp4", addr); err != nil {
			ln.Close()
			return err
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("lab: start the test server in namespace %s: %w", t.server.Name(), err)
	}
	ctx, cancel := context.WithCancel(ctx)
	s := &server{cancel: cancel, done: make(chan error, 1)}
	srv := bloat.NewServer(bloat.Limits{}, nil)
	go func() { s.done <- srv.Serve(ctx, ln, pc) }()
	return s, nil
}

// measure runs one test from the client namespace to the server.
func (t *topology) measure(ctx context.Context, o *Options, label string) (*bloat.Result, error) {
	last := ""
	res, err := bloat.Run(ctx, bloat.Options{
		Addr:     serverIP,
		Mode:     bloat.Mode(o.Mode),
		Duration: o.Duration,
		Idle:     o.Idle,
		Enter:    t.client.Do,
		Progress: func(p bloat.Progress) {
			// One line per phase of the test, not per step: the lab's
			// progress is for a person watching a terminal.
			if p.Phase != last {
				last = p.Phase
				o.progress("  %s: %s phase (%v of %v)", label, p.Phase, p.Elapsed.Round(time.Second), p.Total.Round(time.Second))
			}
		},
	})
	if err != nil {
		return nil, fmt.Errorf("lab: measure %s: %w", label, err)
	}
	return res, nil
}

// shape applies sqm's plan for q to the router's WAN veth, in the router
// namespace, and returns the plan and a function that removes it.
func (t *topology) shape(q *config.Queue) (*plan.Plan, func() error, error) {
	var p *plan.Plan
	var owned *kernel.Owned
	err := t.router.Do(func() error {
		k, err := kernel.Open()
		if err != nil {
			return err
		}
		defer k.Close()
		mtu, err := k.LinkMTU(q.Interface)
		if err != nil {
			return err
		}
		if p, err = plan.Build(q, plan.Env{MTU: mtu}); err != nil {
			return err
		}
		res, err := k.Apply(p, nil, kernel.ApplyOptions{})
		if err != nil {
			return err
		}
		owned = &res.Owned
		return nil
	})
	if err != nil {
		return nil, nil, fmt.Errorf("lab: shape %s in namespace %s: %w", q.Interface, t.router.Name(), err)
	}
	undo := func() error {
		return t.router.Do(func() error {
			k, err := kernel.Open()
			if err != nil {
				return err
			}
			defer k.Close()
			if err := k.Remove(owned); err != nil {
				return fmt.Errorf("lab: remove shaping from %s: %w", q.Interface, err)
			}
			return nil
		})
	}
	return p, undo, nil
}

// status reads the qdiscs of devs in ns; the lab reports them but does not
// depend on them, so a failure is returned as an empty list.
func (t *topology) status(ns *netns.NS, devs ...string) []kernel.DeviceStatus {
	var st []kernel.DeviceStatus
	_ = ns.Do(func() error {
		k, err := kernel.Open()
		if err != nil {
			return err
		}
		defer k.Close()
		st, err = k.Status(devs...)
		return err
	})
	return st
}
