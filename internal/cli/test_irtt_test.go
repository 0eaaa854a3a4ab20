//go:build !sqm_notest

package cli

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sqm/internal/bloat"
)

func TestIRTTOptions(t *testing.T) {
	dir := t.TempDir()
	keyFile := filepath.Join(dir, "key")
	os.WriteFile(keyFile, []byte("0x6b6579\n"), 0o600)
	twoLines := filepath.Join(dir, "two")
	os.WriteFile(twoLines, []byte("0x6b6579\nignored\n"), 0o600)
	empty := filepath.Join(dir, "empty")
	os.WriteFile(empty, []byte("\n"), 0o600)
	cases := []struct {
		name             string
		addr, key, file  string
		env              string
		wantKey, wantErr string
	}{
		{name: "none"},
		{name: "server only", addr: "192.0.2.1"},
		{name: "flag key", addr: "192.0.2.1", key: "sekrit", wantKey: "sekrit"},
		{name: "hex key from file", addr: "192.0.2.1", file: keyFile, wantKey: "key"},
		{name: "key from env", addr: "192.0.2.1", env: "envkey", wantKey: "envkey"},
		{name: "flag beats env", addr: "192.0.2.1", key: "flag", env: "envkey", wantKey: "flag"},
		{name: "env without --irtt is ignored", env: "envkey"},
		{name: "flag and file", addr: "192.0.2.1", key: "k", file: keyFile, wantErr: "exclude each other"},
		{name: "missing file", addr: "192.0.2.1", file: filepath.Join(dir, "nope"), wantErr: "--irtt-hmac-file"},
		{name: "empty file", addr: "192.0.2.1", file: empty, wantErr: ": empty"},
		// Read as sqm's own secret files are: a second line means a wrong file.
		{name: "two lines", addr: "192.0.2.1", file: twoLines, wantErr: "more than one line"},
		{name: "key without server", key: "k", wantErr: "needs --irtt"},
		{name: "bad hex", addr: "192.0.2.1", key: "0xzz", wantErr: "must be hex"},
	}
	for _, tc := range cases {
		env := &Env{Getenv: func(k string) string {
			if k == "SQM_IRTT_HMAC" {
				return tc.env
			}
			return ""
		}}
		var o bloat.Options
		err := irttOptions(env, &o, tc.addr, tc.key, tc.file)
		switch {
		case tc.wantErr != "":
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("%s: got %v, want an error with %q", tc.name, err, tc.wantErr)
			}
		case err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case o.IRTT != tc.addr || string(o.IRTTKey) != tc.wantKey:
			t.Errorf("%s: IRTT %q key %q, want %q %q", tc.name, o.IRTT, o.IRTTKey, tc.addr, tc.wantKey)
		}
	}
}

// TestIRTTBadAddress: a malformed --irtt is refused before anything is
// dialled, naming the flag's value.
func TestIRTTBadAddress(t *testing.T) {
	for _, addr := range []string{"host:port", "[::1", "h:0", ":2112"} {
		var out, errb bytes.Buffer
		code := run(context.Background(), &Env{Stdout: &out, Stderr: &errb, Getenv: func(string) string { return "" }},
			[]string{"test", "--mode", "idle", "--irtt", addr, "192.0.2.1:9"})
		if code == 0 || !strings.Contains(errb.String(), "irtt server") || !strings.Contains(errb.String(), addr) {
			t.Errorf("--irtt %q: exit %d, stderr %q; want a refusal naming it", addr, code, errb.String())
		}
	}
}
