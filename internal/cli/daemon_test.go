//go:build linux

package cli

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestDaemonSection(t *testing.T) {
	const queue = "config queue 'wan'\n\toption enabled '1'\n\toption interface 'eth1'\n\toption script 'simplest.qos'\n"
	tests := []struct {
		name    string
		section string
		args    []string
		want    map[string]string
		wantErr string
	}{
		{"no section: flag defaults", "", nil,
			map[string]string{"restore": "true", "check-interval": "30s", "stop-on-exit": "false", "log-level": "info"}, ""},
		{"section sets", "config sqm 'daemon'\n\toption restore '0'\n\toption check_interval '90'\n\toption debounce '500ms'\n\toption stop_on_exit '1'\n\toption log_level 'debug'\n", nil,
			map[string]string{"restore": "false", "check-interval": "1m30s", "debounce": "500ms", "stop-on-exit": "true", "log-level": "debug"}, ""},
		{"flag wins", "config sqm 'daemon'\n\toption restore '0'\n\toption check_interval '90'\n", []string{"--restore=true", "--check-interval", "10s"},
			map[string]string{"restore": "true", "check-interval": "10s"}, ""},
		{"bad bool", "config sqm 'daemon'\n\toption restore 'maybe'\n", nil, nil, `sqm:6: sqm "daemon" option restore: "maybe" is not a boolean`},
		{"bad duration", "config sqm 'daemon'\n\toption check_interval 'soon'\n", nil, nil, `sqm:6: sqm "daemon" option check_interval: "soon" is not a duration`},
		// Issue 23: a bad option is reported but the others still apply
		// (the daemon logs it and runs), and a refused queue section
		// does not hide the daemon's settings.
		{"bad option keeps the others", "config sqm 'daemon'\n\toption restore 'maybe'\n\toption check_interval '90'\n", nil,
			map[string]string{"restore": "true", "check-interval": "1m30s"}, `sqm:6: sqm "daemon" option restore: "maybe" is not a boolean`},
		{"refused queue section", "config queue 'bad'\n\toption enabled '1'\n\toption download 'x'\nconfig sqm 'daemon'\n\toption restore '0'\n", nil,
			map[string]string{"restore": "false"}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "sqm")
			if err := os.WriteFile(path, []byte(queue+tt.section), 0o644); err != nil {
				t.Fatal(err)
			}
			fs := flag.NewFlagSet("daemon", flag.ContinueOnError)
			cmdDaemon().flags(fs)
			if err := fs.Parse(append([]string{"--config", path}, tt.args...)); err != nil {
				t.Fatal(err)
			}
			err := daemonSection(fs, path)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v; want %q", err, tt.wantErr)
				}
			} else if err != nil {
				t.Fatal(err)
			}
			for f, want := range tt.want {
				if got := flagString(fs, f); got != want {
					t.Errorf("--%s = %q; want %q", f, got, want)
				}
			}
		})
	}
}

// TestDaemonTimings checks that 0 on the command line means "none" (no
// debounce, no check, no poll) and reaches service.Daemon as a negative
// value: 0 there means "default", which once turned --debounce 0 into 1 s.
func TestDaemonTimings(t *testing.T) {
	tests := []struct {
		args                     []string
		debounce, check, pollDur time.Duration
	}{
		{nil, time.Second, 30 * time.Second, 5 * time.Second},
		{[]string{"--debounce", "0"}, -1, 30 * time.Second, 5 * time.Second},
		{[]string{"--debounce=0s", "--check-interval", "0", "--poll-interval", "0"}, -1, -1, -1},
		{[]string{"--debounce", "0.25", "--check-interval", "90", "--poll-interval", "2s"}, 250 * time.Millisecond, 90 * time.Second, 2 * time.Second},
	}
	for _, tt := range tests {
		fs := flag.NewFlagSet("daemon", flag.ContinueOnError)
		cmdDaemon().flags(fs)
		if err := fs.Parse(tt.args); err != nil {
			t.Fatalf("%q: %v", tt.args, err)
		}
		d, c, p := daemonTimings(fs)
		if d != tt.debounce || c != tt.check || p != tt.pollDur {
			t.Errorf("%q: debounce, check, poll = %v, %v, %v; want %v, %v, %v", tt.args, d, c, p, tt.debounce, tt.check, tt.pollDur)
		}
	}
}
