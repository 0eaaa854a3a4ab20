package cli

import (
	"bytes"
	"context"
	"flag"
	"regexp"
	"strings"
	"testing"
)

// TestHelpFlagSpelling: the help listed flags as "-flag" (flag.PrintDefaults)
// under usage lines that say "--flag". Every flag line must use two dashes,
// and every --flag a usage line or help text names must exist.
func TestHelpFlagSpelling(t *testing.T) {
	named := regexp.MustCompile(`(?:^|[\s\[|(])--([a-z0-9][a-z0-9-]*)`)
	for _, c := range commands() {
		var out bytes.Buffer
		printHelp(&out, c)
		fs := flag.NewFlagSet(c.name, flag.ContinueOnError)
		if c.flags != nil {
			c.flags(fs)
		}
		inFlags := false
		for _, line := range strings.Split(out.String(), "\n") {
			if line == "flags:" {
				inFlags = true
				continue
			}
			if inFlags && strings.HasPrefix(line, "  -") && !strings.HasPrefix(line, "  --") {
				t.Errorf("sqm help %s: flag line %q has one dash", c.name, line)
			}
		}
		for _, m := range named.FindAllStringSubmatch(c.usage+"\n"+c.help, -1) {
			if fs.Lookup(m[1]) == nil && m[1] != "help" {
				t.Errorf("sqm help %s names --%s, which is not one of its flags", c.name, m[1])
			}
		}
	}
}

// TestFlagErrorSpelling: parse errors name the flag as --flag too.
func TestFlagErrorSpelling(t *testing.T) {
	for _, args := range [][]string{
		{"lab", "--duration", "soon"},
		{"status", "--bogus"},
		{"daemon", "--config"},
	} {
		var out, errb bytes.Buffer
		code := run(context.Background(), &Env{Stdout: &out, Stderr: &errb, Getenv: func(string) string { return "" }}, args)
		if code != 2 {
			t.Errorf("sqm %s: status %d, want 2", strings.Join(args, " "), code)
		}
		first := strings.SplitN(errb.String(), "\n", 2)[0]
		if !strings.Contains(first, " --"+strings.TrimPrefix(args[1], "--")) {
			t.Errorf("sqm %s: %q does not name --%s", strings.Join(args, " "), first, strings.TrimPrefix(args[1], "--"))
		}
	}
}
