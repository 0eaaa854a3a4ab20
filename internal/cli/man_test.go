//go:build linux

package cli

import (
	"bytes"
	"context"
	"os/exec"
	"strings"
	"testing"
)

// TestManPageCurrent: dist/sqm.8 (named by the systemd units' man:sqm(8))
// is exactly what `sqm help --man` prints now. -update regenerates it.
func TestManPageCurrent(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run(context.Background(), &Env{Stdout: &out, Stderr: &errb, Getenv: func(string) string { return "" }}, []string{"help", "--man"}); code != 0 {
		t.Fatalf("sqm help --man: status %d: %s", code, errb.String())
	}
	golden(t, "../../../dist/sqm.8", out.Bytes())
	for _, c := range commands() {
		if !strings.Contains(out.String(), ".SS "+c.name+"\n") {
			t.Errorf("man page has no section for %s", c.name)
		}
		for _, d := range flagDocs(c) {
			if !strings.Contains(out.String(), ".B "+roffLine(d.synopsis())+"\n") {
				t.Errorf("man page lacks %s's flag %s", c.name, d.synopsis())
			}
		}
	}
	// If man(1) is here, the page must render without roff warnings.
	if _, err := exec.LookPath("groff"); err != nil {
		t.Log("groff not installed: the page's roff syntax was not checked by a renderer")
		return
	}
	cmd := exec.Command("groff", "-man", "-Tutf8", "-ww", "-z")
	cmd.Stdin = bytes.NewReader(out.Bytes())
	msg, err := cmd.CombinedOutput()
	if err != nil || len(msg) > 0 {
		t.Errorf("groff: %v\n%s", err, msg)
	}
}
