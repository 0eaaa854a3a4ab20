package plan

import (
	"strings"
	"testing"
)

// TestPoliceBurst: the police recipe's bucket is 20 ms at the rate (at
// least 16 full frames) unless iqdisc_opts gives 'burst SIZE' in tc's
// units; a bucket below one frame, a size tc would not read and any other
// word are refused, naming the option.
func TestPoliceBurst(t *testing.T) {
	for _, c := range []struct {
		name     string
		download uint64
		opts     string
		want     uint32
		err      string
	}{
		{"20 ms at 50 Mbit/s", 50000, "", 125000, ""},
		{"16 frames at 1 Mbit/s", 1000, "", 16 * 1514, ""},
		{"seed 001's 1000k", 50000, "burst 1000k", 1024000, ""},
		{"bytes, the last wins", 50000, "burst 3000 burst 60kb", 61440, ""},
		{"one frame", 50000, "burst 1514", 1514, ""},
		{"below a frame", 50000, "burst 1500", 0, "burst 1500 bytes is less than one full frame (1514 bytes)"},
		{"no size", 50000, "burst", 0, "burst needs a size"},
		{"bad size", 50000, "burst lots", 0, `burst "lots"`},
		{"zero", 50000, "burst 0", 0, "outside 1 byte..2 GiB"},
		{"a leaf option", 50000, "limit 1000", 0, `option iqdisc_opts: police: unknown option "limit"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			q := baseQueue()
			q.Script, q.Download, q.IQdiscOpts = "police", c.download, c.opts
			p, err := Build(q, Env{MTU: 1500})
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("error %v, want it to contain %q", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := p.Ingress.Hook[0].Actions[0].Police.Burst; got != c.want {
				t.Errorf("burst %d, want %d", got, c.want)
			}
		})
	}
}

func FuzzParsePoliceOpts(f *testing.F) {
	for _, s := range []string{"", "burst 1000k", "burst", "burst 1mbit burst 3", "flows", "burst -1", "burst 4gb"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		burst, err := parsePoliceOpts(strings.Fields(s))
		if err != nil {
			if !strings.HasPrefix(err.Error(), "police: ") {
				t.Errorf("error %q does not name the recipe", err)
			}
			return
		}
		// Accepted input is burst/size pairs, or nothing.
		f := strings.Fields(s)
		if (len(f) == 0) != (burst == 0) || len(f)%2 != 0 {
			t.Errorf("%q: accepted with burst %d", s, burst)
		}
	})
}
