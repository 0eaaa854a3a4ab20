package uci

import (
	"errors"
	"io"
	"reflect"
	"strings"
	"testing"
	"testing/iotest"
)

// TestParseReads: Parse reads everything however the reader splits it
// (one byte at a time, data with io.EOF, more than one buffer) and says
// which file a read error came from.
func TestParseReads(t *testing.T) {
	src := "config queue 'wan'\n\toption interface 'eth0'\n" + strings.Repeat("# a comment long enough to need more than one buffer\n", 200)
	want, err := Parse("f", strings.NewReader(src))
	if err != nil {
		t.Fatal(err)
	}
	for _, rd := range []io.Reader{
		iotest.OneByteReader(strings.NewReader(src)),
		iotest.DataErrReader(strings.NewReader(src)),
		iotest.HalfReader(strings.NewReader(src)),
	} {
		got, err := Parse("f", rd)
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("%T: %v, %v; want what a strings.Reader gives", rd, got, err)
		}
	}
	boom := errors.New("boom")
	if _, err := Parse("f", iotest.ErrReader(boom)); !errors.Is(err, boom) || !strings.Contains(err.Error(), "read f") {
		t.Errorf("error reader: %v, want read f: boom", err)
	}
}
