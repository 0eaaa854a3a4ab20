package netperf

import (
	"context"
	"errors"
	"io"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"
)

// startFake starts a scripted netserver on loopback: for each control
// connection it reads the requests and calls answer, which does what the
// test wants. It returns a client for it.
func startFake(t *testing.T, answer func(t *testing.T, ctl net.Conn, req OmniRequest, pass string)) *Client {
	t.Helper()
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				c.SetDeadline(time.Now().Add(10 * time.Second))
				m, err := ReadMessage(c)
				if err != nil {
					return
				}
				pass := ""
				if m.Type == MsgPassphrase {
					pass, _ = DecodePassphrase(&m)
					if m, err = ReadMessage(c); err != nil {
						return
					}
				}
				req, err := DecodeOmniRequest(&m)
				if err != nil {
					t.Errorf("fake server: %v", err)
					return
				}
				answer(t, c, req, pass)
			}()
		}
	}()
	return &Client{Server: netip.MustParseAddrPort(ln.Addr().String()), Timeout: 2 * time.Second,
		DialTCP: func(ctx context.Context, addr netip.AddrPort, dscp int) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "tcp4", addr.String())
		}}
}

// listenData opens a data listener and answers the request with its port.
func listenData(t *testing.T, ctl net.Conn) net.Listener {
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Error(err)
		return nil
	}
	resp := OmniResponse{DataPort: int32(l.Addr().(*net.TCPAddr).Port), SocketTOS: -1, SocketPrio: -1}
	m, _ := resp.Message()
	WriteMessage(ctl, &m)
	return l
}

func TestClientUpload(t *testing.T) {
	c := startFake(t, func(t *testing.T, ctl net.Conn, req OmniRequest, pass string) {
		if pass != "sesame" {
			t.Errorf("passphrase %q", pass)
		}
		if req.Direction != DirRecv || req.TestLength != 3 || req.SocketTOS != 46<<2 || req.Protocol != ProtoTCP {
			t.Errorf("upload request %+v", req)
		}
		l := listenData(t, ctl)
		defer l.Close()
		d, err := l.Accept()
		if err != nil {
			return
		}
		n, _ := io.Copy(io.Discard, d)
		d.Close()
		res := OmniResults{BytesReceived: uint64(n), ElapsedTime: 1}
		m, _ := res.Message()
		m.Type = MsgStaleOmniResponse // as a stock netserver sends them
		WriteMessage(ctl, &m)
	})
	c.Passphrase = "sesame"
	s, err := c.Stream(context.Background(), true, 2500*time.Millisecond, 46)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Conn.Write(make([]byte, 100000)); err != nil {
		t.Fatal(err)
	}
	res, err := s.Finish(time.Now().Add(2 * time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if res.BytesReceived != 100000 {
		t.Errorf("server received %d bytes, want 100000", res.BytesReceived)
	}
}

func TestClientDownload(t *testing.T) {
	c := startFake(t, func(t *testing.T, ctl net.Conn, req OmniRequest, pass string) {
		if req.Direction != DirXmit || req.SocketTOS != -1 || pass != "" {
			t.Errorf("download request %+v, passphrase %q", req, pass)
		}
		l := listenData(t, ctl)
		defer l.Close()
		d, err := l.Accept()
		if err != nil {
			return
		}
		d.Write(make([]byte, 5000))
		d.Close()
		res := OmniResults{BytesSent: 5000}
		m, _ := res.Message()
		WriteMessage(ctl, &m)
	})
	s, err := c.Stream(context.Background(), false, time.Second, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	n, _ := io.Copy(io.Discard, s.Conn)
	res, err := s.Results(time.Now().Add(2 * time.Second))
	if err != nil || n != 5000 || res.BytesSent != 5000 {
		t.Errorf("read %d, server sent %d: %v", n, res.BytesSent, err)
	}
}

// A server that refuses, or closes the connection instead of answering,
// or answers with a port that nothing listens on, must be reported so a
// user knows which of those it was.
func TestClientRefusals(t *testing.T) {
	deadPort := func() int32 {
		l, _ := net.Listen("tcp4", "127.0.0.1:0")
		defer l.Close()
		return int32(l.Addr().(*net.TCPAddr).Port)
	}()
	for _, tc := range []struct {
		name   string
		answer func(t *testing.T, ctl net.Conn, req OmniRequest, pass string)
		want   []string
		errno  int32
	}{
		{"unknown test", func(t *testing.T, ctl net.Conn, req OmniRequest, pass string) {
			m := ErrorResponse(MsgDoOmni, ErrnoUnknownTest)
			WriteMessage(ctl, &m)
		}, []string{"refused the TCP_STREAM test", "error 998", "does not know this test"}, ErrnoUnknownTest},
		{"busy", func(t *testing.T, ctl net.Conn, req OmniRequest, pass string) {
			m := ErrorResponse(MsgOmniResponse, 16)
			WriteMessage(ctl, &m)
		}, []string{"refused the TCP_STREAM test", "error 16", "busy"}, 16},
		{"closed", func(t *testing.T, ctl net.Conn, req OmniRequest, pass string) {}, []string{"closed the control connection", "passphrase", "limit tests"}, 0},
		{"short answer", func(t *testing.T, ctl net.Conn, req OmniRequest, pass string) {
			ctl.Write(make([]byte, 100))
		}, []string{"cut short", "100 of 656"}, -1},
		{"no data listener", func(t *testing.T, ctl net.Conn, req OmniRequest, pass string) {
			resp := OmniResponse{DataPort: deadPort}
			m, _ := resp.Message()
			WriteMessage(ctl, &m)
			io.Copy(io.Discard, ctl)
		}, []string{"connect to its data port", "firewall"}, -1},
		{"bad data port", func(t *testing.T, ctl net.Conn, req OmniRequest, pass string) {
			resp := OmniResponse{DataPort: 70000}
			m, _ := resp.Message()
			WriteMessage(ctl, &m)
		}, []string{"data port 70000"}, -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := startFake(t, tc.answer)
			_, err := c.Stream(context.Background(), true, time.Second, 0)
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
			var re *RefusedError
			if errors.As(err, &re) != (tc.errno >= 0) || (re != nil && re.Errno != tc.errno) {
				t.Errorf("error %v: RefusedError %+v, want errno %d", err, re, tc.errno)
			}
		})
	}
}

// A server that never answers is given up on after Client.Timeout.
func TestClientTimeout(t *testing.T) {
	c := startFake(t, func(t *testing.T, ctl net.Conn, req OmniRequest, pass string) {
		time.Sleep(2 * time.Second)
	})
	c.Timeout = 200 * time.Millisecond
	start := time.Now()
	_, err := c.Stream(context.Background(), false, time.Second, 0)
	if err == nil || time.Since(start) > 1500*time.Millisecond {
		t.Fatalf("after %v: %v", time.Since(start), err)
	}
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() {
		t.Errorf("error %v is not a timeout", err)
	}
}
