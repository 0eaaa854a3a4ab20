//go:build linux

package netlink

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

// FuzzReply feeds arbitrary datagrams to the reply parser and the
// exchange, as a request, an acked request and a dump would see them:
// nothing may panic, every error must say it is netlink's, a refusal is
// an *Error with an errno, and what parses re-encodes to the same
// messages. Seeds: testdata/fuzz/FuzzReply (acks, refusals with extended
// acks, dumps, truncated and garbage replies).
func FuzzReply(f *testing.F) {
	f.Add(errMsg(0, true, nil))
	f.Add(cat(link(tSeq, Multi, "lo"), done))
	f.Fuzz(func(t *testing.T, b []byte) {
		msgs, err := parseMessages(b)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "netlink: message ") {
				t.Fatalf("framing error %q does not name the message", err)
			}
			return
		}
		var again []byte
		for _, m := range msgs {
			again = appendMessage(again, m)
			for _, fn := range []func(Message) error{ackError, doneError} {
				if err := fn(m); err != nil {
					check(t, err)
				}
			}
		}
		re, err := parseMessages(again)
		if err != nil || len(re) != len(msgs) {
			t.Fatalf("re-encoded %d messages parse as %d: %v", len(msgs), len(re), err)
		}
		for i := range re {
			if re[i].Header != msgs[i].Header || !bytes.Equal(re[i].Data, msgs[i].Data) {
				t.Fatalf("message %d: %+v re-encodes as %+v", i, msgs[i], re[i])
			}
		}
		for _, x := range []exchange{
			{seq: tSeq, port: tPort},
			{seq: tSeq, port: tPort, ack: true},
			{seq: tSeq, port: tPort, dump: true},
		} {
			done, err := x.take(msgs)
			if err != nil {
				if !done {
					t.Fatalf("error %v without the exchange ending", err)
				}
				check(t, err)
			}
			for _, m := range x.out {
				if m.Header.Sequence != tSeq || m.Header.PID != tPort {
					t.Fatalf("reply for seq %d port %d taken", m.Header.Sequence, m.Header.PID)
				}
			}
		}
	})
}

func check(t *testing.T, err error) {
	t.Helper()
	if !strings.HasPrefix(err.Error(), "netlink: ") {
		t.Fatalf("error %q does not say it is netlink's", err)
	}
	var e *Error
	if errors.As(err, &e) && e.Errno == 0 {
		t.Fatalf("refusal %q without an errno", err)
	}
}
