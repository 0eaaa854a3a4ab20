package kernel

import (
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
	"unsafe"

	tc "github.com/florianl/go-tc"
	"github.com/florianl/go-tc/core"
	"github.com/mdlayher/netlink"
)

var captureGoTC = os.Getenv("SQM_CAPTURE_GOTC") != ""

// recConn stands in for go-tc's netlink socket and keeps what it sends.
type recConn struct{ sent []netlink.Message }

func (r *recConn) Close() error                        { return nil }
func (r *recConn) JoinGroup(uint32) error              { return nil }
func (r *recConn) LeaveGroup(uint32) error             { return nil }
func (r *recConn) Receive() ([]netlink.Message, error) { return nil, nil }
func (r *recConn) Send(m netlink.Message) (netlink.Message, error) {
	r.sent = append(r.sent, m)
	return m, nil
}
func (r *recConn) SetOption(netlink.ConnOption, bool) error { return nil }
func (r *recConn) SetReadDeadline(time.Time) error          { return nil }

// TestCaptureGoTC writes testdata/requests-gotc/*.txt: the requests go-tc
// v0.4.8 encoded for every op of every golden plan (the encoder sqm used
// until it encoded everything itself), for ifindex 3, on this machine's
// byte order. SQM_CAPTURE_GOTC=1 runs it.
func TestCaptureGoTC(t *testing.T) {
	if !captureGoTC {
		t.Skip("SQM_CAPTURE_GOTC not set")
	}
	core.SetClockParameters(1000, ticksPerMicrosecond) // what InitializeClock reads from /proc/net/psched
	rec := &recConn{}
	var tcc tc.Tc
	f := reflect.ValueOf(&tcc).Elem().FieldByName("con")
	reflect.NewAt(f.Type(), unsafe.Pointer(f.UnsafeAddr())).Elem().Set(reflect.ValueOf(rec))
	send := func(o *op) (string, error) {
		if o.useRaw {
			return ownRequest(o)
		}
		obj := o.obj
		obj.Ifindex = 3
		var err error
		switch o.kind {
		case opQdisc:
			err = tcc.Qdisc().Add(&obj)
		case opClass:
			err = tcc.Class().Add(&obj)
		case opFilter:
			err = tcc.Filter().Add(&obj)
		}
		if err != nil {
			return "", err
		}
		m := rec.sent[len(rec.sent)-1]
		return fmt.Sprintf("%d %#x %s", m.Header.Type, uint16(m.Header.Flags), hex.EncodeToString(m.Data)), nil
	}
	names, plans, variants := goldenPlans(t)
	dir := filepath.Join("testdata", "requests-"+byteOrderName())
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		var lines []string
		for i, p := range plans[n] {
			lines = append(lines, requestLines(t, p, variants[n][i], send)...)
		}
		if err := os.WriteFile(filepath.Join(dir, n+".txt"), []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
