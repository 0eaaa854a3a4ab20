package bloat

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sort"
	"time"

	"sqm/internal/irtt"
)

// resolveIRTT resolves Options.IRTT in the probes' namespace.
func (c *client) resolveIRTT(network string) (*net.UDPAddr, error) {
	hp := irttHostPort(c.o.IRTT)
	var ra *net.UDPAddr
	err := c.o.Enter(func() error {
		var err error
		ra, err = net.ResolveUDPAddr(network, hp)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("bloat: irtt server %s: %w", hp, err)
	}
	return ra, nil
}

// irttOpenWait bounds the irtt handshakes, which retry for up to 7 s.
const irttOpenWait = 10 * time.Second

// irttKind opens an irtt connection on conn for one probe kind, asking
// for the run's interval, both timestamps from both clocks (wall for the
// one-way delays, monotonic for the server's own time between receive and
// send), the server's received count (to split losses by direction), and
// replies marked like the requests.
func (c *client) irttKind(name string, dscp int, conn *net.UDPConn) (*kind, error) {
	want := irtt.Params{
		// The server ends the connection after Duration: the run, the
		// wait for late replies and a margin.
		Duration:      c.total + maxLateReplyWait + 5*time.Second,
		Interval:      c.o.Interval,
		ReceivedStats: irtt.ReceivedCount,
		StampAt:       irtt.AtBoth,
		Clock:         irtt.BothClocks,
		DSCP:          dscp << 2, // irtt takes the whole TOS byte
	}
	ctx, cancel := context.WithTimeout(context.Background(), irttOpenWait)
	defer cancel()
	s, err := irtt.Open(ctx, conn, want, c.o.IRTTKey)
	if err != nil {
		return nil, err
	}
	k := &kind{name: name, dscp: dscp, conn: conn, downDSCP: -1, upDSCP: -1,
		server: conn.RemoteAddr().String(), protocol: "irtt", irtt: s}
	if s.Params.Interval > c.o.Interval {
		k.interval = s.Params.Interval
		c.note("irtt server %s allows one probe every %v at most; %s probes go at that pace instead of every %v", k.server, s.Params.Interval, name, c.o.Interval)
	}
	if s.Params.Duration > 0 && s.Params.Duration < c.total {
		c.note("irtt server %s limits a test to %v, shorter than this run (%v): %s probes after that go unanswered", k.server, s.Params.Duration, c.total.Round(time.Second), name)
	}
	wall, mono := s.HasStamps()
	enableRxTimestamps(conn)
	out := make([]byte, 0, 256)
	oob := make([]byte, 128)
	k.send = func(seq uint64, t time.Duration) error {
		_, err := conn.Write(s.AppendRequest(out[:0], uint32(seq)))
		return err
	}
	k.read = func(buf []byte) (reply, error) {
		n, _, at, tos, err := readStamped(conn, buf, oob)
		if err != nil {
			return reply{at: at}, err
		}
		p, err := s.ParseReply(buf[:n])
		k.mu.Lock()
		defer k.mu.Unlock()
		if err != nil {
			if !errors.Is(err, irtt.ErrClosed) {
				k.badReplies++
				k.lastBad = err
			}
			return reply{at: at}, nil
		}
		seq := uint64(p.Seqno)
		if seq >= uint64(len(k.recs)) {
			k.badReplies++
			k.lastBad = fmt.Errorf("reply to probe %d, which was never sent", seq)
			return reply{at: at}, nil
		}
		k.downDSCP = tos
		if p.Flags&irtt.FlagClose != 0 {
			k.srvClosed = true
		}
		if s.Params.ReceivedStats&irtt.ReceivedCount != 0 && seq >= k.lastSeq {
			k.lastSeq, k.srvCount, k.hasCount = seq, p.ReceivedCount, true
		}
		r := reply{at: at, seq: seq, ok: true}
		switch {
		case mono:
			r.proc = time.Duration(p.Send.Mono - p.Receive.Mono)
		case wall:
			r.proc = time.Duration(p.Send.Wall - p.Receive.Wall)
		}
		if r.proc < 0 {
			r.proc = 0
		}
		if wall {
			r.srvRecv, r.srvSend = p.Receive.Wall, p.Send.Wall
		}
		return r, nil
	}
	return k, nil
}

// irttNotes says once per run what the irtt server could not give.
func (c *client) irttNotes() {
	for _, k := range c.kinds {
		if k.irtt == nil {
			continue
		}
		if wall, _ := k.irtt.HasStamps(); !wall {
			c.note("irtt server %s gives no wall clock timestamps: round trips only, no one-way delays", k.server)
		}
		return
	}
}

// finish notes, once the socket is closed, what the irtt replies told
// beyond the round trips: replies that failed the checks, and on which
// way the lost probes were lost.
func (k *kind) finish(c *client) {
	if k.irtt != nil {
		k.irttFinish(c)
	}
}

func (k *kind) irttFinish(c *client) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.srvClosed {
		c.note("%s: irtt server %s ended the connection during the run (its test duration limit); later probes went unanswered", k.name, k.server)
	}
	if k.badReplies > 0 {
		c.note("%s: %d replies from irtt server %s were dropped (last: %v)", k.name, k.badReplies, k.server, k.lastBad)
	}
	if !k.hasCount {
		return
	}
	// Of the probes up to the last one answered, the server counted
	// srvCount: the rest of those were lost on the way there, and the
	// others not answered were lost on the way back.
	upTo := k.lastSeq + 1
	got := uint64(0)
	for _, r := range k.recs[:upTo] {
		if r.got {
			got++
		}
	}
	lost := upTo - got
	if lost == 0 {
		return
	}
	up := upTo - min(uint64(k.srvCount), upTo)
	down := lost - min(up, lost)
	c.note("%s: %d of the first %d probes lost; by the irtt server's count %d on the way there, %d on the way back", k.name, lost, upTo, up, down)
}

// describe fills in where a kind's probes went and, for kinds with server
// timestamps, whether those look like synchronised clocks and the induced
// one-way delays, which need no synchronisation. It returns a note for the
// user, or "".
func (k *kind) describe(ps *ProbeSummary, samples []Sample, idle, loaded func(t float64) bool) string {
	ps.Server, ps.Protocol = k.server, k.protocol
	k.mu.Lock()
	var worst int64 // most negative raw one-way delay
	n := 0
	for _, r := range k.recs {
		if r.got && r.hasOWD {
			n++
			worst = min(worst, r.a, r.b)
		}
	}
	k.mu.Unlock()
	if n == 0 {
		return ""
	}
	synced := worst >= 0
	ps.ClocksSynced = &synced
	var iu, id, lu, ld []float64
	for _, s := range samples {
		if s.Kind != k.name || s.Lost || (s.OWDUpMs == 0 && s.OWDDownMs == 0) {
			continue
		}
		switch {
		case idle(s.TS):
			iu, id = append(iu, s.OWDUpMs), append(id, s.OWDDownMs)
		case loaded(s.TS):
			lu, ld = append(lu, s.OWDUpMs), append(ld, s.OWDDownMs)
		}
	}
	induced := ""
	if len(iu) > 0 && len(lu) > 0 {
		ps.InducedOWDUpMs = median(lu) - median(iu)
		ps.InducedOWDDownMs = median(ld) - median(id)
		induced = fmt.Sprintf("; induced one-way delay (loaded minus idle median, offset-free): up %.2f ms, down %.2f ms", ps.InducedOWDUpMs, ps.InducedOWDDownMs)
	}
	if synced {
		return "" // said in the JSON (clocks_synced) and the per-kind line
	}
	return fmt.Sprintf("%s: the clocks here and at %s are not synchronised (a one-way delay came out %.2f ms): one-way delays carry an unknown offset, so the reported ones assume the fastest probe's path was symmetric%s", k.name, k.server, float64(worst)/1e6, induced)
}

func median(v []float64) float64 {
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	m := len(s) / 2
	if len(s)%2 == 1 {
		return s[m]
	}
	return (s[m-1] + s[m]) / 2
}
