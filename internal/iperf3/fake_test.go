package iperf3_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"sqm/internal/iperf3"
)

// fake is a scripted iperf3 server on loopback: script gets the control
// connection and a way to accept the data streams.
func fake(t *testing.T, script func(ctl net.Conn, accept func() net.Conn)) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	t.Cleanup(func() { l.Close(); <-done })
	go func() {
		defer close(done)
		ctl, err := l.Accept()
		if err != nil {
			return
		}
		defer ctl.Close()
		var streams []net.Conn
		defer func() {
			for _, c := range streams {
				c.Close()
			}
		}()
		script(ctl, func() net.Conn {
			c, err := l.Accept()
			if err != nil {
				return nil
			}
			streams = append(streams, c)
			return c
		})
	}()
	return l.Addr().String()
}

func state(w io.Writer, s iperf3.State) { w.Write([]byte{byte(s)}) }

func frame(body string) []byte {
	b := make([]byte, 4+len(body))
	binary.BigEndian.PutUint32(b, uint32(len(body)))
	copy(b[4:], body)
	return b
}

// readCookie reads and checks a cookie: 36 characters of iperf3's
// alphabet and a NUL.
func readCookie(t *testing.T, c net.Conn) []byte {
	b := make([]byte, iperf3.CookieSize)
	if _, err := io.ReadFull(c, b); err != nil {
		t.Errorf("cookie: %v", err)
		return nil
	}
	if b[36] != 0 || strings.Trim(string(b[:36]), "abcdefghijklmnopqrstuvwxyz234567") != "" {
		t.Errorf("cookie %q is not 36 base32 characters and a NUL", b)
	}
	return b
}

// upToRunning plays the server's part up to TEST_RUNNING for n streams and
// returns the parameters the client sent.
func upToRunning(t *testing.T, ctl net.Conn, accept func() net.Conn, n int) map[string]any {
	cookie := readCookie(t, ctl)
	state(ctl, iperf3.ParamExchange)
	body, err := iperf3.ReadJSON(ctl, "parameters")
	if err != nil {
		t.Errorf("parameters: %v", err)
		return nil
	}
	var p map[string]any
	json.Unmarshal(body, &p)
	state(ctl, iperf3.CreateStreams)
	for i := 0; i < n; i++ {
		c := accept()
		if c == nil {
			t.Errorf("stream %d not opened", i)
			return p
		}
		if got := readCookie(t, c); !bytes.Equal(got, cookie) {
			t.Errorf("stream %d cookie %q, control's %q", i, got, cookie)
		}
	}
	state(ctl, iperf3.TestStart)
	state(ctl, iperf3.TestRunning)
	return p
}

func dial(addr string) func(context.Context, int, bool) (net.Conn, error) {
	return func(ctx context.Context, _ int, _ bool) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "tcp", addr)
	}
}

// TestStartFailures: every way a server can refuse or break the start of
// a test gives an error that names it.
func TestStartFailures(t *testing.T) {
	for _, tc := range []struct {
		name   string
		script func(t *testing.T, ctl net.Conn, accept func() net.Conn)
		want   string
	}{
		{"busy", func(t *testing.T, ctl net.Conn, _ func() net.Conn) { state(ctl, iperf3.AccessDenied) },
			"server busy"},
		{"closed at once", func(t *testing.T, ctl net.Conn, _ func() net.Conn) { readCookie(t, ctl) },
			"closed the control connection while we waited for PARAM_EXCHANGE"},
		{"wrong state", func(t *testing.T, ctl net.Conn, _ func() net.Conn) {
			readCookie(t, ctl)
			state(ctl, iperf3.TestRunning)
		}, "server sent TEST_RUNNING (2) where PARAM_EXCHANGE belongs"},
		{"unknown state", func(t *testing.T, ctl net.Conn, _ func() net.Conn) {
			readCookie(t, ctl)
			state(ctl, 99)
		}, "unknown state 99"},
		{"server error", func(t *testing.T, ctl net.Conn, _ func() net.Conn) {
			readCookie(t, ctl)
			state(ctl, iperf3.ParamExchange)
			iperf3.ReadJSON(ctl, "p")
			ctl.Write([]byte{0xfe, 0, 0, 0, 107, 0, 0, 0, 24})
		}, "iperf3 error 107: the server rejected a stream: wrong cookie or too many streams; errno 24: too many open files"},
		{"server error cut short", func(t *testing.T, ctl net.Conn, _ func() net.Conn) {
			readCookie(t, ctl)
			ctl.Write([]byte{0xfe, 0, 0})
		}, "SERVER_ERROR) but closed before saying which"},
		{"denied after parameters", func(t *testing.T, ctl net.Conn, _ func() net.Conn) {
			readCookie(t, ctl)
			state(ctl, iperf3.ParamExchange)
			iperf3.ReadJSON(ctl, "p")
			state(ctl, iperf3.AccessDenied)
		}, "server busy"},
		{"terminated", func(t *testing.T, ctl net.Conn, accept func() net.Conn) {
			readCookie(t, ctl)
			state(ctl, iperf3.ParamExchange)
			iperf3.ReadJSON(ctl, "p")
			state(ctl, iperf3.ServerTerminate)
		}, "SERVER_TERMINATE) while we waited for CREATE_STREAMS"},
		{"silent", func(t *testing.T, ctl net.Conn, _ func() net.Conn) {
			readCookie(t, ctl)
			time.Sleep(time.Second)
		}, "no PARAM_EXCHANGE from the server within 200ms"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			addr := fake(t, func(ctl net.Conn, accept func() net.Conn) { tc.script(t, ctl, accept) })
			tt, err := iperf3.Start(context.Background(), iperf3.Config{Direction: iperf3.Download, Streams: 2,
				Duration: time.Second, Dial: dial(addr), Timeout: 200 * time.Millisecond})
			if err == nil {
				tt.Close()
				t.Fatalf("started; want an error with %q", tc.want)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q; want it to say %q", err, tc.want)
			}
		})
	}
}

// TestParameters checks what the client asks for, per direction.
func TestParameters(t *testing.T) {
	for _, tc := range []struct {
		d       iperf3.Direction
		streams int
		dur     time.Duration
		want    map[string]any
		absent  []string
	}{
		{iperf3.Download, 3, 2500 * time.Millisecond, map[string]any{"tcp": true, "parallel": 3.0, "reverse": true, "time": 3.0, "len": 131072.0}, []string{"bidirectional"}},
		{iperf3.Upload, 1, 100 * time.Millisecond, map[string]any{"tcp": true, "parallel": 1.0, "time": 1.0}, []string{"reverse", "bidirectional"}},
		{iperf3.Bidir, 4, 60 * time.Second, map[string]any{"parallel": 4.0, "bidirectional": true, "time": 60.0}, []string{"reverse"}},
	} {
		n := tc.streams
		if tc.d == iperf3.Bidir {
			n *= 2
		}
		got := make(chan map[string]any, 1)
		addr := fake(t, func(ctl net.Conn, accept func() net.Conn) {
			got <- upToRunning(t, ctl, accept, n)
			io.Copy(io.Discard, ctl)
		})
		tt, err := iperf3.Start(context.Background(), iperf3.Config{Direction: tc.d, Streams: tc.streams, Duration: tc.dur, Dial: dial(addr)})
		if err != nil {
			t.Fatalf("%v: %v", tc.d, err)
		}
		p := <-got
		for k, v := range tc.want {
			if p[k] != v {
				t.Errorf("%v: parameter %s = %v, want %v (all: %v)", tc.d, k, p[k], v, p)
			}
		}
		for _, k := range tc.absent {
			if _, ok := p[k]; ok {
				t.Errorf("%v: parameter %s given: %v", tc.d, k, p)
			}
		}
		var sends int
		for i, s := range tt.Streams {
			if s.ID != iperf3.StreamIDs(n)[i] {
				t.Errorf("%v: stream %d has id %d, want %d", tc.d, i, s.ID, iperf3.StreamIDs(n)[i])
			}
			if s.Send {
				sends++
			}
		}
		wantSends := map[iperf3.Direction]int{iperf3.Download: 0, iperf3.Upload: n, iperf3.Bidir: n / 2}[tc.d]
		if len(tt.Streams) != n || sends != wantSends {
			t.Errorf("%v: %d streams, %d sending; want %d, %d", tc.d, len(tt.Streams), sends, n, wantSends)
		}
		tt.Close()
	}
}

const goodResults = `{"cpu_util_total":1,"cpu_util_user":0.5,"cpu_util_system":0.5,"sender_has_retransmits":1,` +
	`"streams":[{"id":1,"bytes":1000,"retransmits":0,"jitter":0,"errors":0,"packets":0,"start_time":0,"end_time":1.5},` +
	`{"id":3,"bytes":2000,"retransmits":0,"jitter":0,"errors":0,"packets":0,"start_time":0,"end_time":1.5}]}`

// TestEnd plays the end of a test with good and broken results messages.
func TestEnd(t *testing.T) {
	for _, tc := range []struct {
		name  string
		reply []byte // after EXCHANGE_RESULTS and reading ours
		want  string // error; "" = success
	}{
		{"good", append(frame(goodResults), byte(iperf3.DisplayResults)), ""},
		{"not JSON", frame(`{"cpu_util_total":`), "server's results: not valid JSON"},
		{"no streams", frame(`{"cpu_util_total":1,"cpu_util_user":1,"cpu_util_system":1,"sender_has_retransmits":0}`), "streams missing"},
		{"unknown stream", frame(strings.Replace(goodResults, `"id":3`, `"id":7`, 1)), "stream 7, which this test does not have"},
		{"duplicate stream", frame(strings.Replace(goodResults, `"id":3`, `"id":1`, 1)), "stream id 1 appears twice"},
		{"negative bytes", frame(strings.Replace(goodResults, `"bytes":2000`, `"bytes":-5`, 1)), "bytes -5 is not a count"},
		{"zero length", []byte{0, 0, 0, 0}, "length 0 outside"},
		{"huge length", []byte{0x7f, 0, 0, 0}, "length 2130706432 outside"},
		{"cut short", frame(goodResults)[:50], "cut short: server closed the connection"},
		{"no display", frame(goodResults), "closed the control connection while we waited for DISPLAY_RESULTS"},
		{"wrong state after results", append(frame(goodResults), byte(iperf3.TestStart)), "server sent TEST_START (1) where DISPLAY_RESULTS belongs"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ours := make(chan []byte, 1)
			addr := fake(t, func(ctl net.Conn, accept func() net.Conn) {
				upToRunning(t, ctl, accept, 2)
				var b [1]byte
				if _, err := io.ReadFull(ctl, b[:]); err != nil || iperf3.State(b[0]) != iperf3.TestEnd {
					t.Errorf("want TEST_END, got %v %v", b, err)
					return
				}
				state(ctl, iperf3.ExchangeResults)
				body, err := iperf3.ReadJSON(ctl, "client's results")
				if err != nil {
					t.Error(err)
					return
				}
				ours <- body
				ctl.Write(tc.reply)
				if tc.want == "" {
					if _, err := io.ReadFull(ctl, b[:]); err != nil || iperf3.State(b[0]) != iperf3.IperfDone {
						t.Errorf("want IPERF_DONE, got %v %v", b, err)
					}
				}
			})
			tt, err := iperf3.Start(context.Background(), iperf3.Config{Direction: iperf3.Upload, Streams: 2, Duration: time.Second,
				Dial: dial(addr), Timeout: time.Second})
			if err != nil {
				t.Fatal(err)
			}
			defer tt.Close()
			res, err := tt.End(context.Background(), 1500*time.Millisecond, []int64{1111, 2222})
			if tc.want != "" {
				if err == nil || !strings.Contains(err.Error(), tc.want) {
					t.Fatalf("error %v; want it to say %q", err, tc.want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Streams) != 2 || res.Streams[0].Bytes != 1000 || res.Streams[1].Bytes != 2000 || res.Streams[1].EndTime != 1.5 {
				t.Errorf("server's results %+v", res)
			}
			// Ours: parseable by the same rules iperf3 applies, our counts by id.
			r, err := iperf3.ParseResults(<-ours)
			if err != nil {
				t.Fatalf("our results do not parse: %v", err)
			}
			if len(r.Streams) != 2 || r.Streams[0].ID != 1 || r.Streams[0].Bytes != 1111 || r.Streams[1].ID != 3 || r.Streams[1].Bytes != 2222 {
				t.Errorf("our results %+v", r.Streams)
			}
		})
	}
}

// TestServerEndsEarly: a server that gives up during the test is noticed
// at once, not when the client wants to end it.
func TestServerEndsEarly(t *testing.T) {
	addr := fake(t, func(ctl net.Conn, accept func() net.Conn) {
		upToRunning(t, ctl, accept, 1)
		state(ctl, iperf3.ServerTerminate)
	})
	tt, err := iperf3.Start(context.Background(), iperf3.Config{Direction: iperf3.Download, Streams: 1, Duration: time.Second, Dial: dial(addr)})
	if err != nil {
		t.Fatal(err)
	}
	defer tt.Close()
	select {
	case <-tt.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("Done not closed after SERVER_TERMINATE")
	}
	if err := tt.Err(); err == nil || !strings.Contains(err.Error(), "SERVER_TERMINATE") {
		t.Errorf("Err() = %v; want it to name SERVER_TERMINATE", err)
	}
	if _, err := tt.End(context.Background(), time.Second, []int64{0}); err == nil {
		t.Error("End after the server ended the test succeeded")
	}
}
