//go:build linux

package cli

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"sqm/internal/codelpolice"
	"sqm/internal/kernel"
)

// TestStatusCodelPolice: the program's counters appear in the text and,
// under the documented keys, in the JSON.
func TestStatusCodelPolice(t *testing.T) {
	d := &kernel.DeviceStatus{Device: "eth1", Ifindex: 2, Filters: 1, CodelPolice: &codelpolice.Counters{
		Passed: 1000, PassedBytes: 1514000, Marked: 12, MarkedBytes: 18168, DroppedSignal: 3, DroppedSignalBytes: 4542,
		DroppedLimit: 7, DroppedLimitBytes: 10598, Spared: 5, NonIP: 2, SparedLimit: 4,
	}}
	var b bytes.Buffer
	printDevice(&b, d)
	want := "  codel_police: passed 1000 (1.5M), ECN-marked 12 (18.2k), dropped 3 as signals (4.5k) and 7 past the limit (10.6k), thin flows spared 5 signals and 4 limit drops, non-IP 2\n"
	if !strings.Contains(b.String(), want) {
		t.Errorf("status lacks\n%s\ngot:\n%s", want, b.String())
	}
	j, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{`"codel_police":{"passed_packets":1000,"passed_bytes":1514000,"marked_packets":12,"marked_bytes":18168,` +
		`"dropped_signal_packets":3,"dropped_signal_bytes":4542,"dropped_limit_packets":7,"dropped_limit_bytes":10598,"spared":5,"non_ip_packets":2,"spared_limit_packets":4}`} {
		if !strings.Contains(string(j), k) {
			t.Errorf("JSON lacks %s:\n%s", k, j)
		}
	}
	b.Reset()
	d.CodelPolice = nil
	printDevice(&b, d)
	if strings.Contains(b.String(), "codel_police") {
		t.Errorf("status without the program mentions it:\n%s", b.String())
	}
}
