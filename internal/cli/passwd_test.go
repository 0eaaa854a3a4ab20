//go:build linux && !sqm_noweb

package cli

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sqm/internal/web"
)

func TestPasswd(t *testing.T) {
	run := func(stdin string, args ...string) (string, string, int) {
		passwdInput = strings.NewReader(stdin)
		defer func() { passwdInput = os.Stdin }()
		var o, e bytes.Buffer
		code := Run(context.Background(), append([]string{"passwd"}, args...), &o, &e)
		return o.String(), e.String(), code
	}
	out, _, code := run("hunter22-long\n", "--users", "-", "--role", "read")
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	u, err := web.ParseUsers("out", []byte(out))
	if err != nil {
		t.Fatal(err)
	}
	if r, ok := u.Check("hunter22-long"); !ok || r != web.RoleRead {
		t.Errorf("printed line checks as %v %v; want read", r, ok)
	}

	path := filepath.Join(t.TempDir(), "etc", "web-users")
	out, _, code = run("", "--users", path, "--token")
	tok, found := strings.CutPrefix(strings.TrimSpace(out), "token (admin): ")
	if code != 0 || !found || len(tok) != 32 {
		t.Fatalf("token: exit %d, %q", code, out)
	}
	// --users - --token: the line on stdout (for a redirect), the token
	// on stderr, and the two belong together.
	line, shown, code := run("", "--users", "-", "--token", "--role", "read")
	tok2, found := strings.CutPrefix(strings.TrimSpace(shown), "token (read): ")
	if code != 0 || !found || len(tok2) != 32 {
		t.Fatalf("token to stdout: exit %d, stderr %q; want the token there", code, shown)
	}
	if u, err := web.ParseUsers("stdout", []byte(line)); err != nil {
		t.Errorf("stdout is not just a users line: %v\n%s", err, line)
	} else if r, ok := u.Check(tok2); !ok || r != web.RoleRead {
		t.Errorf("the printed line does not accept the shown token: %v %v", r, ok)
	}

	run("second-password\n", "--users", path)
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("users file: %v, mode %v; want 0600", err, fi.Mode())
	}
	u, err = web.LoadUsers(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, pw := range []string{tok, "second-password"} {
		if r, ok := u.Check(pw); !ok || r != web.RoleAdmin {
			t.Errorf("%q: %v %v; want admin", pw, r, ok)
		}
	}

	for _, tc := range []struct {
		stdin string
		args  []string
		want  string
	}{
		{"short\n", []string{"--users", "-"}, "too short"},
		{"long-enough\n", []string{"--users", "-", "--role", "root"}, `--role "root"`},
		{"", []string{"--users", "-", "extra"}, "no arguments"},
	} {
		_, e, code := run(tc.stdin, tc.args...)
		if code == 0 || !strings.Contains(e, tc.want) {
			t.Errorf("%v: exit %d, %q; want %q", tc.args, code, e, tc.want)
		}
	}
}
