package netperf

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestAptNonFree runs scripts/apt-non-free.sh, which lets setup.sh
// install Debian's netperf (non-free only), on copies of an /etc/apt: it
// must reuse the machine's own archive and suites, whatever form its
// sources take, leave an already-enabled non-free alone, rewrite its own
// files consistently when they exist, and refuse clearly when there is no
// Debian source to extend.
func TestAptNonFree(t *testing.T) {
	if _, err := exec.LookPath("sh"); err != nil {
		t.Skip("needs sh")
	}
	script, err := filepath.Abs("../../scripts/apt-non-free.sh")
	if err != nil {
		t.Fatal(err)
	}
	const deb822 = `Types: deb
# http://snapshot.debian.org/archive/debian/20250520T000000Z
URIs: http://deb.debian.org/debian
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: http://deb.debian.org/debian-security
Suites: bookworm-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
`
	const want822 = "Types: deb\nURIs: http://deb.debian.org/debian\nSuites: bookworm bookworm-updates\nComponents: non-free\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n"
	for _, tc := range []struct {
		name  string
		files map[string]string // under etc/apt
		want  string            // the .sources file without comments; "" none
		fail  string            // in the error output, for a refusal
		say   string            // in the output
	}{
		{name: "deb822", files: map[string]string{"sources.list.d/debian.sources": deb822}, want: want822},
		{name: "files from an earlier run", files: map[string]string{
			"sources.list.d/debian.sources":       deb822,
			"sources.list.d/sqm-non-free.sources": "Types: deb\nURIs: http://old.example/debian\nSuites: bookworm\nComponents: non-free\n",
			"preferences.d/sqm-non-free-netperf":  "Package: netperf\nPin: release c=non-free\nPin-Priority: 500\n",
			"sources.list.d/other.sources":        "Types: deb\nURIs: https://deb.nodesource.com/node_20.x\nSuites: nodistro\nComponents: main\n",
			"sources.list.d/disabled.sources":     "Enabled: no\nTypes: deb\nURIs: http://mirror.example/debian\nSuites: bookworm\nComponents: main\n",
			"sources.list.d/google.list.disabled": "deb https://packages.cloud.google.com/apt cloud-sdk-bookworm main\n",
		}, want: want822},
		{name: "one-line sources.list", files: map[string]string{"sources.list": "# comment\n" +
			"deb [arch=amd64 signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://ftp.de.debian.org/debian bookworm main contrib\n" +
			"deb http://ftp.de.debian.org/debian bookworm-updates main\n" +
			"deb http://security.debian.org/debian-security bookworm-security main\n" +
			"deb-src http://ftp.de.debian.org/debian bookworm main\n"},
			want: "Types: deb\nURIs: http://ftp.de.debian.org/debian\nSuites: bookworm bookworm-updates\nComponents: non-free\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n"},
		{name: "non-free already enabled", files: map[string]string{
			"sources.list.d/debian.sources":       strings.Replace(deb822, "Components: main\n", "Components: main contrib non-free\n", 1),
			"sources.list.d/sqm-non-free.sources": "stale",
		}, say: "already enables non-free"},
		{name: "no Debian source", files: map[string]string{"sources.list.d/other.sources": "Types: deb\nURIs: https://deb.nodesource.com/node_20.x\nSuites: nodistro\nComponents: main\n"},
			fail: "found no Debian source for bookworm"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			apt := filepath.Join(root, "etc", "apt")
			for _, d := range []string{"sources.list.d", "preferences.d"} {
				os.MkdirAll(filepath.Join(apt, d), 0o755)
			}
			os.WriteFile(filepath.Join(root, "etc", "os-release"), []byte("PRETTY_NAME=\"Debian GNU/Linux 12 (bookworm)\"\nVERSION_CODENAME=bookworm\nID=debian\n"), 0o644)
			for name, body := range tc.files {
				if err := os.WriteFile(filepath.Join(apt, name), []byte(body), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			out, err := exec.Command("sh", script, apt).CombinedOutput()
			if tc.fail != "" {
				if err == nil || !strings.Contains(string(out), tc.fail) {
					t.Fatalf("%v, output %q; want a refusal saying %q", err, out, tc.fail)
				}
				return
			}
			if err != nil {
				t.Fatalf("%v: %s", err, out)
			}
			if !strings.Contains(string(out), tc.say) {
				t.Errorf("output %q does not say %q", out, tc.say)
			}
			src, serr := os.ReadFile(filepath.Join(apt, "sources.list.d", "sqm-non-free.sources"))
			pin, perr := os.ReadFile(filepath.Join(apt, "preferences.d", "sqm-non-free-netperf"))
			if tc.want == "" {
				if serr == nil || perr == nil {
					t.Fatalf("wrote a source or pin although non-free was enabled:\n%s\n%s", src, pin)
				}
				return
			}
			if serr != nil || perr != nil {
				t.Fatal(serr, perr)
			}
			var got strings.Builder
			for line := range strings.SplitSeq(string(src), "\n") {
				if line != "" && !strings.HasPrefix(line, "#") {
					got.WriteString(line + "\n")
				}
			}
			if got.String() != tc.want {
				t.Errorf("source:\n%s\nwant:\n%s", got.String(), tc.want)
			}
			// netperf at the default priority, all else from non-free never.
			p := string(pin)
			i, j := strings.Index(p, "Package: netperf\nPin: release c=non-free\nPin-Priority: 500\n"), strings.Index(p, "Package: *\nPin: release c=non-free\nPin-Priority: -1\n")
			if i < 0 || j < 0 {
				t.Errorf("pin:\n%s", p)
			}
		})
	}
}
