package iperf3_test

import (
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"sqm/internal/iperf3"
	"sqm/internal/iperf3/iperf3test"
)

func dialer(addr string) func(context.Context, int, bool) (net.Conn, error) {
	return func(ctx context.Context, _ int, _ bool) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "tcp", addr)
	}
}

// runTest runs one test of d against addr for dur, moving data on every
// stream, and returns what we counted per stream and the server's results.
func runTest(t *testing.T, addr string, d iperf3.Direction, streams int, dur time.Duration) ([]int64, *iperf3.Results, *iperf3.Test) {
	t.Helper()
	ctx := context.Background()
	tt, err := iperf3.Start(ctx, iperf3.Config{Direction: d, Streams: streams, Duration: dur, Dial: dialer(addr), Settle: 2 * time.Second})
	if err != nil {
		t.Fatalf("%v: %v", d, err)
	}
	defer tt.Close()
	counts := make([]atomic.Int64, len(tt.Streams))
	var senders, readers sync.WaitGroup
	for i, st := range tt.Streams {
		wg := &readers
		if st.Send {
			wg = &senders
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, 64<<10)
			for {
				var n int
				var err error
				if st.Send {
					n, err = st.Conn.Write(buf)
				} else {
					n, err = st.Conn.Read(buf)
				}
				counts[i].Add(int64(n))
				if err != nil {
					return
				}
			}
		}()
	}
	start := time.Now()
	select {
	case <-time.After(dur):
	case <-tt.Done():
		t.Fatalf("%v: server ended the test early: %v", d, tt.Err())
	}
	// Receivers count what arrived by now; senders what they wrote in all.
	got := make([]int64, len(counts))
	for i := range counts {
		got[i] = counts[i].Load()
	}
	for _, st := range tt.Streams {
		if st.Send {
			st.Conn.SetWriteDeadline(time.Now())
		}
	}
	senders.Wait()
	for i, st := range tt.Streams {
		if st.Send {
			got[i] = counts[i].Load()
		}
	}
	res, err := tt.End(ctx, time.Since(start), got)
	if err != nil {
		t.Fatalf("%v: %v", d, err)
	}
	for _, st := range tt.Streams {
		st.Conn.Close()
	}
	readers.Wait()
	return got, res, tt
}

// TestInterop runs each direction against Debian's iperf3 server on
// loopback and checks that the server's per-stream counts line up with
// ours: ids agree, the receiving side never counts more than the sending
// side wrote, and every stream moved data.
func TestInterop(t *testing.T) {
	iperf3test.Require(t)
	addr := iperf3test.Serve(t, nil, "127.0.0.1", iperf3test.FreePort(t))
	for _, c := range []struct {
		d       iperf3.Direction
		streams int
	}{{iperf3.Download, 2}, {iperf3.Upload, 3}, {iperf3.Bidir, 2}} {
		ours, res, tt := runTest(t, addr, c.d, c.streams, 700*time.Millisecond)
		want := c.streams
		if c.d == iperf3.Bidir {
			want *= 2
		}
		if len(tt.Streams) != want || len(res.Streams) != want {
			t.Fatalf("%v: %d streams here, %d in the server's results; want %d", c.d, len(tt.Streams), len(res.Streams), want)
		}
		byID := map[int]iperf3.StreamResult{}
		for _, sr := range res.Streams {
			byID[sr.ID] = sr
		}
		for i, st := range tt.Streams {
			sr, ok := byID[st.ID]
			if !ok {
				t.Fatalf("%v: stream id %d missing from the server's results %+v", c.d, st.ID, res.Streams)
			}
			if ours[i] == 0 || sr.Bytes == 0 {
				t.Errorf("%v: stream %d moved no data (ours %d, server %d)", c.d, st.ID, ours[i], sr.Bytes)
			}
			// Sending side writes into a socket buffer: it can only be ahead.
			if st.Send && sr.Bytes > ours[i] {
				t.Errorf("%v: server received %d bytes on stream %d, more than the %d we wrote", c.d, sr.Bytes, st.ID, ours[i])
			}
			if !st.Send && ours[i] > sr.Bytes {
				t.Errorf("%v: we received %d bytes on stream %d, more than the %d the server sent", c.d, ours[i], st.ID, sr.Bytes)
			}
			t.Logf("%v stream %d send=%v: ours %d server %d (%.2f..%.2f s)", c.d, st.ID, st.Send, ours[i], sr.Bytes, sr.StartTime, sr.EndTime)
		}
	}
}

// TestInteropBusy holds a test open on a real server, checks that a second
// client gets ErrBusy, and that a test right after the first one ends is
// accepted: End waits until the server is ready for the next test.
func TestInteropBusy(t *testing.T) {
	iperf3test.Require(t)
	addr := iperf3test.Serve(t, nil, "127.0.0.1", iperf3test.FreePort(t))
	ctx := context.Background()
	first, err := iperf3.Start(ctx, iperf3.Config{Direction: iperf3.Download, Streams: 1, Duration: time.Second, Dial: dialer(addr)})
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	go io.Copy(io.Discard, first.Streams[0].Conn)
	_, err = iperf3.Start(ctx, iperf3.Config{Direction: iperf3.Download, Streams: 1, Duration: time.Second, Dial: dialer(addr)})
	if !errors.Is(err, iperf3.ErrBusy) {
		t.Fatalf("second test while the first runs: got %v, want ErrBusy", err)
	}
	if _, err := first.End(ctx, time.Second, []int64{0}); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		runTest(t, addr, iperf3.Upload, 1, 200*time.Millisecond)
	}
}
