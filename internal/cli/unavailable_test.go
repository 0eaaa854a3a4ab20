package cli

import (
	"runtime"
	"testing"
)

// TestStandIns checks the messages of the stand-ins other OSes and router
// builds get (cmd/sqm's TestBuildTags runs them in real binaries).
func TestStandIns(t *testing.T) {
	tests := []struct {
		c    *command
		want string
	}{
		{needsLinux("start"), "sqm start needs Linux (this is " + runtime.GOOS + ")"},
		{omitted("test", "sqm_notest"), "sqm test is not in this build (built with -tags sqm_notest)"},
	}
	if runtime.GOOS == "linux" {
		tests = append(tests, struct {
			c    *command
			want string
		}{linuxPart("lab", "sqm_nolab"), "sqm lab is not in this build (built with -tags sqm_nolab)"})
	}
	for _, tt := range tests {
		if tt.c.unavailable != tt.want {
			t.Errorf("%s: %q; want %q", tt.c.name, tt.c.unavailable, tt.want)
		}
		if tt.c.run != nil || tt.c.flags != nil {
			t.Errorf("%s: a stand-in must have neither run nor flags", tt.c.name)
		}
	}
}
