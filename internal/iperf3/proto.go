// Package iperf3 speaks the control protocol of iperf3 (ESnet's network
// tester) as a client, so that any stock `iperf3 -s` can be the far end of
// a load test. It was written from iperf3's documentation and from reading
// how its server behaves, not from its code.
//
// The protocol, as far as a TCP client needs it: the client opens a
// control connection and sends a 37-byte cookie (36 printable characters and
// a NUL). From then on the server drives the test by sending one signed
// state byte at a time; the client answers PARAM_EXCHANGE with its
// parameters (JSON behind a 4-byte big-endian length) and CREATE_STREAMS by
// opening the TCP data streams, each of which starts with the same cookie.
// TEST_START and TEST_RUNNING follow; then data flows until the client sends
// TEST_END. The server answers EXCHANGE_RESULTS, the client sends its
// per-stream results and reads the server's (both length-prefixed JSON),
// the server sends DISPLAY_RESULTS and the client ends with IPERF_DONE.
// A server that is running another test answers a new control connection
// with ACCESS_DENIED and closes it; SERVER_ERROR is followed by two 4-byte
// integers, iperf3's error number and the system errno.
package iperf3

import (
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"syscall"

	"sqm/internal/json"
)

// DefaultPort is iperf3's default control and data port.
const DefaultPort = 5201

// State is one control-channel state byte.
type State int8

// The states a client sees or sends. The unused ones (3, 5-8) are left out:
// no iperf3 since 3.0 sends them.
const (
	TestStart       State = 1
	TestRunning     State = 2
	TestEnd         State = 4
	ParamExchange   State = 9
	CreateStreams   State = 10
	ServerTerminate State = 11
	ClientTerminate State = 12
	ExchangeResults State = 13
	DisplayResults  State = 14
	IperfStart      State = 15
	IperfDone       State = 16
	AccessDenied    State = -1
	ServerError     State = -2
)

var stateNames = map[State]string{
	TestStart: "TEST_START", TestRunning: "TEST_RUNNING", TestEnd: "TEST_END",
	ParamExchange: "PARAM_EXCHANGE", CreateStreams: "CREATE_STREAMS",
	ServerTerminate: "SERVER_TERMINATE", ClientTerminate: "CLIENT_TERMINATE",
	ExchangeResults: "EXCHANGE_RESULTS", DisplayResults: "DISPLAY_RESULTS",
	IperfStart: "IPERF_START", IperfDone: "IPERF_DONE",
	AccessDenied: "ACCESS_DENIED", ServerError: "SERVER_ERROR",
}

func (s State) String() string {
	if n, ok := stateNames[s]; ok {
		return n
	}
	return "unknown state " + strconv.Itoa(int(s))
}

// CookieSize is the length of the cookie on the wire, NUL included.
const CookieSize = 37

// cookieAlphabet is what iperf3 draws its cookies from; servers compare
// the bytes up to the NUL, so any printable characters would do, but a
// cookie that looks like iperf3's own keeps server logs unsurprising.
const cookieAlphabet = "abcdefghijklmnopqrstuvwxyz234567"

// NewCookie returns a fresh random cookie.
func NewCookie() ([CookieSize]byte, error) {
	var c [CookieSize]byte
	if _, err := rand.Read(c[:CookieSize-1]); err != nil {
		return c, err
	}
	for i := 0; i < CookieSize-1; i++ {
		c[i] = cookieAlphabet[int(c[i])%len(cookieAlphabet)]
	}
	c[CookieSize-1] = 0
	return c, nil
}

// MaxJSON bounds a length-prefixed JSON message we accept. A server's
// results for 128 streams are about 20 kB; anything near this size is not
// iperf3 talking, and reading it would only spend memory.
const MaxJSON = 1 << 20

// ErrBusy is returned when the server is running another test.
var ErrBusy = errors.New("server busy: an iperf3 server runs one test at a time and answered ACCESS_DENIED (another test is running, or the server requires authentication)")

var errClosed = errors.New("server closed the control connection")

// ReadState reads one state byte. A connection closed instead is reported
// with what was expected, since "EOF" alone does not say which step failed.
func ReadState(r io.Reader, waiting string) (State, error) {
	var b [1]byte
	if _, err := io.ReadFull(r, b[:]); err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return 0, fmt.Errorf("%w while we waited for %s", errClosed, waiting)
		}
		return 0, fmt.Errorf("reading the control connection while we waited for %s: %w", waiting, err)
	}
	return State(int8(b[0])), nil
}

// ServerErr is a SERVER_ERROR report: iperf3's own error number (i_errno)
// and the system errno behind it, if any.
type ServerErr struct {
	Code  int32
	Errno int32
}

func (e *ServerErr) Error() string {
	s := fmt.Sprintf("server reported an error (SERVER_ERROR, iperf3 error %d", e.Code)
	if e.Code >= 0 && int(e.Code) < len(ierrNames) && ierrNames[e.Code] != "" {
		s += ": " + ierrNames[e.Code]
	}
	if e.Errno != 0 {
		s += fmt.Sprintf("; errno %d: %v", e.Errno, syscall.Errno(e.Errno))
	}
	return s + ")"
}

// ierrNames are a few of iperf3's error numbers that a remote client can
// provoke, worded for someone who cannot see the server's log.
var ierrNames = [...]string{
	100: "the server could not receive the parameters",
	103: "the server found the parameters bad",
	107: "the server rejected a stream: wrong cookie or too many streams",
	116: "the server refused the requested rate",
	117: "the server could not receive our results",
	118: "the server could not send its results",
	119: "the server found a stream id it does not know",
	120: "the server could not send a message",
	121: "the server could not receive a message (the client closed early?)",
}

// readServerError reads the two integers that follow SERVER_ERROR.
func readServerError(r io.Reader) error {
	var b [8]byte
	if _, err := io.ReadFull(r, b[:]); err != nil {
		return fmt.Errorf("server reported an error (SERVER_ERROR) but closed before saying which: %w", err)
	}
	return &ServerErr{Code: int32(binary.BigEndian.Uint32(b[:4])), Errno: int32(binary.BigEndian.Uint32(b[4:]))}
}

// WriteJSON sends v as one length-prefixed JSON message.
func WriteJSON(w io.Writer, v any) error {
	body, err := json.Marshal(v)
	if err != nil {
		return err
	}
	msg := make([]byte, 4+len(body))
	binary.BigEndian.PutUint32(msg, uint32(len(body)))
	copy(msg[4:], body)
	_, err = w.Write(msg)
	return err
}

// ReadJSON reads one length-prefixed JSON message and returns its body,
// which it has checked to be one well-formed JSON value. what names the
// message in errors.
func ReadJSON(r io.Reader, what string) ([]byte, error) {
	var hdr [4]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return nil, fmt.Errorf("%s: reading its length: %w", what, eofSays(err))
	}
	n := binary.BigEndian.Uint32(hdr[:])
	if n == 0 || n > MaxJSON {
		return nil, fmt.Errorf("%s: length %d outside 1..%d bytes (is this an iperf3 server?)", what, n, MaxJSON)
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(r, body); err != nil {
		return nil, fmt.Errorf("%s: %d-byte message cut short: %w", what, n, eofSays(err))
	}
	if !json.Valid(body) {
		return nil, fmt.Errorf("%s: not valid JSON: %q", what, clip(body))
	}
	return body, nil
}

func eofSays(err error) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return errors.New("server closed the connection")
	}
	return err
}

func clip(b []byte) []byte {
	if len(b) > 60 {
		return append(b[:60:60], "..."...)
	}
	return b
}

// Params are the test parameters the client sends. Fields iperf3 reads
// only as JSON true are omitted when false, because a JSON false is not
// "off" to it but "not given".
type Params struct {
	TCP           bool   `json:"tcp"`
	Omit          int    `json:"omit"`
	Time          int    `json:"time"` // seconds; the server gives up 40 s after it
	Parallel      int    `json:"parallel"`
	Reverse       bool   `json:"reverse,omitempty"`
	Bidirectional bool   `json:"bidirectional,omitempty"`
	Len           int    `json:"len"`
	PacingTimer   int    `json:"pacing_timer"`
	TOS           int    `json:"TOS,omitempty"`
	ClientVersion string `json:"client_version"`
}

// StreamResult is one stream's line in a results message.
type StreamResult struct {
	ID          int     `json:"id"`
	Bytes       int64   `json:"bytes"`
	Retransmits int64   `json:"retransmits"`
	Jitter      float64 `json:"jitter"`
	Errors      int64   `json:"errors"`
	Packets     int64   `json:"packets"`
	StartTime   float64 `json:"start_time"`
	EndTime     float64 `json:"end_time"`
}

// Results is a results message, the client's or the server's.
type Results struct {
	CPUUtilTotal         float64        `json:"cpu_util_total"`
	CPUUtilUser          float64        `json:"cpu_util_user"`
	CPUUtilSystem        float64        `json:"cpu_util_system"`
	SenderHasRetransmits int            `json:"sender_has_retransmits"`
	CongestionUsed       string         `json:"congestion_used,omitempty"`
	Streams              []StreamResult `json:"streams"`
}

// ParseResults decodes a results message and checks what a client relies
// on: the fields iperf3 itself requires are present with the right types,
// stream ids are positive and distinct, byte counts are not negative and
// times are finite with end >= start.
func ParseResults(body []byte) (*Results, error) {
	var raw struct {
		CPUUtilTotal         *float64 `json:"cpu_util_total"`
		CPUUtilUser          *float64 `json:"cpu_util_user"`
		CPUUtilSystem        *float64 `json:"cpu_util_system"`
		SenderHasRetransmits *float64 `json:"sender_has_retransmits"`
		CongestionUsed       *string  `json:"congestion_used"`
		Streams              *[]struct {
			ID          *float64 `json:"id"`
			Bytes       *float64 `json:"bytes"`
			Retransmits *float64 `json:"retransmits"`
			Jitter      *float64 `json:"jitter"`
			Errors      *float64 `json:"errors"`
			Packets     *float64 `json:"packets"`
			StartTime   *float64 `json:"start_time"`
			EndTime     *float64 `json:"end_time"`
		} `json:"streams"`
	}
	d := json.NewDecoder(bytes.NewReader(body))
	if err := d.Decode(&raw); err != nil {
		return nil, fmt.Errorf("results: %v", err)
	}
	switch {
	case raw.CPUUtilTotal == nil, raw.CPUUtilUser == nil, raw.CPUUtilSystem == nil:
		return nil, errors.New("results: cpu_util_total, cpu_util_user or cpu_util_system missing")
	case raw.SenderHasRetransmits == nil:
		return nil, errors.New("results: sender_has_retransmits missing")
	case raw.Streams == nil:
		return nil, errors.New("results: streams missing")
	}
	r := &Results{CPUUtilTotal: *raw.CPUUtilTotal, CPUUtilUser: *raw.CPUUtilUser, CPUUtilSystem: *raw.CPUUtilSystem,
		SenderHasRetransmits: int(*raw.SenderHasRetransmits)}
	if raw.CongestionUsed != nil {
		r.CongestionUsed = *raw.CongestionUsed
	}
	seen := map[int]bool{}
	for i, s := range *raw.Streams {
		if s.ID == nil || s.Bytes == nil || s.Retransmits == nil || s.Jitter == nil || s.Errors == nil || s.Packets == nil {
			return nil, fmt.Errorf("results: stream %d: id, bytes, retransmits, jitter, errors or packets missing", i)
		}
		id, bytes := *s.ID, *s.Bytes
		if id != math.Trunc(id) || id < 1 || id > math.MaxInt32 {
			return nil, fmt.Errorf("results: stream %d: id %v is not a positive integer", i, id)
		}
		if seen[int(id)] {
			return nil, fmt.Errorf("results: stream id %d appears twice", int(id))
		}
		seen[int(id)] = true
		// 2^53: beyond it a JSON number no longer counts bytes exactly.
		if bytes != math.Trunc(bytes) || bytes < 0 || bytes > 1<<53 {
			return nil, fmt.Errorf("results: stream %d: bytes %v is not a count", int(id), bytes)
		}
		sr := StreamResult{ID: int(id), Bytes: int64(bytes), Retransmits: int64(*s.Retransmits), Jitter: *s.Jitter,
			Errors: int64(*s.Errors), Packets: int64(*s.Packets)}
		if s.StartTime != nil && s.EndTime != nil {
			sr.StartTime, sr.EndTime = *s.StartTime, *s.EndTime
			if sr.EndTime < sr.StartTime {
				return nil, fmt.Errorf("results: stream %d ends (%v s) before it starts (%v s)", sr.ID, sr.EndTime, sr.StartTime)
			}
		}
		r.Streams = append(r.Streams, sr)
	}
	return r, nil
}

// StreamIDs returns the ids iperf3 gives n streams in creation order: 1,
// then 3, 4, ... (its numbering skips 2, and the server numbers the same
// way, so the results of both sides line up by id).
func StreamIDs(n int) []int {
	ids := make([]int, n)
	for i := range ids {
		ids[i] = i + 2
	}
	if n > 0 {
		ids[0] = 1
	}
	return ids
}
