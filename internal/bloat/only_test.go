package bloat

import (
	"strings"
	"testing"
)

// TestOnlyOneDirection: speedtest mode with Only runs just that phase
// between the idle lead and tail; Only outside speedtest mode or naming no
// direction is refused.
func TestOnlyOneDirection(t *testing.T) {
	for _, tt := range []struct {
		only string
		want string
	}{
		{"", "idle-before download upload idle-after"},
		{DirDown, "idle-before download idle-after"},
		{DirUp, "idle-before upload idle-after"},
	} {
		o := Options{Addr: "192.0.2.1", Mode: ModeSpeedtest, Only: tt.only}
		if err := o.defaults(); err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, p := range schedule(&o) {
			names = append(names, p.name)
		}
		if got := strings.Join(names, " "); got != tt.want {
			t.Errorf("Only %q: phases %q, want %q", tt.only, got, tt.want)
		}
	}
	for _, o := range []Options{{Addr: "192.0.2.1", Mode: ModeRRUL, Only: DirDown}, {Addr: "192.0.2.1", Mode: ModeSpeedtest, Only: "sideways"}} {
		if err := o.defaults(); err == nil {
			t.Errorf("%+v accepted", o)
		}
	}
}
