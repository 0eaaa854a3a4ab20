package lab

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"
)

// The ground-truth latency flow of a trace run: timestamped UDP datagrams
// from the server to the client (down) and back (up), every owdEvery, on
// ports of their own, so no controller on the router sees them as its
// probes (they cross its shaper as one more sparse flow, which is what a
// call or a game would be). Both ends are in this process, so one
// monotonic clock stamps sending and arrival: the one-way delays are
// exact, not estimated.
const (
	owdEvery = 10 * time.Millisecond
	// owdIdleEvery is the probes' interval in a run without load: at
	// owdEvery they alone are 85 kbit/s each way, which with a
	// controller's own probes is over sqm's 100 kbit/s idle threshold,
	// so the link would never look idle to it.
	owdIdleEvery = 100 * time.Millisecond
	owdPort      = 9177
	owdSize      = 64
	owdMagic     = 0x5371_6d4f // "SqmO"
	owdMaxRecs   = 1 << 17     // 21 minutes at owdEvery: bounds memory
)

// owdRec is one probe: when it was sent and when it arrived (0: lost),
// both since the prober's epoch.
type owdRec struct {
	sent, got time.Duration
}

// owdDir is one direction's probes, written by its receiver only.
type owdDir struct {
	mu   sync.Mutex
	recs []owdRec // indexed by sequence number
	sent int
}

// owdProber sends and receives the probes of both directions.
type owdProber struct {
	epoch    time.Time
	down, up owdDir
	cancel   context.CancelFunc
	wg       sync.WaitGroup
	conns    []*net.UDPConn
	every    time.Duration
}

// startOWD opens the two sockets (server and client namespace) and starts
// sending, every interval, until stop.
func (t *topology) startOWD(ctx context.Context, every time.Duration) (*owdProber, error) {
	p := &owdProber{epoch: time.Now(), every: every}
	var srv, cli *net.UDPConn
	open := func(ip string, into **net.UDPConn) func() error {
		return func() error {
			c, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.ParseIP(ip), Port: owdPort})
			*into = c
			return err
		}
	}
	if err := t.server.Do(open(serverIP, &srv)); err != nil {
		return nil, fmt.Errorf("lab: latency probes in %s: %w", t.server.Name(), err)
	}
	if err := t.client.Do(open(clientIP, &cli)); err != nil {
		srv.Close()
		return nil, fmt.Errorf("lab: latency probes in %s: %w", t.client.Name(), err)
	}
	p.conns = []*net.UDPConn{srv, cli}
	ctx, p.cancel = context.WithCancel(ctx)
	to := func(ip string) *net.UDPAddr { return &net.UDPAddr{IP: net.ParseIP(ip), Port: owdPort} }
	p.wg.Add(4)
	go p.send(ctx, srv, to(clientIP), &p.down)
	go p.send(ctx, cli, to(serverIP), &p.up)
	go p.receive(cli, &p.down)
	go p.receive(srv, &p.up)
	return p, nil
}

func (p *owdProber) send(ctx context.Context, c *net.UDPConn, to *net.UDPAddr, d *owdDir) {
	defer p.wg.Done()
	tk := time.NewTicker(p.every)
	defer tk.Stop()
	buf := make([]byte, owdSize)
	for seq := uint32(0); seq < owdMaxRecs; seq++ {
		binary.BigEndian.PutUint32(buf[0:], owdMagic)
		binary.BigEndian.PutUint32(buf[4:], seq)
		binary.BigEndian.PutUint64(buf[8:], uint64(time.Since(p.epoch)))
		// A send error (a full socket buffer) is a lost probe; the
		// count of sent ones decides the loss.
		_, _ = c.WriteToUDP(buf, to)
		d.mu.Lock()
		d.sent = int(seq) + 1
		d.mu.Unlock()
		select {
		case <-ctx.Done():
			return
		case <-tk.C:
		}
	}
}

// receive records every well-formed probe until the socket is closed;
// anything else arriving on the port is ignored.
func (p *owdProber) receive(c *net.UDPConn, d *owdDir) {
	defer p.wg.Done()
	buf := make([]byte, 2*owdSize)
	for {
		n, err := c.Read(buf)
		if errors.Is(err, net.ErrClosed) {
			return
		}
		now := time.Since(p.epoch)
		if err != nil || n != owdSize || binary.BigEndian.Uint32(buf) != owdMagic {
			continue
		}
		seq := binary.BigEndian.Uint32(buf[4:])
		sent := time.Duration(binary.BigEndian.Uint64(buf[8:]))
		if seq >= owdMaxRecs || sent < 0 || sent > now {
			continue
		}
		d.mu.Lock()
		if int(seq) >= len(d.recs) {
			d.recs = append(d.recs, make([]owdRec, int(seq)+1-len(d.recs))...)
		}
		d.recs[seq] = owdRec{sent: sent, got: now}
		d.mu.Unlock()
	}
}

// stop ends sending, waits a moment for probes still in flight (a full
// FIFO holds them for seconds) and closes the sockets. It returns both
// directions' records, lost probes with got 0 and their send time
// estimated from the schedule.
func (p *owdProber) stop(linger time.Duration) (down, up []owdRec) {
	p.cancel()
	time.Sleep(linger)
	for _, c := range p.conns {
		c.Close()
	}
	p.wg.Wait()
	fill := func(d *owdDir) []owdRec {
		d.mu.Lock()
		defer d.mu.Unlock()
		r := make([]owdRec, d.sent)
		copy(r, d.recs)
		for i := range r {
			if r[i].got == 0 {
				r[i].sent = time.Duration(i) * p.every
			}
		}
		return r
	}
	return fill(&p.down), fill(&p.up)
}
