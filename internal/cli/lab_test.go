//go:build linux && !sqm_nolab

package cli

import (
	"bytes"
	"context"
	"flag"
	"strings"
	"testing"
	"time"

	"sqm/internal/lab"
)

// TestLabFlags checks flag handling up to the point the lab would start
// (bad input is refused with status 2 before anything is built).
func TestLabFlags(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		code    int
		wantErr string
	}{
		{"bad rate", []string{"lab", "--down", "fast"}, 2, "--down"},
		{"bad link layer", []string{"lab", "--linklayer", "docsis"}, 2, "ethernet, atm or ptm"},
		{"bad mode", []string{"lab", "--mode", "flood"}, 2, "rrul or speedtest"},
		{"config and flags", []string{"lab", "--config", "/etc/config/sqm", "--qdisc", "fq_codel"}, 2, "--config and --qdisc"},
		{"short duration", []string{"lab", "--duration", "1s"}, 2, "--duration"},
		{"arguments", []string{"lab", "eth0"}, 2, "no arguments"},
		{"bare seconds too short", []string{"lab", "--duration", "1"}, 2, "--duration 1s: give 2s to 10m"},
		{"bad duration", []string{"lab", "--duration", "ten"}, 2, "expected a duration such as 10 (seconds)"},
		{"autorate without trace", []string{"lab", "--autorate"}, 2, "--autorate needs --trace-down or --trace-up"},
		{"cake-autorate without trace", []string{"lab", "--cake-autorate", "."}, 2, "--cake-autorate needs --trace-down or --trace-up"},
		{"no-load without trace", []string{"lab", "--no-load"}, 2, "--no-load needs --trace-down or --trace-up"},
		{"icmp-ahead without trace", []string{"lab", "--icmp-ahead"}, 2, "--icmp-ahead needs --trace-down or --trace-up"},
		{"two controllers", []string{"lab", "--trace-down", "../trace/testdata/step-40-10-40.steps", "--autorate", "--cake-autorate", "."}, 2, "--autorate and --cake-autorate each name the controller"},
		{"not a cake-autorate checkout", []string{"lab", "--trace-down", "../trace/testdata/step-40-10-40.steps", "--cake-autorate", "testdata"}, 2, "--cake-autorate testdata: no cake-autorate.sh there"},
		{"bad trace", []string{"lab", "--trace-up", "testdata/bad-trace.steps"}, 2, "--trace-up: trace bad-trace.steps:1: rate: \"40\" has no unit"},
		{"missing trace", []string{"lab", "--trace-down", "testdata/none.steps"}, 2, "--trace-down: trace: open testdata/none.steps"},
		{"trace and mode", []string{"lab", "--trace-down", "../trace/testdata/step-40-10-40.steps", "--mode", "rrul"}, 2, "--mode does not go with --trace-down"},
		{"trace and tune", []string{"lab", "--trace-down", "../trace/testdata/step-40-10-40.steps", "--tune"}, 2, "--tune does not go with"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			code := run(context.Background(), &Env{Stdout: &out, Stderr: &errb, Getenv: func(string) string { return "" }}, tt.args)
			if code != tt.code || !strings.Contains(errb.String(), tt.wantErr) {
				t.Errorf("sqm %s: status %d, stderr %q; want %d and %q", strings.Join(tt.args, " "), code, errb.String(), tt.code, tt.wantErr)
			}
		})
	}
}

// TestLabAutorateOmitted: a build without sqm's autorate (-tags
// sqm_noautorate leaves lab.Autorate nil) refuses --autorate, naming the tag.
func TestLabAutorateOmitted(t *testing.T) {
	saved := lab.Autorate
	lab.Autorate = nil
	defer func() { lab.Autorate = saved }()
	var out, errb bytes.Buffer
	args := []string{"lab", "--trace-down", "../trace/testdata/step-40-10-40.steps", "--autorate"}
	code := run(context.Background(), &Env{Stdout: &out, Stderr: &errb, Getenv: func(string) string { return "" }}, args)
	if code != 1 || !strings.Contains(errb.String(), "autorate controller is not in this build (-tags sqm_noautorate)") {
		t.Errorf("status %d, stderr %q", code, errb.String())
	}
}

// TestLabBareSeconds: `sqm lab --duration 10` failed with 'invalid value
// "10" for flag -duration'; bare numbers are seconds, as for flent -l.
func TestLabBareSeconds(t *testing.T) {
	fs := flag.NewFlagSet("lab", flag.ContinueOnError)
	cmdLab().flags(fs)
	if err := fs.Parse([]string{"--duration", "10", "--rtt", "0.05"}); err != nil {
		t.Fatal(err)
	}
	o, err := labOptions(fs, func(n string) string { return fs.Lookup(n).Value.String() })
	if err != nil {
		t.Fatal(err)
	}
	if o.Duration != 10*time.Second || o.Link.RTT != 50*time.Millisecond {
		t.Errorf("duration %v, rtt %v; want 10s, 50ms", o.Duration, o.Link.RTT)
	}
}

func TestLabHelp(t *testing.T) {
	var out bytes.Buffer
	if code := run(context.Background(), &Env{Stdout: &out, Stderr: &out, Getenv: func(string) string { return "" }}, []string{"help", "lab"}); code != 0 {
		t.Fatalf("help lab: status %d", code)
	}
	for _, want := range []string{"--vm", "--linklayer", "--plot", "piece_of_cake"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("help lab lacks %q", want)
		}
	}
}
