package plan

import (
	"strings"
	"testing"
)

// TestCheckIFBsInUse: the one IFB collision rule, shared by `sqm plan`
// and the service (which adds the IFBs installed shaping already owns).
func TestCheckIFBsInUse(t *testing.T) {
	build := func(name, iface string, down uint64) *Plan {
		q := baseQueue()
		q.Name, q.Interface, q.Download = name, iface, down
		return mustBuild(t, q, 1500)
	}
	long1 := build("a", "enx001122334455", 1000)
	long2 := build("b", "enx001122334466", 1000)
	for _, tt := range []struct {
		name  string
		plans []*Plan
		inUse map[string]string
		want  []string // all must appear; none: no error
	}{
		{"distinct", []*Plan{build("a", "eth0", 1000), build("b", "eth1", 1000)}, nil, nil},
		{"same IFB", []*Plan{long1, long2}, nil, []string{`queue "a" (interface enx001122334455) and queue "b" (interface enx001122334466) both need IFB ifb4enx00112233`}},
		{"IFB held by installed shaping", []*Plan{long2}, map[string]string{"ifb4enx00112233": "enx001122334455"},
			[]string{`queue "b" (interface enx001122334466) needs IFB ifb4enx00112233, which sqm already uses for interface enx001122334455`}},
		{"own IFB in use is fine", []*Plan{long1}, map[string]string{"ifb4enx00112233": "enx001122334455"}, nil},
		{"IFB is another plan's interface", []*Plan{build("a", "eth0", 1000), build("b", "ifb4eth0", 0)}, nil,
			[]string{`queue "a" (interface eth0) needs IFB ifb4eth0, which is the interface queue "b" shapes`}},
		{"every conflict at once", []*Plan{long1, long2, build("c", "eth0", 0), build("d", "eth0", 0)}, nil,
			[]string{"both need IFB", `queue "c" and queue "d" both shape interface eth0`}},
	} {
		err := CheckIFBsInUse(tt.plans, tt.inUse)
		if len(tt.want) == 0 {
			if err != nil {
				t.Errorf("%s: %v", tt.name, err)
			}
			continue
		}
		for _, w := range tt.want {
			if err == nil || !strings.Contains(err.Error(), w) {
				t.Errorf("%s: error %v, want it to contain %q", tt.name, err, w)
			}
		}
	}
}
