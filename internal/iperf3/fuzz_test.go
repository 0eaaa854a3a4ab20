package iperf3_test

import (
	"bytes"
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"sqm/internal/iperf3"
)

func FuzzParseResults(f *testing.F) {
	f.Add([]byte(goodResults))
	f.Add([]byte(`{"cpu_util_total":0,"cpu_util_user":0,"cpu_util_system":0,"sender_has_retransmits":-1,"streams":[]}`))
	f.Add([]byte(strings.Replace(goodResults, `"start_time":0`, `"start_time":9`, 1)))
	f.Add([]byte(`{"streams":[{"id":1.5}]}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := iperf3.ParseResults(b)
		if err != nil {
			return
		}
		seen := map[int]bool{}
		for _, s := range r.Streams {
			if s.ID < 1 || seen[s.ID] || s.Bytes < 0 || s.EndTime < s.StartTime {
				t.Fatalf("accepted a bad stream %+v in %q", s, b)
			}
			seen[s.ID] = true
		}
	})
}

// script is a connection whose peer says the fuzz input and ignores
// everything written to it.
type script struct{ r *bytes.Reader }

func (s script) Read(b []byte) (int, error)       { return s.r.Read(b) }
func (s script) Write(b []byte) (int, error)      { return len(b), nil }
func (s script) Close() error                     { return nil }
func (s script) LocalAddr() net.Addr              { return &net.TCPAddr{} }
func (s script) RemoteAddr() net.Addr             { return &net.TCPAddr{} }
func (s script) SetDeadline(time.Time) error      { return nil }
func (s script) SetReadDeadline(time.Time) error  { return nil }
func (s script) SetWriteDeadline(time.Time) error { return nil }

// FuzzClient plays arbitrary bytes as the server's side of the control
// connection through a whole test: the client must end with an error or a
// consistent result, never panic or hang.
func FuzzClient(f *testing.F) {
	good := append([]byte{9, 10, 1, 2, 13}, frame(goodResults)...)
	good = append(good, 14)
	f.Add(good)
	f.Add([]byte{0xff})
	f.Add([]byte{0xfe, 0, 0, 0, 107, 0, 0, 0, 0})
	f.Add([]byte{9, 10, 1, 2, 11})
	f.Add(append([]byte{9, 10, 1, 2, 13}, frame(`{}`)...))
	f.Fuzz(func(t *testing.T, b []byte) {
		ctl := script{bytes.NewReader(b)}
		cfg := iperf3.Config{Direction: iperf3.Upload, Streams: 2, Duration: time.Second,
			Dial: func(ctx context.Context, i int, send bool) (net.Conn, error) {
				if i < 0 {
					return ctl, nil
				}
				return script{bytes.NewReader(nil)}, nil
			}}
		tt, err := iperf3.Start(context.Background(), cfg)
		if err != nil {
			return
		}
		defer tt.Close()
		if len(tt.Streams) != 2 {
			t.Fatalf("%d streams", len(tt.Streams))
		}
		res, err := tt.End(context.Background(), time.Second, []int64{1, 2})
		if err != nil {
			return
		}
		for _, s := range res.Streams {
			if s.ID != 1 && s.ID != 3 {
				t.Fatalf("result for stream %d accepted", s.ID)
			}
		}
	})
}
