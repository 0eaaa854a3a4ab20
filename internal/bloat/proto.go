package bloat

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"time"

	"sqm/internal/bloat/probewire"
	"sqm/internal/json"
)

// ProtocolVersion is the control protocol's version. A server refuses a
// client that speaks another version and says which one it speaks.
const ProtocolVersion = 1

// DefaultPort is where `sqm server` listens (TCP for control and load, UDP
// for latency probes) unless told otherwise: one above netperf's 12865, so
// it is easy to remember and does not collide with netperf or iperf3 (5201).
const DefaultPort = 12866

// Session timing. Both ends derive how long a session may last from these
// constants, so the server never ends a session the client still needs: the
// client asks for its schedule plus clientGrace (sent as the hello's
// GraceMs), the server grants that grace up to maxSessionGrace and says so in
// its welcome, and the client bounds every wait after its schedule (upload
// drains, late probe replies) by the granted end. On a bloated link the drain
// after an upload phase waits behind seconds of queue; a fixed server grace
// shorter than that drain cut such sessions (the lab's unshaped upload).
const (
	// sessionGrace is granted to clients that ask for no grace (clients
	// from before GraceMs existed).
	sessionGrace = 5 * time.Second
	// maxSessionGrace caps the grace a client may ask for, so a client
	// cannot hold a session far beyond the MaxDuration it was checked
	// against.
	maxSessionGrace = 30 * time.Second
	// maxUploadDrain bounds how long the client waits after an upload
	// phase for the server's count of the bytes that arrived.
	maxUploadDrain = 10 * time.Second
	// maxLateReplyWait bounds the client's wait for late probe replies
	// after the schedule.
	maxLateReplyWait = 2 * time.Second
	// setupAllowance covers the handshake and opening the probe sockets
	// before the schedule starts, and the client's own wake-up delays.
	setupAllowance = 2 * time.Second
)

// clientGrace is what a client running plan asks beyond the schedule: setup,
// one drain per phase with upload streams (a drain can run into the next
// phase), and the wait for late replies.
func clientGrace(plan []plannedPhase) time.Duration {
	g := setupAllowance + maxLateReplyWait
	for _, p := range plan {
		if p.up > 0 {
			g += maxUploadDrain
		}
	}
	return g
}

// grantGrace is the server's answer to a client asking for grace asked,
// with limit the server's cap (maxSessionGrace; tests lower it).
func grantGrace(asked, limit time.Duration) time.Duration {
	return min(max(asked, sessionGrace), limit)
}

// maxMessage bounds one control message. Everything legitimate fits in a few
// hundred bytes; anything longer is refused before it is read.
const maxMessage = 4096

// Message types. Every TCP connection starts with the client sending either
// a hello (control connection) or a stream (load connection).
//
//	control: client hello → server challenge → client auth → server welcome | error
//	         ... the connection stays open for the session; closing it ends the session
//	load:    client stream(token, dir, dscp) → server sends (dir "down") or sinks (dir "up")
const (
	msgHello     = "hello"
	msgChallenge = "challenge"
	msgAuth      = "auth"
	msgWelcome   = "welcome"
	msgError     = "error"
	msgStream    = "stream"
)

// Directions of a load stream, from the client's point of view.
const (
	DirDown = "down"
	DirUp   = "up"
)

// message is the single wire type of the control protocol: a JSON object
// framed by a two-byte big-endian length. One flat type keeps the decoder
// (the part exposed to the network, and fuzzed) small.
type message struct {
	Type    string `json:"type"`
	Version int    `json:"version,omitempty"`
	// hello: what the client intends to do. DurationMs is the test's
	// schedule (idle lead, load, idle tail); GraceMs is how much longer the
	// client may need the session beyond it (connection setup, draining
	// upload queues, late probe replies; see clientGrace). Clients that send
	// no GraceMs get sessionGrace.
	DurationMs int64 `json:"duration_ms,omitempty"`
	GraceMs    int64 `json:"grace_ms,omitempty"`
	Streams    int   `json:"streams,omitempty"`
	// challenge/auth: HMAC-SHA256(secret, nonce) proves the secret without sending it.
	Nonce []byte `json:"nonce,omitempty"`
	MAC   []byte `json:"mac,omitempty"`
	// welcome: the session token for load streams and probes, and the limits.
	// GraceMs (also in hello) is the grace the server granted: the session
	// ends DurationMs+GraceMs after the server granted it (at the hello, or
	// later if the hello waited for its address's slot), never sooner.
	Token         []byte `json:"token,omitempty"`
	MaxDurationMs int64  `json:"max_duration_ms,omitempty"`
	MaxStreams    int    `json:"max_streams,omitempty"`
	// stream
	Dir  string `json:"dir,omitempty"`
	DSCP int    `json:"dscp,omitempty"`
	// error: why the server refused.
	Error string `json:"error,omitempty"`
}

// writeMessage frames and writes m.
func writeMessage(w io.Writer, m *message) error {
	b, err := json.Marshal(m)
	if err != nil {
		return fmt.Errorf("encode %s message: %w", m.Type, err)
	}
	if len(b) > maxMessage {
		return fmt.Errorf("encode %s message: %d bytes exceeds the %d-byte limit", m.Type, len(b), maxMessage)
	}
	buf := make([]byte, 2+len(b))
	binary.BigEndian.PutUint16(buf, uint16(len(b)))
	copy(buf[2:], b)
	_, err = w.Write(buf)
	return err
}

// readMessage reads one framed message and checks it is well formed for its
// type. It never reads more than maxMessage+2 bytes, so a peer cannot make
// it allocate or block beyond what the caller's deadline allows.
func readMessage(r io.Reader) (*message, error) {
	var hdr [2]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return nil, err
	}
	n := int(binary.BigEndian.Uint16(hdr[:]))
	if n == 0 || n > maxMessage {
		return nil, fmt.Errorf("message length %d outside 1..%d", n, maxMessage)
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(r, b); err != nil {
		return nil, fmt.Errorf("message body: %w", err)
	}
	return decodeMessage(b)
}

// decodeMessage parses and validates one message body.
func decodeMessage(b []byte) (*message, error) {
	var m message
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("malformed message: %w", err)
	}
	if err := m.validate(); err != nil {
		return nil, err
	}
	return &m, nil
}

var errBadMessage = errors.New("invalid message")

func (m *message) validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s: %s", errBadMessage, m.Type, fmt.Sprintf(format, args...))
	}
	switch m.Type {
	case msgHello:
		if m.DurationMs <= 0 || m.DurationMs > int64(24*time.Hour/time.Millisecond) {
			return bad("duration %d ms outside 1 ms..24 h", m.DurationMs)
		}
		if m.Streams < 0 || m.Streams > 1024 {
			return bad("%d streams outside 0..1024", m.Streams)
		}
		if m.GraceMs < 0 || m.GraceMs > int64(24*time.Hour/time.Millisecond) {
			return bad("grace %d ms outside 0..24 h", m.GraceMs)
		}
	case msgChallenge:
		if len(m.Nonce) != 32 {
			return bad("nonce has %d bytes, want 32", len(m.Nonce))
		}
	case msgAuth:
		if len(m.MAC) != 0 && len(m.MAC) != sha256.Size {
			return bad("mac has %d bytes, want 0 or %d", len(m.MAC), sha256.Size)
		}
	case msgWelcome:
		if len(m.Token) != tokenLen {
			return bad("token has %d bytes, want %d", len(m.Token), tokenLen)
		}
		if m.GraceMs < 0 || m.GraceMs > int64(24*time.Hour/time.Millisecond) {
			return bad("grace %d ms outside 0..24 h", m.GraceMs)
		}
	case msgError:
		if m.Error == "" {
			return bad("no error text")
		}
	case msgStream:
		if len(m.Token) != tokenLen {
			return bad("token has %d bytes, want %d", len(m.Token), tokenLen)
		}
		if m.Dir != DirDown && m.Dir != DirUp {
			return bad("direction %q is neither %q nor %q", m.Dir, DirDown, DirUp)
		}
		if m.DSCP < 0 || m.DSCP > 63 {
			return bad("dscp %d outside 0..63", m.DSCP)
		}
	default:
		return fmt.Errorf("%w: unknown type %q", errBadMessage, m.Type)
	}
	return nil
}

// mac proves knowledge of the shared secret for one challenge.
func mac(secret string, nonce []byte) []byte {
	h := hmac.New(sha256.New, []byte(secret))
	h.Write(nonce)
	return h.Sum(nil)
}

const tokenLen = probewire.TokenLen

// Probe datagrams: their format lives in internal/bloat/probewire, which
// the router's reflector probing shares without linking package net.
type probe = probewire.Packet

const (
	probeLen     = probewire.Len
	probeRequest = probewire.Request
	probeReply   = probewire.Reply
)
