package main

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// goTool finds the go command that runs this test, for builds and
// package lists under other tags and OSes.
func goTool(t *testing.T) string {
	t.Helper()
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	t.Skip("no go command in PATH: the build-tag tests build sqm themselves")
	return ""
}

// deps lists the sqm packages linked into cmd/sqm for goos and tags.
func deps(t *testing.T, goTool, goos, tags string) []string {
	t.Helper()
	cmd := exec.Command(goTool, "list", "-buildvcs=false", "-deps", "-tags", tags, ".")
	cmd.Env = append(os.Environ(), "GOOS="+goos, "GOARCH=amd64", "CGO_ENABLED=0")
	out, err := cmd.Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			t.Fatalf("go list -tags %q for %s: %v\n%s", tags, goos, err, ee.Stderr)
		}
		t.Fatalf("go list: %v", err)
	}
	var pkgs []string
	for _, p := range strings.Fields(string(out)) {
		if strings.HasPrefix(p, "sqm/") {
			pkgs = append(pkgs, p)
		}
	}
	return pkgs
}

// TestPortableDeps checks what the darwin, windows and freebsd builds link:
// the tester, and nothing that needs Linux's netlink (the shaping
// commands are stand-ins there). `make cross` compiles them; this names
// the package that leaked in when one does.
func TestPortableDeps(t *testing.T) {
	g := goTool(t)
	linuxOnly := []string{"sqm/internal/kernel", "sqm/internal/service", "sqm/internal/features",
		"sqm/internal/linkwatch", "sqm/internal/netns", "sqm/internal/lab", "sqm/internal/vm", "sqm/internal/web"}
	for _, goos := range []string{"darwin", "windows", "freebsd"} {
		got := deps(t, g, goos, "")
		if !slices.Contains(got, "sqm/internal/bloat") {
			t.Errorf("%s build lacks sqm/internal/bloat: sqm test and sqm server must build there", goos)
		}
		for _, p := range linuxOnly {
			if slices.Contains(got, p) {
				t.Errorf("%s build links %s, which needs Linux", goos, p)
			}
		}
	}
}

// TestBuildTags builds sqm with each router tag and runs the commands it
// leaves out: each must say it is not in this build and which tag did it,
// and exit 1; the packages behind it must be gone from the binary, and be
// in the full build (else the tag saves nothing). New tags belong here.
func TestBuildTags(t *testing.T) {
	if testing.Short() {
		t.Skip("builds sqm several times; skipped with -short")
	}
	g := goTool(t)
	full := deps(t, g, "linux", "")
	tests := []struct {
		tags string
		gone []string
		cmds map[string]string // command -> tag it must name
		// flags are command lines whose flags the build leaves out:
		// each must be refused (exit 2) with a message that names the tag.
		flags [][]string
	}{
		{"sqm_nolab", []string{"sqm/internal/lab", "sqm/internal/vm", "sqm/internal/netns"},
			map[string]string{"lab": "sqm_nolab"}, nil},
		{"sqm_noweb", []string{"sqm/internal/web"},
			map[string]string{"passwd": "sqm_noweb"}, nil},
		{"sqm_nolab,sqm_notest,sqm_noweb,sqm_noautorate", []string{"sqm/internal/lab", "sqm/internal/vm", "sqm/internal/web",
			"sqm/internal/bloat", "sqm/internal/plot", "sqm/internal/report", "sqm/internal/iperf3", "sqm/internal/irtt", "sqm/internal/rpm",
			"sqm/internal/autorun", "sqm/internal/autorate", "sqm/internal/reflector", "sqm/internal/trafficwake"},
			map[string]string{"lab": "sqm_nolab", "test": "sqm_notest", "server": "sqm_notest", "passwd": "sqm_noweb"}, nil},
		{"sqm_noautorate", []string{"sqm/internal/autorun", "sqm/internal/autorate", "sqm/internal/reflector", "sqm/internal/trafficwake"}, nil, nil},
		{"sqm_notls", []string{"sqm/internal/rpm"}, nil,
			[][]string{{"test", "--rpm", "https://127.0.0.1:9"}, {"test", "--insecure", "127.0.0.1:9"}, {"server", "--rpm", ":0"}}},
	}
	dir := t.TempDir()
	for _, tt := range tests {
		t.Run(tt.tags, func(t *testing.T) {
			got := deps(t, g, "linux", tt.tags)
			for _, p := range tt.gone {
				if !slices.Contains(full, p) {
					t.Errorf("the full build does not link %s: the test's list is stale", p)
				}
				if slices.Contains(got, p) {
					t.Errorf("-tags %s still links %s", tt.tags, p)
				}
			}
			bin := filepath.Join(dir, "sqm-"+strings.ReplaceAll(tt.tags, ",", "-"))
			build := exec.Command(g, "build", "-buildvcs=false", "-tags", tt.tags, "-o", bin, ".")
			build.Env = append(os.Environ(), "CGO_ENABLED=0")
			if out, err := build.CombinedOutput(); err != nil {
				t.Fatalf("go build -tags %s: %v\n%s", tt.tags, err, out)
			}
			for name, tag := range tt.cmds {
				var stderr strings.Builder
				cmd := exec.Command(bin, name, "--some-flag", "arg")
				cmd.Stderr = &stderr
				err := cmd.Run()
				var ee *exec.ExitError
				if !errors.As(err, &ee) || ee.ExitCode() != 1 {
					t.Errorf("sqm %s in the %s build: %v; want exit status 1", name, tt.tags, err)
				}
				want := "sqm " + name + " is not in this build (built with -tags " + tag + ")\n"
				if stderr.String() != want {
					t.Errorf("sqm %s in the %s build says %q; want %q", name, tt.tags, stderr.String(), want)
				}
			}
			for _, args := range tt.flags {
				var stderr strings.Builder
				cmd := exec.Command(bin, args...)
				cmd.Stderr = &stderr
				err := cmd.Run()
				var ee *exec.ExitError
				if !errors.As(err, &ee) || ee.ExitCode() != 2 {
					t.Errorf("sqm %s in the %s build: %v; want exit status 2", strings.Join(args, " "), tt.tags, err)
				}
				if want := "is not in this build (built with -tags " + tt.tags; !strings.Contains(stderr.String(), want) {
					t.Errorf("sqm %s in the %s build says %q; want it to say %q", strings.Join(args, " "), tt.tags, stderr.String(), want)
				}
			}
			help, err := exec.Command(bin, "--help").Output()
			if err != nil {
				t.Fatalf("sqm --help: %v", err)
			}
			for name := range tt.cmds {
				if !strings.Contains(string(help), "  "+name+" ") {
					t.Errorf("sqm --help in the %s build does not list %s:\n%s", tt.tags, name, help)
				}
			}
		})
	}
}
