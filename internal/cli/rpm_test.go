//go:build !sqm_notest

package cli

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// TestRPMFlagErrors checks that misused --rpm flags of test and server
// stop before any network traffic, with exit status 2 (usage) or 1, and a
// message naming the flag.
func TestRPMFlagErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"test", "--insecure", "192.0.2.1"}, 2, "--insecure only applies to --rpm"},
		{[]string{"test", "--rpm-load", "up", "192.0.2.1"}, 2, "--rpm-load only applies to --rpm"},
		{[]string{"test", "--rpm", "192.0.2.1", "--mode", "rrul"}, 2, "--mode does not apply to --rpm"},
		{[]string{"test", "--rpm", "192.0.2.1", "--flent", "x.flent.gz"}, 2, "--flent does not apply to --rpm"},
		{[]string{"test", "--rpm", "192.0.2.1", "198.51.100.1"}, 2, "drop"},
		{[]string{"test", "--rpm", "ftp://192.0.2.1/x"}, 2, "scheme must be https"},
		{[]string{"test", "--rpm", "192.0.2.1", "--rpm-load", "sideways"}, 2, `--rpm-load "sideways"`},
		{[]string{"test", "--rpm", "192.0.2.1", "--duration", "3s"}, 2, "at least 8s"},
		{[]string{"test", "--rpm", "192.0.2.1", "-4", "-6"}, 2, "exclude each other"},
		{[]string{"test", "--rpm", "192.0.2.1", "--insecure", "--ca", "x.pem"}, 2, "--ca and --insecure"},
		{[]string{"test", "--rpm", "192.0.2.1", "--ca", "/nonexistent/ca.pem"}, 1, "--ca"},
		{[]string{"server", "--listen", "127.0.0.1:0", "--rpm-cert", "c.pem"}, 2, "only apply to --rpm"},
		{[]string{"server", "--listen", "127.0.0.1:0", "--rpm", "127.0.0.1:0", "--rpm-key", "k.pem"}, 2, "go together"},
		{[]string{"server", "--listen", "127.0.0.1:0", "--rpm", "127.0.0.1:0", "--rpm-cert", "/nonexistent/c.pem", "--rpm-key", "/nonexistent/k.pem"}, 1, "--rpm-cert/--rpm-key"},
	} {
		var out, errb bytes.Buffer
		code := Run(context.Background(), tc.args, &out, &errb)
		if code != tc.code || !strings.Contains(errb.String(), tc.want) {
			t.Errorf("sqm %s: exit %d, stderr %q; want exit %d and %q", strings.Join(tc.args, " "), code, errb.String(), tc.code, tc.want)
		}
	}
}
