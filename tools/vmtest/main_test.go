package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestSplitRun(t *testing.T) {
	tests := []struct {
		in, top, sub string
		wantErr      bool
	}{
		{in: ""},
		{in: "Cake", top: "Cake"},
		{in: "Cake/atm", top: "Cake", sub: "atm"},
		{in: "(a|b/c)/d/e", top: "(a|b/c)", sub: "d/e"},
		{in: `x\/y`, top: `x\/y`},
		{in: "[", wantErr: true},
	}
	for _, tt := range tests {
		re, sub, err := splitRun(tt.in)
		if (err != nil) != tt.wantErr {
			t.Errorf("%q: err = %v", tt.in, err)
			continue
		}
		top := ""
		if re != nil {
			top = re.String()
		}
		if top != tt.top || sub != tt.sub {
			t.Errorf("%q: got (%q, %q), want (%q, %q)", tt.in, top, sub, tt.top, tt.sub)
		}
	}
}

func TestSummarizer(t *testing.T) {
	var out bytes.Buffer
	s := &summarizer{w: &out}
	s.Write([]byte("=== vmtest begin sqm/a\n=== RUN   TestVMX\n--- PASS: TestVMX (0.00s)\nPA"))
	s.Write([]byte("SS\n=== vmtest end sqm/a 0 1234\n=== vmtest end sqm/b 2 50\ntrailing"))
	s.flush()
	want := "=== RUN   TestVMX\n--- PASS: TestVMX (0.00s)\nPASS\nvmtest: sqm/a exited 0 after 1.234s\nvmtest: sqm/b exited 2 after 0.050s\ntrailing\n"
	if out.String() != want {
		t.Errorf("got\n%q\nwant\n%q", out.String(), want)
	}
}

// TestRunScript runs the generated script with sh on the host against fake
// "test binaries" to check the rc files and markers.
func TestRunScript(t *testing.T) {
	dir := t.TempDir()
	pkgs := []*pkg{
		{ImportPath: "sqm/ok", Dir: dir, Bin: "ok.test", Pattern: "^(TestVMA)$"},
		{ImportPath: "sqm/bad", Dir: dir, Bin: "bad.test", Pattern: "^(TestVMB)$/x y", BenchPattern: "^(BenchmarkVMC)$"},
	}
	os.WriteFile(filepath.Join(dir, "ok.test"), []byte("#!/bin/sh\necho \"args: $*\"\n"), 0o755)
	os.WriteFile(filepath.Join(dir, "bad.test"), []byte("#!/bin/sh\necho \"args: $*\"\nexit 3\n"), 0o755)
	script := strings.ReplaceAll(runScript(pkgs, time.Minute, "3x", false), "O=/run/sqm-out", "O="+dir)
	out, err := exec.Command("sh", "-c", script).CombinedOutput()
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	for _, want := range []string{
		"args: -test.v -test.run ^(TestVMA)$ -test.timeout 1m0s",
		"args: -test.v -test.run ^(TestVMB)$/x y -test.bench ^(BenchmarkVMC)$ -test.benchmem -test.benchtime 3x -test.timeout 1m0s",
		"=== vmtest end sqm/ok 0 ",
		"=== vmtest end sqm/bad 3 ",
	} {
		if !strings.Contains(string(out), want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	for bin, want := range map[string]string{"ok.test": "0", "bad.test": "3"} {
		b, _ := os.ReadFile(filepath.Join(dir, bin+".rc"))
		if strings.TrimSpace(string(b)) != want {
			t.Errorf("%s.rc = %q, want %s", bin, b, want)
		}
	}
}

func TestHiddenInVM(t *testing.T) {
	for dir, want := range map[string]bool{"/tmp/x": true, "/run": true, "/tmpfoo": false, "/work/main/internal/vm": false, "/var/tmp/x": false} {
		if got := hiddenInVM(dir); got != want {
			t.Errorf("hiddenInVM(%q) = %v, want %v", dir, got, want)
		}
	}
}

func TestSharesFor(t *testing.T) {
	pkgs := []*pkg{
		{ImportPath: "m/a", Dir: "/tmp/clone/internal/a", ModuleDir: "/tmp/clone"},
		{ImportPath: "m/b", Dir: "/tmp/clone/internal/b", ModuleDir: "/tmp/clone"},
		{ImportPath: "n/c", Dir: "/run/user/x/c"},
		{ImportPath: "w/d", Dir: "/work/main/internal/d", ModuleDir: "/work/main"},
	}
	got := strings.Join(sharesFor(pkgs), " ")
	if want := "/tmp/clone /run/user/x/c"; got != want {
		t.Errorf("shares %q, want %q", got, want)
	}
}
