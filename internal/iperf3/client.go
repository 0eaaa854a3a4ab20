package iperf3

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Direction is which way a test's data flows, seen from the client.
type Direction int

const (
	Upload   Direction = iota // client sends (iperf3's default)
	Download                  // server sends (-R)
	Bidir                     // both, Streams each way (--bidir)
)

func (d Direction) String() string {
	return [...]string{"upload", "download", "bidirectional"}[d]
}

// Config describes one test.
type Config struct {
	Direction Direction
	// Streams per direction, 1..128 (iperf3's limit).
	Streams int
	// Duration is the test time announced to the server, rounded up to
	// whole seconds. The client still decides when the test ends (End); the
	// server only gives up 40 s after this time.
	Duration time.Duration
	// Dial opens the control connection (stream < 0) and the data
	// streams (stream = 0.., in creation order; send says whether the
	// client sends on it). It lets the caller pick the namespace and mark
	// each stream.
	Dial func(ctx context.Context, stream int, send bool) (net.Conn, error)
	// Timeout bounds each exchange on the control connection (default
	// 10 s): starting the test, and ending it.
	Timeout time.Duration
	// Settle is how long Start keeps trying when the server refuses the
	// connection, resets it before saying anything, or says it is busy. A
	// server that has just finished a test closes its listening socket and
	// opens a new one, so a test that follows another at once can fall into
	// that gap; one that connects while the server is still ending the
	// previous test is told it is busy (both seen with iperf3 3.12 on
	// loopback). Zero: one try.
	Settle time.Duration
}

// BlockLen is the size of the writes iperf3 makes on TCP (its default);
// we ask the server for the same.
const BlockLen = 128 << 10

// Stream is one data stream of a running test.
type Stream struct {
	ID   int  // iperf3's stream id, as in the results
	Send bool // the client sends on it
	Conn net.Conn
}

// Test is a test in progress, between TEST_RUNNING and End.
type Test struct {
	cfg     Config
	ctl     net.Conn
	cookie  [CookieSize]byte
	Streams []Stream // client-sending streams first, as iperf3 creates them

	// After TEST_RUNNING a goroutine waits for the next state byte, so that
	// a server that ends the test early is noticed during the test.
	next   chan stateOrErr
	done   chan struct{} // closed when that byte (or an error) arrived
	ending atomic.Bool
	once   sync.Once
	early  error
}

type stateOrErr struct {
	s   State
	err error
}

// Start connects to the server and runs the protocol up to TEST_RUNNING:
// from then on the streams carry data. On any failure everything opened is
// closed; ErrBusy (wrapped) means the server is running another test.
func Start(ctx context.Context, cfg Config) (*Test, error) {
	if cfg.Streams < 1 || cfg.Streams > 128 {
		return nil, fmt.Errorf("iperf3: %d streams outside 1..128", cfg.Streams)
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 10 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	settleEnd := time.Now().Add(cfg.Settle)
	for {
		t, err := try(ctx, cfg)
		if err == nil {
			go t.watch()
			return t, nil
		}
		if !(errors.Is(err, errNotAccepted) || errors.Is(err, ErrBusy)) || time.Now().After(settleEnd) {
			return nil, fmt.Errorf("iperf3: %w", err)
		}
		select {
		case <-time.After(10 * time.Millisecond):
		case <-ctx.Done():
			return nil, fmt.Errorf("iperf3: %w", err)
		}
	}
}

// errNotAccepted marks a connection refused, or closed before the server
// said anything.
var errNotAccepted = errors.New("not accepted")

type notAccepted struct{ err error }

func (e notAccepted) Error() string        { return e.err.Error() }
func (e notAccepted) Unwrap() []error      { return []error{e.err, errNotAccepted} }
func (e notAccepted) Is(target error) bool { return target == errNotAccepted }

func try(ctx context.Context, cfg Config) (*Test, error) {
	t := &Test{cfg: cfg, next: make(chan stateOrErr, 1), done: make(chan struct{})}
	var err error
	if t.cookie, err = NewCookie(); err != nil {
		return nil, err
	}
	t.ctl, err = cfg.Dial(ctx, -1, false)
	if err != nil {
		err = fmt.Errorf("connect: %w", err)
		if errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) {
			err = notAccepted{err}
		}
		return nil, err
	}
	if err := t.start(ctx); err != nil {
		t.Close()
		return nil, err
	}
	return t, nil
}

func (t *Test) start(ctx context.Context) error {
	stop := context.AfterFunc(ctx, func() { t.ctl.SetDeadline(time.Now()) })
	defer stop()
	if _, err := t.ctl.Write(t.cookie[:]); err != nil {
		// A busy server may already have sent ACCESS_DENIED and closed.
		if s, rerr := ReadState(t.ctl, "PARAM_EXCHANGE"); rerr == nil && s == AccessDenied {
			return ErrBusy
		}
		err = fmt.Errorf("send cookie: %w", err)
		// Reset before the server said anything: the connection landed in
		// the backlog of a listening socket the server has since closed
		// (iperf3 closes and reopens it after every test), so it was never
		// accepted and Start may try again.
		if errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) {
			return notAccepted{err}
		}
		return err
	}
	steps := []State{ParamExchange, CreateStreams, TestStart, TestRunning}
	for i, want := range steps {
		s, err := ReadState(t.ctl, want.String())
		if i == 0 && (errors.Is(err, syscall.ECONNRESET) || errors.Is(err, errClosed)) {
			return notAccepted{err}
		}
		if err != nil {
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return fmt.Errorf("no %s from the server within %v", want, t.cfg.Timeout)
			}
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return err
		}
		if err := unexpected(t.ctl, s, want); err != nil {
			return err
		}
		switch s {
		case ParamExchange:
			p := Params{TCP: true, Time: int((t.cfg.Duration + time.Second - 1) / time.Second), Parallel: t.cfg.Streams,
				Len: BlockLen, PacingTimer: 1000, ClientVersion: "sqm"}
			p.Time = max(p.Time, 1)
			p.Reverse = t.cfg.Direction == Download
			p.Bidirectional = t.cfg.Direction == Bidir
			if err := WriteJSON(t.ctl, &p); err != nil {
				return fmt.Errorf("send parameters: %w", err)
			}
		case CreateStreams:
			if err := t.createStreams(ctx); err != nil {
				return err
			}
		}
	}
	return nil
}

// unexpected turns a state other than want into an error that says what
// the server did.
func unexpected(r io.Reader, s, want State) error {
	switch {
	case s == want:
		return nil
	case s == AccessDenied:
		return ErrBusy
	case s == ServerError:
		return readServerError(r)
	case s == ServerTerminate:
		return fmt.Errorf("server ended the test (SERVER_TERMINATE) while we waited for %s", want)
	default:
		return fmt.Errorf("server sent %s (%d) where %s belongs", s, int8(s), want)
	}
}

func (t *Test) createStreams(ctx context.Context) error {
	var order []bool // send, per stream in creation order
	for i := 0; i < t.cfg.Streams; i++ {
		order = append(order, t.cfg.Direction != Download)
	}
	if t.cfg.Direction == Bidir {
		for i := 0; i < t.cfg.Streams; i++ {
			order = append(order, false)
		}
	}
	ids := StreamIDs(len(order))
	// One after another: the server pairs streams with directions in the
	// order it accepts them.
	for i, send := range order {
		c, err := t.cfg.Dial(ctx, i, send)
		if err != nil {
			return fmt.Errorf("open stream %d of %d: %w", i+1, len(order), err)
		}
		t.Streams = append(t.Streams, Stream{ID: ids[i], Send: send, Conn: c})
		if _, err := c.Write(t.cookie[:]); err != nil {
			return fmt.Errorf("stream %d: send cookie: %w", i+1, err)
		}
	}
	return nil
}

func (t *Test) watch() {
	s, err := ReadState(t.ctl, "the end of the test")
	t.next <- stateOrErr{s, err}
	if !t.ending.Load() {
		switch {
		case err != nil:
			t.early = fmt.Errorf("iperf3: during the test: %w", err)
		default:
			t.early = fmt.Errorf("iperf3: during the test: %w", unexpected(t.ctl, s, TestEnd))
		}
	}
	close(t.done)
}

// Done is closed when the server sent something or closed the control
// connection; before End that means the test was cut short (Err says how).
func (t *Test) Done() <-chan struct{} { return t.done }

// Err says why the server ended the test before End, or nil.
func (t *Test) Err() error {
	select {
	case <-t.done:
		return t.early
	default:
		return nil
	}
}

// End ends the test: it sends TEST_END, exchanges results (ours are the
// bytes counted on each stream, in the order of Streams) and returns the
// server's, then says IPERF_DONE and waits for the server to close the
// control connection, so that a next test can start at once (a server
// that has not yet finished with this one would refuse it as busy). It does
// not close the data streams: the server does, when it reads TEST_END.
func (t *Test) End(ctx context.Context, elapsed time.Duration, counted []int64) (*Results, error) {
	if len(counted) != len(t.Streams) {
		return nil, fmt.Errorf("iperf3: %d counts for %d streams", len(counted), len(t.Streams))
	}
	t.ending.Store(true)
	if err := t.Err(); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, t.cfg.Timeout)
	defer cancel()
	stop := context.AfterFunc(ctx, func() { t.ctl.SetDeadline(time.Now()) })
	defer stop()
	res, err := t.end(elapsed, counted)
	if err != nil && ctx.Err() != nil {
		err = fmt.Errorf("%w (no answer within %v)", err, t.cfg.Timeout)
	}
	if err != nil {
		return nil, fmt.Errorf("iperf3: ending the test: %w", err)
	}
	return res, nil
}

func (t *Test) end(elapsed time.Duration, counted []int64) (*Results, error) {
	if _, err := t.ctl.Write([]byte{byte(TestEnd)}); err != nil {
		return nil, fmt.Errorf("send TEST_END: %w", err)
	}
	se := <-t.next
	if se.err != nil {
		return nil, se.err
	}
	if err := unexpected(t.ctl, se.s, ExchangeResults); err != nil {
		return nil, err
	}
	// We measure no CPU load and report no retransmits: the server only
	// prints these numbers.
	ours := Results{SenderHasRetransmits: 0, Streams: []StreamResult{}}
	for i, st := range t.Streams {
		ours.Streams = append(ours.Streams, StreamResult{ID: st.ID, Bytes: counted[i], Retransmits: -1,
			EndTime: elapsed.Seconds()})
	}
	if err := WriteJSON(t.ctl, &ours); err != nil {
		return nil, fmt.Errorf("send results: %w", err)
	}
	body, err := ReadJSON(t.ctl, "server's results")
	if err != nil {
		return nil, err
	}
	res, err := ParseResults(body)
	if err != nil {
		return nil, fmt.Errorf("server's %w", err)
	}
	known := map[int]bool{}
	for _, st := range t.Streams {
		known[st.ID] = true
	}
	for _, sr := range res.Streams {
		if !known[sr.ID] {
			return nil, fmt.Errorf("server's results name stream %d, which this test does not have", sr.ID)
		}
	}
	s, err := ReadState(t.ctl, "DISPLAY_RESULTS")
	if err != nil {
		return nil, err
	}
	if err := unexpected(t.ctl, s, DisplayResults); err != nil {
		return nil, err
	}
	if _, err := t.ctl.Write([]byte{byte(IperfDone)}); err != nil {
		return nil, fmt.Errorf("send IPERF_DONE: %w", err)
	}
	// The server closes the control connection once it is ready for the
	// next test. Anything else it sends is ignored, but not forever.
	io.CopyN(io.Discard, t.ctl, 4096)
	return res, nil
}

// Close closes the control connection and every stream. It may be called
// more than once, and at any time to abort a test.
func (t *Test) Close() {
	t.once.Do(func() {
		t.ctl.Close()
		for _, st := range t.Streams {
			st.Conn.Close()
		}
	})
}
