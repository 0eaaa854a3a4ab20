package cli

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
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
				return
			}
			if err != nil {
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
