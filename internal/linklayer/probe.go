package linklayer

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/net/icmp"
	"golang.org/x/net/ipv4"
	"golang.org/x/net/ipv6"
)

// ProbeOptions say what Probe sends.
type ProbeOptions struct {
	Target netip.Addr
	// Sizes are IP packet sizes in bytes (header included); each is sent
	// Repeat times, all in one shuffled order, so that a change of the
	// line during the run spreads over all sizes instead of bending the
	// curve at one end.
	Sizes  []int
	Repeat int
	// Interval between sends. It must exceed the largest probe's
	// serialisation time on the slower direction, or probes queue behind
	// each other and the staircase blurs (252 bytes at 864 kbit/s, ATM:
	// 2.5 ms; the default 10 ms suits lines down to about 256 kbit/s).
	Interval time.Duration
	// Timeout is how long the last probe's echo is awaited.
	Timeout time.Duration
	// Progress, if set, is called after each send.
	Progress func(sent, total int)
}

// DefaultSizes spans four ATM cells in 1-byte steps above the smallest
// IPv4 echo with a probe cookie: 60..252 bytes, 193 sizes.
func DefaultSizes() []int {
	s := make([]int, 0, 193)
	for n := 60; n <= 252; n++ {
		s = append(s, n)
	}
	return s
}

// ParseSizes reads "LO-HI" or "LO-HI/STEP" (bytes, IP packet sizes) as
// the --sizes flag gives it.
func ParseSizes(s string) ([]int, error) {
	rng, stepS, hasStep := strings.Cut(s, "/")
	loS, hiS, ok := strings.Cut(rng, "-")
	if !ok {
		return nil, fmt.Errorf("sizes %q: give LO-HI or LO-HI/STEP in bytes, e.g. 60-252", s)
	}
	lo, err1 := strconv.Atoi(strings.TrimSpace(loS))
	hi, err2 := strconv.Atoi(strings.TrimSpace(hiS))
	step := 1
	var err3 error
	if hasStep {
		step, err3 = strconv.Atoi(strings.TrimSpace(stepS))
	}
	if err := errors.Join(err1, err2, err3); err != nil {
		return nil, fmt.Errorf("sizes %q: not numbers: give LO-HI or LO-HI/STEP, e.g. 60-252", s)
	}
	switch {
	case lo < minIPSize(true):
		return nil, fmt.Errorf("sizes %q: %d bytes is below the smallest probe (%d: IPv6 header, ICMP header and an 8-byte cookie); give LO of at least %d", s, lo, minIPSize(true), minIPSize(true))
	case hi > 1500:
		return nil, fmt.Errorf("sizes %q: %d bytes is above a 1500-byte MTU; larger probes would be fragmented", s, hi)
	case hi-lo < 2*cellPayload:
		return nil, fmt.Errorf("sizes %q: span %d bytes; need at least %d (two ATM cells)", s, hi-lo, 2*cellPayload)
	case step < 1 || step > cellPayload/4:
		return nil, fmt.Errorf("sizes %q: step %d outside 1..%d: steps must be well under a cell to place it", s, step, cellPayload/4)
	}
	var out []int
	for n := lo; n <= hi; n += step {
		out = append(out, n)
	}
	return out, nil
}

// minIPSize is the smallest IP packet that carries an echo with the
// probe's 8-byte cookie.
func minIPSize(v6 bool) int {
	if v6 {
		return 40 + 8 + 8
	}
	return 20 + 8 + 8
}

// Probe sends ICMP echo requests of the given IP sizes to the target,
// paced and in random order, and returns the answered ones. It uses an
// unprivileged ping socket where the system allows one, else a raw
// socket (root). Unanswered probes are left out: the percentile per size
// does not need every one.
func Probe(ctx context.Context, o ProbeOptions) ([]Sample, error) {
	if !o.Target.IsValid() {
		return nil, errors.New("linklayer: no target address")
	}
	if o.Repeat < 1 || len(o.Sizes) == 0 {
		return nil, fmt.Errorf("linklayer: %d sizes x %d repeats: nothing to send", len(o.Sizes), o.Repeat)
	}
	if o.Interval <= 0 {
		o.Interval = 10 * time.Millisecond
	}
	if o.Timeout <= 0 {
		o.Timeout = 2 * time.Second
	}
	v6 := o.Target.Is6() && !o.Target.Is4In6()
	target := o.Target.Unmap()
	hdr, proto, echo, reply := 20, 1, icmp.Type(ipv4.ICMPTypeEcho), icmp.Type(ipv4.ICMPTypeEchoReply)
	dgram, raw, wild := "udp4", "ip4:icmp", "0.0.0.0"
	if v6 {
		hdr, proto, echo, reply = 40, 58, ipv6.ICMPTypeEchoRequest, ipv6.ICMPTypeEchoReply
		dgram, raw, wild = "udp6", "ip6:ipv6-icmp", "::"
	}
	for _, s := range o.Sizes {
		if s < minIPSize(v6) || s > 65535 {
			return nil, fmt.Errorf("linklayer: probe size %d outside %d..65535 bytes", s, minIPSize(v6))
		}
	}
	var dst net.Addr
	conn, errD := icmp.ListenPacket(dgram, wild)
	if errD == nil {
		dst = &net.UDPAddr{IP: target.AsSlice(), Zone: target.Zone()}
	} else {
		var errR error
		conn, errR = icmp.ListenPacket(raw, wild)
		if errR != nil {
			return nil, fmt.Errorf("linklayer: cannot send ICMP echo (ping socket: %v; raw socket: %v): allow ping sockets with sysctl net.ipv4.ping_group_range or run as root", errD, errR)
		}
		dst = &net.IPAddr{IP: target.AsSlice(), Zone: target.Zone()}
	}
	defer conn.Close()

	var cookie [8]byte
	if _, err := rand.Read(cookie[:]); err != nil {
		return nil, err
	}
	order := make([]int, 0, len(o.Sizes)*o.Repeat)
	for range o.Repeat {
		order = append(order, o.Sizes...)
	}
	mrand.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })

	// sent[seq] is when probe seq left; the reader fills rtt[seq].
	sent := make([]time.Time, len(order))
	rtt := make([]time.Duration, len(order))
	var mu sync.Mutex
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, 65536)
		for {
			n, _, err := conn.ReadFrom(buf)
			at := time.Now()
			if err != nil {
				return // closed at the end, or the deadline passed
			}
			m, err := icmp.ParseMessage(proto, buf[:n])
			if err != nil || m.Type != reply {
				continue
			}
			e, ok := m.Body.(*icmp.Echo)
			if !ok || len(e.Data) < 16 || string(e.Data[:8]) != string(cookie[:]) {
				continue // another process's ping
			}
			seq := int(binary.BigEndian.Uint64(e.Data[8:16]))
			mu.Lock()
			if seq >= 0 && seq < len(sent) && !sent[seq].IsZero() && rtt[seq] == 0 {
				rtt[seq] = at.Sub(sent[seq])
			}
			mu.Unlock()
		}
	}()

	id := int(mrand.Uint32() & 0xffff)
	tick := time.NewTicker(o.Interval)
	defer tick.Stop()
	var err error
send:
	for seq, size := range order {
		data := make([]byte, size-hdr-8)
		copy(data, cookie[:])
		binary.BigEndian.PutUint64(data[8:16], uint64(seq))
		b, merr := (&icmp.Message{Type: echo, Body: &icmp.Echo{ID: id, Seq: seq & 0xffff, Data: data}}).Marshal(nil)
		if merr != nil {
			err = merr
			break
		}
		mu.Lock()
		sent[seq] = time.Now()
		mu.Unlock()
		if _, werr := conn.WriteTo(b, dst); werr != nil {
			err = fmt.Errorf("linklayer: send echo to %s: %w", target, werr)
			break
		}
		if o.Progress != nil {
			o.Progress(seq+1, len(order))
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			err = ctx.Err()
			break send
		}
	}
	if err == nil {
		select {
		case <-time.After(o.Timeout):
		case <-ctx.Done():
			err = ctx.Err()
		}
	}
	conn.Close()
	<-done
	mu.Lock()
	defer mu.Unlock()
	var out []Sample
	for seq, d := range rtt {
		if d > 0 {
			out = append(out, Sample{Size: order[seq], RTT: d})
		}
	}
	if err != nil {
		return out, err
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%w by %s (%d sent)", ErrNoSamples, target, len(order))
	}
	return out, nil
}
